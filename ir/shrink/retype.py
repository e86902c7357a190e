"""Re-typing a graph after its inputs changed, concretely or symbolically (z3).

`retype(g, types, op_map)` re-infers every type from new top-level input/param types (and ops
mapped by `op_map`) by each instruction's one type rule, `Op.type_rule` (the verifier's), bodies
included: None where a rule refuses. `solve_shapes(g, mode, target)` makes the input/param dims
(and size-like integer attributes) z3 terms, collects every op's constraints through the same
rule (and, for control flow, the op's `ControlFlow.relate`), and solves them for smaller dims.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op, TypeRuleError
from ir.core.shapes import Cond, Dim, is_symbolic
from ir.core.types import TensorType
from ir.ops.control import is_control

#: integer attributes never made symbolic (they pick axes or layouts, not sizes)
NON_SIZE_ATTRS = frozenset({"axis", "perm", "dims", "groups", "num_carries", "dilation", "stride",
                            "dim", "depth"})


class _Fail(Exception):
    pass


class _Typer:
    """Re-infers every type of a graph from its input types: concretely (`symbolic=False`:
    raises _Fail where a rule refuses) or symbolically (collects z3 constraints, and makes
    size-like integer attributes symbolic)."""

    def __init__(self, symbolic: bool = False, op_map: Callable[[Op], Op] | None = None):
        self.symbolic = symbolic
        self.op_map = op_map
        self.cons: list = []
        #: symbolic attribute -> its original value
        self.attr_vars: list[tuple[Any, int]] = []
        self._ids = itertools.count()

    def graph(self, g: Graph, in_types: Sequence[TensorType]) -> Graph:
        n = len(g.inputs)
        inputs = tuple(Value(v.name, t) for v, t in zip(g.inputs, in_types[:n], strict=True))
        params = tuple(Value(v.name, t) for v, t in zip(g.params, in_types[n:], strict=True))
        scope = {v.name: v.type for v in (*inputs, *params)}
        insts = []
        for inst in g.insts:
            ins = [scope[a] for a in inst.args]
            op = self.op_map(inst.op) if self.op_map else inst.op
            bodies = [self.graph(b, ts) for b, ts in
                      zip(inst.blocks, self.body_inputs(op, ins, inst.blocks), strict=True)]
            op, outs = self.results(op, ins, bodies)
            if len(outs) != len(inst.results):
                raise _Fail("result count changed")
            results = tuple(Value(r.name, t) for r, t in zip(inst.results, outs, strict=True))
            insts.append(Inst(op, inst.args, results, tuple(bodies)))
            scope.update((r.name, r.type) for r in results)
        return Graph(g.name, inputs, tuple(insts), g.outputs, params)

    @staticmethod
    def body_inputs(op: Op, ins: Sequence[TensorType], blocks: Sequence[Graph]
                    ) -> list[list[TensorType]]:
        """What each body of the instruction takes, given its operand types (asked of the op)."""
        if not blocks:
            return []
        if not is_control(op):
            raise _Fail(f"no body rule for {op.name}")
        try:
            return op.body_inputs(ins, len(blocks))
        except Exception as e:
            raise _Fail(str(e)) from None

    def results(self, op: Op, ins: list[TensorType], bodies: list[Graph]
                ) -> tuple[Op, list[TensorType]]:
        """The op (made symbolic where it can be) and its result types."""
        if not self.symbolic:
            try:
                return op, list(op.type_rule(ins, bodies))
            except Exception as e:
                raise _Fail(f"{op.name}: {e}") from None
        if bodies:
            return op, self.control(op, ins, bodies)
        sym = self._sym_op(op)
        for attempt in (sym, op) if sym is not op else (op,):
            cons: list = []
            try:
                outs = list(attempt.type_rule(ins, require=_collector(cons)))
            except TypeRuleError as e:
                raise _Fail(f"{op.name}: {e}") from None
            except Exception:
                continue
            self.cons += cons
            return attempt, outs
        raise _Fail(f"{op.name}: no symbolic type rule")

    def control(self, op: Op, ins: list[TensorType], bodies: list[Graph]) -> list[TensorType]:
        """A control-flow instruction's result types over symbolic types: the op's dtypes and
        `requires`, then its `relate` (the same rules `Op.type_rule` checks on concrete types)."""
        if not is_control(op):
            raise _Fail(f"no symbolic rule for {op.name}")
        if op.result_dtypes(tuple(t.dtype for t in ins)) is None:
            raise _Fail(f"{op.name} refuses the dtypes")
        for c in op.requires(ins):
            if not _collector(self.cons)(c):
                raise _Fail("constraint violated")
        return op.relate(ins, [body.output_types() for body in bodies], self)

    def _sym_op(self, op: Op) -> Op:
        import z3

        changes = {}
        for f in dataclasses.fields(op):
            v = getattr(op, f.name)
            if f.name in NON_SIZE_ATTRS or isinstance(v, bool):
                continue
            if isinstance(v, int) and v >= 2:
                s = z3.Int(f"a{next(self._ids)}_{f.name}")
                self.attr_vars.append((s, v))
                changes[f.name] = s
            elif isinstance(v, tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                items = []
                for x in v:
                    if x >= 2:
                        s = z3.Int(f"a{next(self._ids)}_{f.name}")
                        self.attr_vars.append((s, x))
                        items.append(s)
                    else:
                        items.append(x)
                if any(is_symbolic(x) for x in items):
                    changes[f.name] = tuple(items)
        return dataclasses.replace(op, **changes) if changes else op

    # ---- the `Relation` a control-flow op states its constraints through -------------------
    def same(self, a: Sequence[TensorType], b: Sequence[TensorType]) -> None:
        if len(a) != len(b):
            raise _Fail("signature length differs")
        for x, y in zip(a, b, strict=True):
            if x.dtype != y.dtype or x.rank != y.rank:
                raise _Fail("signature types differ")
            for p, q in zip(x.shape, y.shape, strict=True):
                self.eq(p, q)

    def eq(self, a: Dim, b: Dim) -> None:
        if is_symbolic(a) or is_symbolic(b):
            self.cons.append(a == b)
        elif a != b:
            raise _Fail("dims differ")

    def fail(self, why: str) -> NoReturn:
        raise _Fail(why)


def _collector(into: list) -> Callable[[Cond], bool]:
    """A `require` for `Op.type_rule` over symbolic types: a concrete constraint is judged, a
    symbolic one collected into `into` (and taken as holding)."""
    def require(c: Cond) -> bool:
        if isinstance(c, bool) or not is_symbolic(c):
            return bool(c)
        into.append(c)
        return True
    return require


def retype(g: Graph, types: dict[str, TensorType], op_map: Callable[[Op], Op] | None = None
           ) -> Graph | None:
    """`g` with the given top-level inputs/params retyped (and ops mapped by `op_map`), every
    other type re-inferred; None when a rule breaks."""
    decls = [*g.inputs, *g.params]
    try:
        return _Typer(False, op_map).graph(g, [types.get(v.name, v.type) for v in decls])
    except _Fail:
        return None


def _concretize_graph(g: Graph, model: Any) -> Graph:
    def val(v: Value) -> Value:
        return Value(v.name, v.type.concretize(model))

    insts = tuple(Inst(inst.op.concretize(model) if not inst.op.is_concrete else inst.op,
                       inst.args, tuple(val(r) for r in inst.results),
                       tuple(_concretize_graph(b, model) for b in inst.blocks))
                  for inst in g.insts)
    return Graph(g.name, tuple(val(v) for v in g.inputs), insts, g.outputs,
                 tuple(val(v) for v in g.params))
def _solve(cons: list, dims: dict, attr_vars: list, mode: str, target: tuple[str, int] | None,
           timeout_ms: int) -> Any:
    """A z3 model for `solve_shapes`, or None. z3's Optimize gives up on the nonlinear
    constraints shapes bring (a reshape's element count), so this minimizes by iterating a
    plain solver: `min` tightens the sum of the dims until it cannot; `one`/`half` first try
    to keep every other dim and attribute, then the attributes only, then nothing."""
    import z3

    s = z3.Solver()
    s.set("timeout", max(100, timeout_ms // 4))
    for c in cons:
        s.add(c)
    for v, orig in dims.values():
        s.add(v >= 1, v <= orig)
    for v, orig in attr_vars:
        s.add(v >= 0, v <= orig)
    keep_attrs = [v == orig for v, orig in attr_vars]
    if mode == "min":
        total = z3.Sum([v for v, _ in dims.values()]) if dims else z3.IntVal(0)
        model = None
        for keep in (keep_attrs, []):
            if s.check(*keep) == z3.sat:
                model = s.model()
                break
        if model is None:
            return None
        for _ in range(16):
            s.add(total < model.eval(total, model_completion=True))
            if s.check() != z3.sat:
                break
            model = s.model()
        return model
    if target not in dims:
        return None
    v, orig = dims[target]
    s.add(v == 1 if mode == "one" else v <= orig // 2)
    keep_dims = [o == od for key, (o, od) in dims.items() if key != target]
    for keep in (keep_dims + keep_attrs, keep_attrs, []):
        if s.check(*keep) == z3.sat:
            return s.model()
    return None


def solve_shapes(g: Graph, mode: str, target: tuple[str, int] | None = None,
                 timeout_ms: int = 3000) -> Graph | None:
    """Re-solve the dims of `g`'s inputs and params (and its size-like integer attributes) with
    z3 under every op's constraints; no dim or attribute grows. `mode`: `min` (the sum of the
    input/param dims as small as possible), `one` (dim `target` = (name, axis) set to 1) or
    `half` (that dim at most half its size); other dims and attributes keep their values where
    they can (soft constraints). None when unsatisfiable or not expressible."""
    import z3

    decls = [*g.inputs, *g.params]
    dims: dict[tuple[str, int], Any] = {}
    types = []
    for v in decls:
        shape = []
        for k, d in enumerate(v.type.shape):
            s = z3.Int(f"d_{v.name}_{k}")
            dims[(v.name, k)] = (s, int(d))
            shape.append(s)
        types.append(TensorType(tuple(shape), v.type.dtype))
    typer = _Typer(symbolic=True)
    try:
        sym = typer.graph(g, types)
    except _Fail:
        return None
    except Exception:
        return None
    model = _solve(typer.cons, dims, typer.attr_vars, mode, target, timeout_ms)
    if model is None:
        return None
    try:
        return _concretize_graph(sym, model)
    except Exception:
        return None

