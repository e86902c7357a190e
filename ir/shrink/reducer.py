"""Test-case reduction over GraphIR, in the style of Hypothesis's shrinker.

`reduce_graph(graph, values, predicate)` returns the smallest graph (and values) it can find for
which `predicate(graph, values)` still holds ("the test still fails the same way"). It runs named
*passes* to a fixed point: each pass proposes candidates derived from the current graph; a
candidate is accepted when it is strictly smaller in the total order `size_of` (so reduction
never grows a graph), its canonical text is new (the `seen` set: nothing is evaluated twice),
`ir.core.verify` accepts it, inputs valid on the reference exist for it, and the predicate holds.

Passes (`PASSES`), cheapest and most effective first:
  - `drop_outputs`: keep one output, or drop one;
  - `cut_to_input`: replace a value by a new graph input (or param, when the value is computed
    from params only) holding the value it had, so its whole upstream cone goes;
  - `delete_block`: delete a run of top-level instructions, reconnecting their uses;
  - `delete_inst`: delete one instruction (any nesting level) and reconnect its uses to a value
    of the same type (an operand first), or at the top level to a new input;
  - `inline_if`: replace an `if` by its then or its else body;
  - `unwrap_loop`: replace a `loop` by zero trips (results = carried operands) or by its body
    inlined once; `unwrap_scan`: a length-1 `scan` by its body once (squeeze/unsqueeze);
  - `shrink_shapes`: re-solve the dims of inputs and params (and size-like integer attributes)
    with z3 under every op's constraints: all as small as possible, or one dim at 1 or halved;
  - `shrink_ranks`: drop a size-1 axis of an input or param, re-inferring every type;
  - `simplify_dtypes`: make float inputs/params and dtype attributes float32 (ints int64);
  - `params_to_inputs`: turn weights into graph inputs (nothing left to constant-fold).
Every candidate is cleaned by `dce` (dead code, unused control-flow operands and carries), which
preserves semantics.

Values: a candidate's inputs and params start from the current values where name and type still
match (sliced when a shape shrank, cast when a dtype changed); a new input gets the value the
value it replaces had on the current inputs; everything is then made valid by
`ir.numerics.input_search.search_inputs` (which returns at once when the start is valid already).

The order ("smaller"), lexicographic over `Size`:
  (instructions with nested ones counted, total elements of every value, sum of ranks, dtype
   cost (f32 0, i64/bool 1, f64/i32 2, f16 3), inputs + params, params, outputs, canonical
   text).
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn, cast

import numpy as np

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.op import Op, lookup_op
from ir.core.paths import Path, scopes
from ir.core.rewrite import remove_insts, replace_uses
from ir.core.shapes import Cond, Dim, holds, is_symbolic
from ir.core.text import canonical_text
from ir.core.types import TensorType
from ir.core.verify import verify
from ir.ops.control import ControlFlow, Scan, reads

#: the predicate: does this graph, on these values (every input and param), still fail the
#: same way?
Predicate = Callable[[Graph, dict[str, np.ndarray]], bool]

DTYPE_COST = {DType.float32: 0, DType.int64: 1, DType.bool: 1, DType.float64: 2, DType.int32: 2,
              DType.float16: 3}


# ---------------------------------------------------------------------------------------------
# size: the total order


@dataclass(frozen=True, order=True)
class Size:
    """A graph's size; compared lexicographically in field order (a total order on canonical
    forms: the canonical text breaks every tie)."""

    insts: int  #: instructions, nested ones counted
    elements: int  #: elements of every value (inputs, params, results, nested ones)
    rank: int  #: sum of the ranks of every value
    dtype_cost: int  #: sum of DTYPE_COST over every value
    io: int  #: graph inputs + params
    params: int  #: params (weights, which compilers may constant-fold): inputs are simpler
    outputs: int
    text: str = field(repr=False)

    def brief(self) -> str:
        return f"{self.insts} insts, {self.elements} elements"


def size_of(g: Graph) -> Size:
    vals = list(g.all_values())
    return Size(g.num_insts(), sum(_numel(v.type) for v in vals), sum(v.type.rank for v in vals),
                sum(DTYPE_COST.get(v.type.dtype, 3) for v in vals), len(g.inputs) + len(g.params),
                len(g.params), len(g.outputs), canonical_text(g))


def _numel(t: TensorType) -> int:
    n = 1
    for d in t.shape:
        n *= int(d)
    return n




def _pure(inst: Inst) -> bool:
    effect = getattr(inst.op, "effect", None)
    return effect is None or getattr(effect, "pure", True)


# ---------------------------------------------------------------------------------------------
# dead code (semantics-preserving cleanup of every candidate)


def dce(g: Graph, top: bool = True) -> Graph:
    """Drop instructions whose results nobody reads (nested levels too), results, operands and
    carried values of control-flow instructions that nobody needs, and (top level) unread inputs
    and params. A body keeps its signature except where its instruction's operands change with
    it. Instructions with memory effects (in-place writes, views) are all kept."""
    effects = not all(_pure(inst) for inst, _ in g.walk())
    live = set(g.outputs)
    kept: list[Inst] = []
    for inst in reversed(g.insts):
        used = [k for k, r in enumerate(inst.results) if r.name in live]
        if not used and (_pure(inst) or not effects):
            continue
        if inst.blocks:
            inst = _prune_control(inst, set(used) if _pure(inst) else set(range(len(inst.results))))
        kept.append(inst)
        live.update(inst.args)
    kept.reverse()
    out = g.with_insts(kept)
    if top:
        inputs = tuple(v for v in g.inputs if v.name in live)
        params = tuple(v for v in g.params if v.name in live)
        if not inputs and not params:
            inputs = g.inputs[:1]
        out = replace(out, inputs=inputs, params=params)
    return out


def _body_outputs(body: Graph, keep: Sequence[int]) -> Graph:
    return dce(body.with_insts(body.insts, [body.outputs[k] for k in keep]), top=False)


def _prune_control(inst: Inst, used: set[int]) -> Inst:
    if isinstance(inst.op, ControlFlow):
        return inst.op.prune(inst, used, _body_outputs)
    return replace(inst, blocks=tuple(dce(b, top=False) for b in inst.blocks))


# ---------------------------------------------------------------------------------------------
# re-typing (concrete or symbolic): shapes, ranks and dtypes changed at the inputs


class _Fail(Exception):
    pass


def body_input_types(op: Op, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> list[list[TensorType]]:
    """What each body of a control-flow instruction takes, given its operand types."""
    if not isinstance(op, ControlFlow):
        raise _Fail(f"no body rule for {op.name}")
    return op.body_inputs(ins, len(blocks))


#: integer attributes never made symbolic (they pick axes or layouts, not sizes)
NON_SIZE_ATTRS = frozenset({"axis", "perm", "dims", "groups", "num_carries", "dilation", "stride",
                            "dim", "depth"})


class _Typer:
    """Re-infers every type of a graph from its input types: concretely (`symbolic=False`:
    raises _Fail where a rule is broken) or symbolically (collects z3 constraints, and may make
    size-like integer attributes symbolic)."""

    def __init__(self, symbolic: bool = False, op_map: Callable[[Op], Op] | None = None):
        self.symbolic = symbolic
        self.op_map = op_map
        self.cons: list = []
        #: symbolic attribute -> its original value
        self.attr_vars: list[tuple[Any, int]] = []
        self._ids = itertools.count()

    def require(self, cs: Iterable[Cond]) -> None:
        for c in cs:
            if isinstance(c, bool) or not is_symbolic(c):
                if not bool(c):
                    raise _Fail("constraint violated")
            elif self.symbolic:
                self.cons.append(c)
            elif not holds(c):
                raise _Fail("constraint violated")

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

    def graph(self, g: Graph, in_types: Sequence[TensorType]) -> Graph:
        n = len(g.inputs)
        inputs = tuple(Value(v.name, t) for v, t in zip(g.inputs, in_types[:n], strict=True))
        params = tuple(Value(v.name, t) for v, t in zip(g.params, in_types[n:], strict=True))
        scope = {v.name: v.type for v in (*inputs, *params)}
        insts = []
        for inst in g.insts:
            ins = [scope[a] for a in inst.args]
            op = self.op_map(inst.op) if self.op_map else inst.op
            if op.result_dtypes(tuple(t.dtype for t in ins)) is None:
                raise _Fail(f"{op.name} refuses the dtypes")
            if inst.blocks:
                bodies = [self.graph(b, ts) for b, ts in
                          zip(inst.blocks, body_input_types(op, ins, inst.blocks), strict=True)]
                outs = self.control(op, ins, bodies)
            else:
                bodies = []
                outs = self.plain(op, ins)
                if self.symbolic:
                    op = self._last_op
            if len(outs) != len(inst.results):
                raise _Fail("result count changed")
            results = tuple(Value(r.name, t) for r, t in zip(inst.results, outs, strict=True))
            insts.append(Inst(op, inst.args, results, tuple(bodies)))
            scope.update((r.name, r.type) for r in results)
        return Graph(g.name, inputs, tuple(insts), g.outputs, params)

    def plain(self, op: Op, ins: list[TensorType]) -> list[TensorType]:
        if self.symbolic:
            sym = self._sym_op(op)
            for attempt in (sym, op) if sym is not op else (op,):
                try:
                    cs = list(attempt.requires(ins))
                    outs = list(attempt.infer(ins))
                except _Fail:
                    raise
                except Exception:
                    continue
                self.require(cs)
                self._last_op = attempt
                return outs
            raise _Fail(f"{op.name}: no symbolic type rule")
        try:
            cs = list(op.requires(ins))
            problem = getattr(op, "problem", lambda ins: None)(ins)
            outs = list(op.infer(ins))
        except Exception as e:
            raise _Fail(f"{op.name}: {e}") from None
        if problem:
            raise _Fail(problem)
        self.require(cs)
        return outs

    def control(self, op: Op, ins: list[TensorType], bodies: list[Graph]) -> list[TensorType]:
        if not self.symbolic:
            try:
                self.require(op.requires(ins))
                problem = op.check_blocks(ins, bodies)
                outs = list(op.infer_inst(ins, bodies))
            except _Fail:
                raise
            except Exception as e:
                raise _Fail(str(e)) from None
            if problem:
                raise _Fail(problem)
            return outs
        self.require(op.requires(ins))
        if not isinstance(op, ControlFlow):
            raise _Fail(f"no symbolic rule for {op.name}")
        return op.relate(ins, [body.output_types() for body in bodies], self)

    def same(self, a: Sequence[TensorType], b: Sequence[TensorType]) -> None:
        self._same(a, b)

    def eq(self, a: Dim, b: Dim) -> None:
        self._eq(a, b)

    def fail(self, why: str) -> NoReturn:
        raise _Fail(why)

    def _eq(self, a: Dim, b: Dim) -> None:
        if is_symbolic(a) or is_symbolic(b):
            self.cons.append(a == b)
        elif a != b:
            raise _Fail("dims differ")

    def _same(self, a: Sequence[TensorType], b: Sequence[TensorType]) -> None:
        if len(a) != len(b):
            raise _Fail("signature length differs")
        for x, y in zip(a, b, strict=True):
            if x.dtype != y.dtype or x.rank != y.rank:
                raise _Fail("signature types differ")
            for p, q in zip(x.shape, y.shape, strict=True):
                self._eq(p, q)


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


# ---------------------------------------------------------------------------------------------
# candidates and passes


@dataclass
class Candidate:
    graph: Graph
    desc: str
    #: start values for inputs/params the edit introduced (e.g. the value a cut value had)
    values: dict[str, np.ndarray] = field(default_factory=dict)


PassFn = Callable[["Reducer", Graph], Iterator[Candidate]]


def _same_type_values(block: Graph, index: int, t: TensorType, exclude: set[str]) -> list[str]:
    """Values of type `t` defined in `block` before instruction `index`, latest first."""
    out = []
    for inst in reversed(block.insts[:index]):
        out += [r.name for r in inst.results if r.type == t and r.name not in exclude]
    out += [v.name for v in (*block.inputs, *block.params) if v.type == t and v.name not in exclude]
    return out


def _cone(g: Graph, name: str) -> set[int]:
    """Top-level instruction indices in the upstream cone of `name`."""
    where = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
    seen: set[int] = set()
    todo = [name]
    while todo:
        n = todo.pop()
        i = where.get(n)
        if i is None or i in seen:
            continue
        seen.add(i)
        todo.extend(g.insts[i].args)
    return seen


def _leaves(g: Graph, name: str) -> set[str]:
    """Top-level inputs/params the value `name` is computed from."""
    where = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
    leaves, seen, todo = set(), set(), [name]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in where:
            todo.extend(g.insts[where[n]].args)
        else:
            leaves.add(n)
    return leaves


def _new_leaf(g: Graph, names: Names, t: TensorType, from_params: bool) -> tuple[Graph, str]:
    name = names.fresh("p" if from_params else "r")
    v = Value(name, t)
    if from_params:
        return replace(g, params=g.params + (v,)), name
    return replace(g, inputs=g.inputs + (v,)), name


def pass_drop_outputs(r: Reducer, g: Graph) -> Iterator[Candidate]:
    if len(g.outputs) < 2:
        return
    for k, o in enumerate(g.outputs):
        yield Candidate(dce(g.with_insts(g.insts, [o])), f"keep only output {k}")
    for k in range(len(g.outputs)):
        yield Candidate(dce(g.with_insts(g.insts, g.outputs[:k] + g.outputs[k + 1:])),
                        f"drop output {k}")


def pass_cut_to_input(r: Reducer, g: Graph) -> Iterator[Candidate]:
    """Replace a top-level value by a new input holding its current value, largest cone first."""
    env = r.env()
    params = {p.name for p in g.params}
    order = sorted(((len(_cone(g, res.name)), i, res) for i, inst in enumerate(g.insts)
                    for res in inst.results), key=lambda x: (-x[0], -x[1]))
    for _, i, res in order:
        if res.name not in env:
            continue
        names = Names.of(g)
        from_params = _leaves(g, res.name) <= params
        h, leaf = _new_leaf(g, names, res.type, from_params)
        h = replace_uses(h, res.name, leaf, start=i + 1)
        yield Candidate(dce(h), f"cut %{res.name} ({g.insts[i].op.name}) to a new "
                        f"{'param' if from_params else 'input'}", {leaf: env[res.name]})


def _reconnect(g: Graph, path: Path, lo: int, hi: int, names: Names, env: dict
               ) -> tuple[Graph, dict] | None:
    """Delete instructions [lo, hi) of the block at `path`, making each later use of their
    results read a same-typed earlier value (an operand of the deleted ones first; at the top
    level, else a new input holding the value). A top-level output read by nothing else may
    take any operand's value instead (outputs have no fixed type), or go."""
    block = path.at(g)
    top = not path
    gone_names = {r.name for inst in block.insts[lo:hi] for r in inst.results}
    decls = {v.name for v in (*block.inputs, *block.params)}
    operands = [a for inst in block.insts[lo:hi] for a in inst.args if a not in gone_names]
    new_values = {}
    top_extra: list[Value] = []

    def reconnect(res: Value, only_outputs: bool) -> str | None:
        same = [a for a in operands if _type_of(block, a) == res.type]
        pool = same + _same_type_values(block, lo, res.type, gone_names)
        if only_outputs and top:
            # only an output: reconnect it to an operand computed in the graph, of any type
            pool = [a for a in dict.fromkeys(same + operands) if a not in decls] + pool
            return pool[0] if pool else None  # none: the output goes
        if pool:
            return pool[0]
        if top and res.name in env:
            leaf = names.fresh("r")
            top_extra.append(Value(leaf, res.type))
            new_values[leaf] = env[res.name]
            return leaf
        return None

    new_block = remove_insts(block, range(lo, hi), reconnect, keep_outputs=not top)
    if new_block is None:
        return None
    if top_extra:
        new_block = replace(new_block, inputs=new_block.inputs + tuple(top_extra))
    if top:
        new_block = new_block.with_insts(new_block.insts, list(dict.fromkeys(new_block.outputs)))
    return path.replace_at(g, new_block), new_values


def _type_of(block: Graph, name: str) -> TensorType | None:
    return block.types().get(name)


def pass_delete_block(r: Reducer, g: Graph) -> Iterator[Candidate]:
    """Delete runs of top-level instructions, halving the run length (ddmin-like)."""
    n = len(g.insts)
    k = n // 2
    while k >= 2:
        for lo in range(0, n - k + 1, k):
            out = _reconnect(g, Path(), lo, lo + k, Names.of(g), r.env())
            if out is not None:
                yield Candidate(dce(out[0]), f"delete insts {lo}..{lo + k - 1}", out[1])
        k //= 2


def pass_delete_inst(r: Reducer, g: Graph) -> Iterator[Candidate]:
    """Delete one instruction (any level, last first) and reconnect its uses."""
    env = r.env()
    for path, block in scopes(g):
        for i in reversed(range(len(block.insts))):
            inst = block.insts[i]
            out = _reconnect(g, path, i, i + 1, Names.of(g), env)
            if out is not None:
                yield Candidate(dce(out[0]), f"delete {inst.op.name} %{inst.results[0].name}"
                                + (" (nested)" if path else ""), out[1])


def _inline(block: Graph, i: int, body: Graph, bind: dict[str, str]) -> Graph:
    """Block with instruction `i` replaced by `body`'s instructions (its inputs renamed per
    `bind`); the instruction's results become the body's outputs."""
    inst = block.insts[i]

    def ren(n: str) -> str:
        return bind.get(n, n)

    inner = [replace(x, args=tuple(ren(a) for a in x.args)) for x in body.insts]
    out = block.with_insts(block.insts[:i] + tuple(inner) + block.insts[i + 1:])
    for res, o in zip(inst.results, body.outputs, strict=True):
        out = replace_uses(out, res.name, ren(o), start=i + len(inner))
    return out


def pass_inline_if(r: Reducer, g: Graph) -> Iterator[Candidate]:
    for path, block in scopes(g):
        for i, inst in enumerate(block.insts):
            if inst.op.name != "if":
                continue
            for b, which in ((0, "then"), (1, "else")):
                body = inst.blocks[b]
                bind = {v.name: a for v, a in zip(body.inputs, inst.args[1:], strict=True)}
                h = path.replace_at(g, _inline(block, i, body, bind))
                yield Candidate(dce(h), f"inline the {which} branch of %{inst.results[0].name}")


def pass_unwrap_loop(r: Reducer, g: Graph) -> Iterator[Candidate]:
    for path, block in scopes(g):
        for i, inst in enumerate(block.insts):
            if inst.op.name != "loop":
                continue
            # zero trips: the results are the carried operands
            carried = dict(zip(inst.result_names, inst.args[1:], strict=True))
            h = remove_insts(block, [i], lambda res, only_outputs: carried[res.name])  # noqa: B023 (called at once)
            assert h is not None  # every result reconnected: no output goes
            yield Candidate(dce(path.replace_at(g, h)),
                            f"loop %{inst.results[0].name} -> zero trips")
            # once: the body inlined, the counter a new input holding 0 (top level only)
            (body,) = inst.blocks
            bind = {v.name: a for v, a in zip(body.inputs[1:], inst.args[1:], strict=True)}
            counter = body.inputs[0]
            values = {}
            gg = g
            if counter.name in reads(body):
                if path:
                    continue
                gg, leaf = _new_leaf(g, Names.of(g), counter.type, False)
                bind[counter.name] = leaf
                values[leaf] = np.zeros((), dtype=np.int64)
            h = _inline(path.at(gg), i, body, bind)
            yield Candidate(dce(path.replace_at(gg, h)),
                            f"loop %{inst.results[0].name} -> its body once", values)


def pass_unwrap_scan(r: Reducer, g: Graph) -> Iterator[Candidate]:
    """A scan of length 1: its body once, on the squeezed slices; ys unsqueezed."""
    try:
        squeeze: Callable[..., Op] = lookup_op("squeeze")
        unsqueeze: Callable[..., Op] = lookup_op("unsqueeze")
    except Exception:
        return
    for path, block in scopes(g):
        for i, inst in enumerate(block.insts):
            if inst.op.name != "scan":
                continue
            types = block.types()
            nc = cast(Scan, inst.op).num_carries
            xs = inst.args[nc:]
            if any(types[x].rank == 0 or types[x].shape[0] != 1 for x in xs):
                continue
            (body,) = inst.blocks
            names = Names.of(g)
            pre = []
            bind = {v.name: a for v, a in zip(body.inputs[:nc], inst.args[:nc], strict=True)}
            for v, x in zip(body.inputs[nc:], xs, strict=True):
                t = names.fresh("s")
                pre.append(Inst(squeeze(axis=0), (x,), (Value(t, v.type),)))
                bind[v.name] = t
            inner = [replace(x, args=tuple(bind.get(a, a) for a in x.args)) for x in body.insts]
            post = []
            ren = {}
            for res, o in zip(inst.results[nc:], body.outputs[nc:], strict=True):
                post.append(Inst(unsqueeze(axis=0), (bind.get(o, o),), (Value(names.fresh("s"), res.type),)))
                ren[res.name] = post[-1].results[0].name
            for res, o in zip(inst.results[:nc], body.outputs[:nc], strict=True):
                ren[res.name] = bind.get(o, o)
            new = block.with_insts(block.insts[:i] + tuple(pre + inner + post) + block.insts[i + 1:])
            for old, nw in ren.items():
                new = replace_uses(new, old, nw, start=i + len(pre) + len(inner) + len(post))
            yield Candidate(dce(path.replace_at(g, new)),
                            f"scan %{inst.results[0].name} of length 1 -> its body once")


def _resized(old: np.ndarray, t: TensorType) -> np.ndarray | None:
    """`old` cut (or cast) to type `t` when it can be: same rank, no dim larger."""
    shape = tuple(int(d) for d in t.shape)
    if old.ndim == len(shape) and all(n <= o for n, o in zip(shape, old.shape, strict=True)):
        cut = old[tuple(slice(0, n) for n in shape)]
    elif old.size == _numel(t):
        cut = old
    else:
        return None
    # (np.ascontiguousarray would make a 0-d array 1-d)
    return np.array(cut, dtype=t.dtype.numpy, order="C", copy=True).reshape(shape)


def pass_shrink_shapes(r: Reducer, g: Graph) -> Iterator[Candidate]:
    h = solve_shapes(g, "min")
    if h is not None:
        yield Candidate(h, "shapes re-solved to their minimum")
    for v in (*g.inputs, *g.params):
        for k, d in enumerate(v.type.shape):
            if d <= 1:
                continue
            for mode in ("one", "half"):
                if mode == "half" and d <= 2:
                    continue
                h = solve_shapes(g, mode, (v.name, k))
                if h is not None:
                    yield Candidate(h, f"dim {k} of %{v.name} ({d}) -> {mode}")


def pass_shrink_ranks(r: Reducer, g: Graph) -> Iterator[Candidate]:
    for v in (*g.inputs, *g.params):
        for k, d in enumerate(v.type.shape):
            if d != 1:
                continue
            t = TensorType(v.type.shape[:k] + v.type.shape[k + 1:], v.type.dtype)
            h = retype(g, {v.name: t})
            if h is not None:
                yield Candidate(h, f"drop axis {k} (size 1) of %{v.name}")


def _simpler(d: DType) -> DType:
    if d.is_float:
        return DType.float32
    if d.is_int:
        return DType.int64
    return d


def _map_dtype_attrs(op: Op) -> Op:
    changes = {f.name: _simpler(getattr(op, f.name)) for f in dataclasses.fields(op)
               if isinstance(getattr(op, f.name), DType)
               and _simpler(getattr(op, f.name)) is not getattr(op, f.name)}
    return dataclasses.replace(op, **changes) if changes else op


def pass_simplify_dtypes(r: Reducer, g: Graph) -> Iterator[Candidate]:
    decls = [v for v in (*g.inputs, *g.params) if _simpler(v.type.dtype) is not v.type.dtype]
    has_attrs = any(_map_dtype_attrs(inst.op) is not inst.op for inst, _ in g.walk())
    if decls or has_attrs:
        h = retype(g, {v.name: v.type.with_dtype(_simpler(v.type.dtype)) for v in decls},
                   _map_dtype_attrs)
        if h is not None:
            yield Candidate(h, "every dtype simplified")
    for v in decls:
        h = retype(g, {v.name: v.type.with_dtype(_simpler(v.type.dtype))})
        if h is not None:
            yield Candidate(h, f"%{v.name}: {v.type.dtype.short} -> {_simpler(v.type.dtype).short}")
    for inst, _ in list(g.walk()):
        mapped = _map_dtype_attrs(inst.op)
        if mapped is inst.op:
            continue
        def op_map(op: Op, target: Op = inst.op, new: Op = mapped) -> Op:
            return new if op is target else op

        h = retype(g, {}, op_map)
        if h is not None:
            yield Candidate(h, f"{inst.op.name} %{inst.results[0].name}: dtype attribute simplified")


def pass_params_to_inputs(r: Reducer, g: Graph) -> Iterator[Candidate]:
    """Params (weights) become graph inputs with the same values: all, then one at a time."""
    if not g.params:
        return
    if len(g.params) > 1:
        yield Candidate(replace(g, inputs=g.inputs + g.params, params=()), "every param -> input")
    for p in g.params:
        yield Candidate(replace(g, inputs=g.inputs + (p,),
                                params=tuple(q for q in g.params if q != p)),
                        f"param %{p.name} -> input")


#: name -> pass, in the order they run
PASSES: dict[str, PassFn] = {
    "drop_outputs": pass_drop_outputs,
    "cut_to_input": pass_cut_to_input,
    "delete_block": pass_delete_block,
    "delete_inst": pass_delete_inst,
    "inline_if": pass_inline_if,
    "unwrap_loop": pass_unwrap_loop,
    "unwrap_scan": pass_unwrap_scan,
    "simplify_dtypes": pass_simplify_dtypes,
    "shrink_shapes": pass_shrink_shapes,
    "shrink_ranks": pass_shrink_ranks,
    "params_to_inputs": pass_params_to_inputs,
}


# ---------------------------------------------------------------------------------------------
# the reducer


@dataclass
class ReduceConfig:
    #: predicate calls at most (each compiles and runs a candidate on the backend)
    max_tests: int = 500
    #: wall-clock budget in seconds (checked between candidates)
    max_seconds: float = 600.0
    #: seed of the input searches
    seed: int = 0
    #: passes to run, by name (see PASSES), in order
    passes: tuple[str, ...] = tuple(PASSES)
    #: gradient steps of the input search per candidate
    search_iters: int = 16


@dataclass
class PassStats:
    candidates: int = 0  #: proposed
    seen: int = 0  #: skipped: canonical form already tried
    not_smaller: int = 0
    invalid: int = 0  #: refused by the verifier
    no_inputs: int = 0  #: no valid inputs found
    tests: int = 0  #: predicate calls
    accepted: int = 0


@dataclass
class Step:
    pass_name: str
    desc: str
    size: Size


@dataclass
class ReduceResult:
    graph: Graph
    values: dict[str, np.ndarray]
    original: Size
    size: Size
    steps: list[Step]
    tests: int
    seconds: float
    #: why it stopped: "fixed point", "max_tests", "max_seconds"
    stopped: str
    passes: dict[str, PassStats]

    def summary(self) -> dict[str, Any]:
        return {
            "original_insts": self.original.insts, "reduced_insts": self.size.insts,
            "original_elements": self.original.elements, "reduced_elements": self.size.elements,
            "tests": self.tests, "seconds": round(self.seconds, 2), "stopped": self.stopped,
            "steps": [{"pass": s.pass_name, "desc": s.desc, "insts": s.size.insts,
                       "elements": s.size.elements} for s in self.steps],
            "passes": {k: dataclasses.asdict(v) for k, v in self.passes.items() if v.candidates},
        }


class _Budget(Exception):
    pass


class Reducer:
    def __init__(self, graph: Graph, values: dict[str, np.ndarray], predicate: Predicate,
                 cfg: ReduceConfig = ReduceConfig(), log: Callable[[str], None] | None = None):  # noqa: B008 (read, never written)
        self.graph = graph
        self.values = dict(values)
        self.predicate = predicate
        self.cfg = cfg
        self.log = log or (lambda s: None)
        self.size = size_of(graph)
        self.original = self.size
        self.seen: set[str] = {self.size.text}
        self.steps: list[Step] = []
        self.tests = 0
        self.stats = {name: PassStats() for name in cfg.passes}
        self.t0 = time.monotonic()
        self._env: tuple[Graph, dict[str, np.ndarray]] | None = None

    # ---- values ----------------------------------------------------------------------------
    def env(self) -> dict[str, np.ndarray]:
        """Every top-level value of the current graph on the current values (cached)."""
        if self._env is not None and self._env[0] is self.graph:
            return self._env[1]
        import torch

        from ir.materialize.to_torch import evaluate_torch
        from ir.numerics.values import as_tensors

        try:
            with torch.no_grad():
                env = evaluate_torch(self.graph, as_tensors(self.values))
            out = {k: t.detach().numpy().copy() for k, t in env.items() if isinstance(t, torch.Tensor)}
        except Exception:
            out = dict(self.values)
        self._env = (self.graph, out)
        return out

    def start_values(self, g: Graph, extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Start values for every input and param of `g` (see the module doc)."""
        from ir.numerics.values import sample_value

        rng = np.random.default_rng(self.cfg.seed + self.tests)
        out = {}
        for v in (*g.inputs, *g.params):
            old = extra.get(v.name, self.values.get(v.name))
            arr = None
            if old is not None:
                old = np.asarray(old)
                if old.shape == tuple(v.type.shape) and old.dtype == v.type.dtype.numpy:
                    arr = old
                else:
                    arr = _resized(old, v.type)
            if arr is None:
                arr = sample_value(v, rng, 2.0 if v in g.inputs else 1.0, 4)
            out[v.name] = arr
        return out

    def valid_values(self, g: Graph, extra: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        from ir.numerics.input_search import SearchConfig, search_inputs

        start = self.start_values(g, extra)
        try:
            res = search_inputs(g, self.cfg.seed, start=start,
                                cfg=SearchConfig(max_iters=self.cfg.search_iters))
        except Exception:
            return None
        return res.values if res.ok else None

    # ---- one candidate ---------------------------------------------------------------------
    def consider(self, name: str, cand: Candidate) -> bool:
        st = self.stats[name]
        st.candidates += 1
        size = size_of(cand.graph)
        if size.text in self.seen:
            st.seen += 1
            return False
        self.seen.add(size.text)
        if not size < self.size:
            st.not_smaller += 1
            return False
        try:
            verify(cand.graph)
        except Exception:
            st.invalid += 1
            return False
        values = self.valid_values(cand.graph, cand.values)
        if values is None:
            st.no_inputs += 1
            return False
        self.check_budget()
        self.tests += 1
        st.tests += 1
        try:
            ok = bool(self.predicate(cand.graph, values))
        except Exception as e:  # a predicate that raises says "not interesting"
            self.log(f"predicate raised on a candidate: {type(e).__name__}: {e}")
            ok = False
        if not ok:
            return False
        st.accepted += 1
        self.graph, self.values, self.size = cand.graph, values, size
        self.steps.append(Step(name, cand.desc, size))
        self.log(f"{name}: {cand.desc} -> {size.brief()}")
        return True

    def check_budget(self) -> None:
        if self.tests >= self.cfg.max_tests:
            raise _Budget("max_tests")
        if time.monotonic() - self.t0 >= self.cfg.max_seconds:
            raise _Budget("max_seconds")

    # ---- the loop --------------------------------------------------------------------------
    def run_pass(self, name: str) -> bool:
        """Run one pass until it makes no more progress; True if it made any."""
        fn = PASSES[name]
        progress = False
        while True:
            self.check_budget()
            for cand in fn(self, self.graph):
                if self.consider(name, cand):
                    progress = True
                    break
                self.check_budget()
            else:
                return progress

    def run(self) -> ReduceResult:
        stopped = "fixed point"
        try:
            while True:
                changed = False
                for name in self.cfg.passes:
                    changed |= self.run_pass(name)
                if not changed:
                    break
        except _Budget as b:
            stopped = str(b)
        return ReduceResult(self.graph, self.values, self.original, self.size, self.steps,
                            self.tests, time.monotonic() - self.t0, stopped, self.stats)


def reduce_graph(graph: Graph, values: dict[str, np.ndarray], predicate: Predicate,
                 cfg: ReduceConfig = ReduceConfig(),  # noqa: B008 (read, never written)
                 log: Callable[[str], None] | None = None) -> ReduceResult:
    """Reduce `graph` (on `values`, every input and param) while `predicate` holds; see the
    module doc. The predicate is assumed to hold on the original (not re-checked here)."""
    return Reducer(graph, values, predicate, cfg, log).run()
