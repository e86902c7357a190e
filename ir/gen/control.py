"""Generation of control flow: `if` with data-dependent predicates, `loop` with data-dependent
trip counts, `scan` recurrences over a sequence axis, nested up to `GenConfig.max_depth`.

Each instruction takes 1-2 values of its scope as operands; a body maps them to values of the
same types through chains of ops built with the generator's own typed insertion (result type
forced to the operand's type, operands only from inside the body: bodies are closed). An `if`
predicate is `reduce(...(reduce(x))) > t`: a scalar from data compared with a new scalar input
(never a param), so input data decides the branch and other input sets flip it
(`ir.numerics.flow_coverage`). A `loop` trip count is a new int64 scalar input (inside a body,
sometimes an int64 scalar of the body, e.g. an enclosing loop's counter). A `scan` runs over
axis 0 of a value of rank >= 1 (or of a new input) with a carry of the same dtype; its body
mixes the carry with the slice x_t (a binary op, x_t broadcast or reduced to a scalar),
continues with a chain, and returns the new carry and a y_t computed from it, so every step
depends on the previous one and on its slice.

Nesting: a step of a body's chain may be, with the generator's per-step probabilities
(`p_if`, `p_loop`, `p_scan`) and while the nesting depth stays within `max_depth` (1: no
nesting), a control-flow instruction over the chain's current value. What a body lacks (a trip
count, a predicate's threshold, a fresh sequence) becomes a new input of the body, which the
instruction holding it passes in from its own scope, up to new graph inputs or params at the top
level: an `if` passes it as one more operand (its bodies do not return it), a `loop` or `scan`
as one more carried value returned unchanged. Those pass-through results are `Placed.quiet`:
nothing reads them and they are not graph outputs.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, cast

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import OP_REGISTRY, Op
from ir.core.types import TensorType
from ir.ops.control import If, Loop, Scan

if TYPE_CHECKING:
    from ir.gen.builder import GenConfig, SymbolicGraphBuilder
    from ir.ops.reduce import Reduce

#: longest sequence a generated scan runs over (axis 0 of its scanned operand)
MAX_SCAN_LEN = 16


@dataclass
class Placed:
    """Instructions to append to the top-level graph, in order (the control-flow one last)."""

    insts: list[Inst]
    #: results that only pass an outer value through a body: never read, never outputs
    quiet: set[str] = field(default_factory=set)


def _new_type(b: SymbolicGraphBuilder, rank: int, dtype: DType) -> TensorType:
    """A concrete type for a new input (a per-op concrete builder has `concrete_type`)."""
    make = getattr(b, "concrete_type", None)
    return make(rank, dtype) if make is not None else b.placeholder_type(rank, dtype)


def _fits(b: SymbolicGraphBuilder, t: TensorType) -> bool:
    """Within the generator's element bound (each dim <= the cap for its rank)."""
    cap = b.dim_cap(t.rank)
    return all(isinstance(d, int) and 1 <= d <= cap for d in t.shape)


class BodyScope:
    """Where control flow is placed: the top-level graph (depth 0) or a body under construction
    (depth >= 1, the nesting level of the body). `values` are readable here. A value the scope
    lacks is a new graph input (or param) at the top, a new body input in a body (`needs`),
    which the instruction holding the body passes in from its own scope."""

    def __init__(self, b: SymbolicGraphBuilder, depth: int, values: list[Value]):
        self.b = b
        self.depth = depth
        self.values = values
        self.insts: list[Inst] = []
        self.needs: list[tuple[Value, bool]] = []
        #: results of placed instructions that only pass a need through (see the module doc)
        self.quiet: set[str] = set()

    def new_input(self, t: TensorType, param: bool = False) -> Value:
        if self.depth == 0:
            return self.b.add_input(t, param)
        v = Value(self.b.fresh_name("b"), t)
        self.needs.append((v, param))
        self.values.append(v)
        return v

    def place(self, insts: list[Inst], quiet: AbstractSet[str] = frozenset()) -> None:
        self.insts += insts
        self.quiet |= quiet
        for inst in insts:
            self.values.extend(r for r in inst.results if r.name not in quiet)

    def try_op(self, op_cls: type[Op], first: Value, candidates: Sequence[Value],
               dtypes: tuple[DType, ...], arity: int, target: TensorType | None = None,
               op: Op | None = None) -> Inst | None:
        """The builder's typed insertion over this scope's values, never adding inputs."""
        return self.b.try_op(op_cls, first, candidates, dtypes, arity, target=target, op=op,
                             allow_new=False)

    def chain(self, start: Value, ops: list[type[Op]], length: int) -> Value:
        """Up to `length` steps from `start`, each giving a value of `start`'s exact type: an op
        of `ops`, or (while nesting allows) a control-flow instruction over the current value."""
        b, cfg = self.b, self.b.cfg
        cur = start
        p_total = cfg.p_if + cfg.p_loop + cfg.p_scan
        for _ in range(length):
            nxt = None
            if p_total and self.depth < cfg.max_depth:
                roll = b.rng.random()
                if roll < p_total:
                    nxt = _KINDS[_kind(cfg, roll)](b, self, ops, cur)
            if nxt is None:
                nxt = self._op_step(cur, ops)
            if nxt is not None:
                cur = nxt
        return cur

    def _op_step(self, cur: Value, ops: list[type[Op]]) -> Value | None:
        candidates = _same_type_ops(tuple(ops), cur.type.rank, cur.type.dtype)
        for _attempt in range(4):
            if not candidates:
                return None
            op_cls, ins = self.b.rng.choice(candidates)
            inst = self.try_op(op_cls, cur, self.values, ins, len(ins), target=cur.type)
            if inst is not None:
                self.place([inst])
                return inst.results[0]
        return None

    def body(self, name: str, inputs: list[Value], outputs: list[str]) -> Graph:
        return Graph(name, tuple(inputs), tuple(self.insts), tuple(outputs))


@lru_cache(maxsize=4096)
def _same_type_ops(ops: tuple[type[Op], ...], rank: int, dtype: DType) -> list:
    """(op, input dtypes) pairs whose inputs all have `dtype` and whose one result has it too."""
    return [(op_cls, ins) for op_cls in ops if rank in op_cls.first_ranks()
            for arity in op_cls.arities() for ins, outs in op_cls.signatures(arity)
            if ins[0] == dtype and outs == (dtype,) and all(d == dtype for d in ins)]


def _kind(cfg: GenConfig, roll: float) -> str:
    if roll < cfg.p_if:
        return "if"
    return "loop" if roll < cfg.p_if + cfg.p_loop else "scan"


def _copies(b: SymbolicGraphBuilder, values: Iterable[Value]) -> list[Value]:
    return [Value(b.fresh_name("b"), v.type) for v in values]


def _operands(b: SymbolicGraphBuilder, values: list[Value], first: Value | None) -> list[Value]:
    if first is None:
        return b.rng.sample(values, k=min(len(values), b.rng.randint(1, 2)))
    others = [v for v in values if v.name != first.name]
    return [first] + ([b.rng.choice(others)] if others and b.rng.random() < 0.4 else [])


def to_scalar(scope: BodyScope, v: Value) -> tuple[list[Inst], Value] | None:
    """Instructions reducing `v` to a scalar by summing axis 0 repeatedly, and the scalar."""
    reduce_sum = cast("type[Reduce]", OP_REGISTRY["reduce_sum"])
    if ((v.type.dtype,), (v.type.dtype,)) not in list(reduce_sum.signatures(1)):
        return None
    cur = v
    insts: list[Inst] = []
    while cur.type.rank > 0:
        inst = scope.try_op(reduce_sum, cur, [], (cur.type.dtype,), 1,
                            op=reduce_sum(axis=0, keepdim=False))
        if inst is None:
            return None
        insts.append(inst)
        cur = inst.results[0]
    return insts, cur


def make_predicate(b: SymbolicGraphBuilder, scope: BodyScope) -> Value | None:
    """A bool scalar computed from a numeric value of the scope, compared with a new scalar
    input threshold; its instructions are placed in `scope`."""
    reduce_sum = OP_REGISTRY["reduce_sum"]
    sources = [v for v in scope.values if (v.type.dtype.is_float or v.type.dtype.is_int)
               and ((v.type.dtype,), (v.type.dtype,)) in list(reduce_sum.signatures(1))]
    if not sources:
        return None
    reduced = to_scalar(scope, b.rng.choice(sources))
    if reduced is None:
        return None
    insts, cur = reduced
    dt = cur.type.dtype
    # a graph input (never a param): other input sets flip the branch by moving it alone
    # (`ir.numerics.flow_coverage`), so both branches run on the same compiled model
    threshold = scope.new_input(TensorType((), dt))
    inst = scope.try_op(OP_REGISTRY["gt"], cur, [threshold], (dt, dt), 2)
    if inst is None:
        return None
    scope.place(insts + [inst])
    return inst.results[0]


def _pass_needs(scope: BodyScope, needs: list[tuple[Value, bool]]) -> list[Value]:
    """Outer values for a body's needs, from `scope` (new inputs there, recursively)."""
    return [scope.new_input(v.type, param) for v, param in needs]


# ---- the three instructions -------------------------------------------------------------------
# (b, scope, ops, first) -> the result standing for `first` (or for the first operand), or None;
# each places its instructions in `scope` (an if's predicate first). A new input asked for on
# the way stays when the instruction is given up (unused at the top level, where later ops may
# read it; an unused body input inside a body).


def _if(b: SymbolicGraphBuilder, scope: BodyScope, ops: list[type[Op]], first: Value | None) -> Value | None:
    cond = make_predicate(b, scope)
    if cond is None:
        return None
    operands = _operands(b, scope.values, first)
    bodies = []
    for name in ("then", "else"):
        body = BodyScope(b, scope.depth + 1, _copies(b, operands))
        ins = list(body.values)
        outs = [body.chain(v, ops, b.rng.randint(0, b.cfg.body_nodes)).name for v in ins]
        bodies.append((name, body, ins, outs))
    (_, then_s, _, _), (_, else_s, _, _) = bodies
    extras = _pass_needs(scope, then_s.needs + else_s.needs)
    blocks = []
    for name, body, ins, outs in bodies:
        # both bodies take every need: their own, and an unused input for the other's
        other = [Value(b.fresh_name("b"), v.type) for v, _ in (else_s if body is then_s else then_s).needs]
        own = [v for v, _ in body.needs]
        needs = own + other if body is then_s else other + own
        blocks.append(body.body(name, ins + needs, outs))
    results = tuple(Value(b.fresh_name("v"), v.type) for v in operands)
    scope.place([Inst(If(), (cond.name, *[v.name for v in operands], *[v.name for v in extras]),
                      results, tuple(blocks))])
    return results[0]


def _trip(b: SymbolicGraphBuilder, scope: BodyScope) -> Value:
    ints = [v for v in scope.values if v.type == TensorType((), DType.int64)]
    if scope.depth > 0 and ints and b.rng.random() < 0.3:
        return b.rng.choice(ints)
    return scope.new_input(TensorType((), DType.int64))


def _loop(b: SymbolicGraphBuilder, scope: BodyScope, ops: list[type[Op]], first: Value | None
          ) -> Value | None:
    if DType.int64 not in b.cfg.enabled_dtypes():
        return None
    trip = _trip(b, scope)
    operands = _operands(b, scope.values, first)
    counter = Value(b.fresh_name("i"), TensorType((), DType.int64))
    carried = _copies(b, operands)
    body = BodyScope(b, scope.depth + 1, [counter, *carried])
    outs = [body.chain(v, ops, b.rng.randint(0, b.cfg.body_nodes)).name for v in carried]
    needs = [v for v, _ in body.needs]
    extras = _pass_needs(scope, body.needs)
    graph = body.body("body", [counter, *carried, *needs], outs + [v.name for v in needs])
    results = tuple(Value(b.fresh_name("v"), v.type) for v in (*operands, *extras))
    scope.place([Inst(Loop(), (trip.name, *[v.name for v in operands], *[v.name for v in extras]),
                      results, (graph,))], {r.name for r in results[len(operands):]})
    return results[0]


def mix_carry(b: SymbolicGraphBuilder, body: BodyScope, ops: list[type[Op]], c: Value, x: Value
              ) -> Value | None:
    """A value of `c`'s type computed from `c` and `x` (same dtype): `op(c, x)` with x
    broadcast, or `op(c, sum(x))`; placed in `body`."""
    dt = c.type.dtype
    binary = [op_cls for op_cls in ops if 2 in op_cls.arities()
              and c.type.rank in op_cls.first_ranks()
              and ((dt, dt), (dt,)) in list(op_cls.signatures(2))]
    if not binary:
        return None
    for scalar in (False, True):
        pre: list[Inst] = []
        operand = x
        if scalar:
            reduced = to_scalar(body, x)
            if reduced is None:
                return None
            pre, operand = reduced
        for _attempt in range(4):
            inst = body.try_op(b.rng.choice(binary), c, [operand], (dt, dt), 2, target=c.type)
            if inst is not None:
                body.place(pre + [inst])
                return inst.results[0]
    return None


def _scan(b: SymbolicGraphBuilder, scope: BodyScope, ops: list[type[Op]], first: Value | None
          ) -> Value | None:
    cfg = b.cfg
    short = [v for v in scope.values if v.type.rank >= 1 and v.type.shape[0] <= MAX_SCAN_LEN
             and (first is None or v.type.dtype == first.type.dtype)]
    if first is not None and first.type.rank >= cfg.max_rank:
        return None
    # the scanned operand: an existing value, or a new input (whose slices fit `first`)
    if short and b.rng.random() < 0.75:
        xs = b.rng.choice(short)
    else:
        if first is not None:
            t = TensorType((_new_type(b, 1, first.type.dtype).shape[0], *first.type.shape),
                           first.type.dtype)
        else:
            dts = [d for d in cfg.enabled_dtypes() if d.is_float or d.is_int] or cfg.enabled_dtypes()
            t = _new_type(b, b.rng.randint(1, cfg.max_rank), b.rng.choice(dts))
        if not _fits(b, t) or t.shape[0] > MAX_SCAN_LEN:
            return None
        xs = scope.new_input(t)
    x_type = TensorType(tuple(xs.type.shape[1:]), xs.type.dtype)
    # the carry: `first`, an existing value (preferably of x_t's type), or a new input or param
    if first is not None:
        carry = first
    else:
        same = [v for v in scope.values if v.type == x_type]
        dtype_ok = [v for v in scope.values if v.type.dtype == x_type.dtype
                    and v.type.rank < cfg.max_rank]
        roll = b.rng.random()
        if same and roll < 0.5:
            carry = b.rng.choice(same)
        elif dtype_ok and roll < 0.8:
            carry = b.rng.choice(dtype_ok)
        else:
            carry = scope.new_input(x_type, param=b.rng.random() < cfg.param_rate)
    if carry.type.dtype != x_type.dtype:
        return None
    carries = [carry]
    others = [v for v in scope.values if v.name != carry.name and v.type.rank < cfg.max_rank]
    if others and b.rng.random() < 0.25:
        carries.append(b.rng.choice(others))
    # the body: carry' = chain(mix(carry, x_t)), y_t = chain(carry')
    c_ins, x_ins = _copies(b, carries), [Value(b.fresh_name("b"), x_type)]
    body = BodyScope(b, scope.depth + 1, [*c_ins, *x_ins])
    mixed = mix_carry(b, body, ops, c_ins[0], x_ins[0])
    if mixed is None:
        return None
    c_outs = [body.chain(mixed, ops, b.rng.randint(0, cfg.body_nodes))]
    for c in c_ins[1:]:
        c_outs.append(body.chain(c, ops, b.rng.randint(1, cfg.body_nodes)))
    y = body.chain(c_outs[0], ops, b.rng.randint(0, cfg.body_nodes))
    length = xs.type.shape[0]
    ys = [y]
    if not _fits(b, TensorType((length, *y.type.shape), y.type.dtype)):
        reduced = to_scalar(body, y)
        ys = [] if reduced is None else [reduced[1]]
        if reduced is not None:
            body.place(reduced[0])
    needs = [v for v, _ in body.needs]
    extras = _pass_needs(scope, body.needs)
    graph = body.body("body", [*c_ins, *needs, *x_ins],
                      [v.name for v in c_outs] + [v.name for v in needs] + [v.name for v in ys])
    state = [*carries, *extras]
    results = tuple(Value(b.fresh_name("v"), t) for t in
                    [*(v.type for v in state),
                     *(TensorType((length, *v.type.shape), v.type.dtype) for v in ys)])
    scope.place([Inst(Scan(num_carries=len(state), reverse=b.rng.random() < 0.5),
                      (*[v.name for v in state], xs.name), results, (graph,))],
                {r.name for r in results[len(carries):len(state)]})
    return results[0]


_KINDS = {"if": _if, "loop": _loop, "scan": _scan}


def try_control(b: SymbolicGraphBuilder, values: list[Value], ops: list[type[Op]], roll: float
                ) -> Placed | None:
    """A top-level control-flow instruction (after its predicate, for an if), chosen by `roll`
    against the generator's `p_if`, `p_loop`, `p_scan`; its bodies may nest more (see the
    module doc). New inputs and params it needs are already added to the builder."""
    if b.cfg.max_depth < 1:
        return None
    scope = BodyScope(b, 0, list(values))
    if _KINDS[_kind(b.cfg, roll)](b, scope, ops, None) is None:
        return None
    return Placed(scope.insts, scope.quiet)
