"""Generation of control flow: `if` with data-dependent predicates, `loop` with data-dependent
trip counts.

Both take 1-2 existing values as operands; a body maps them to values of the same types through
chains of ops built with the generator's own typed insertion (result type forced to the
operand's type, operands only from inside the body: bodies are closed). An `if` predicate is
`reduce(...(reduce(x))) > t`: a scalar from data compared with a new scalar input or param, so
input data decides the branch (and the input search can steer it). A `loop` trip count is a new
int64 scalar input.
"""
from __future__ import annotations

from ir.dtypes import DType
from ir.graph import Graph, Inst, Value
from ir.op import OP_REGISTRY, Op
from ir.ops.control import If, Loop
from ir.types import TensorType


def _typed_chain(b, start: Value, scope: list[Value], ops: list[type[Op]], length: int
                 ) -> tuple[list[Inst], Value]:
    """Up to `length` ops applied to `start`, each returning `start`'s exact type."""
    insts: list[Inst] = []
    cur = start
    dtype = start.type.dtype
    for _ in range(length):
        candidates = [
            (op_cls, ins) for op_cls in ops if cur.type.rank in op_cls.first_ranks()
            for arity in op_cls.arities() for ins, outs in op_cls.signatures(arity)
            if ins[0] == dtype and outs == (dtype,) and all(d == dtype for d in ins)
        ]
        for _attempt in range(4):
            if not candidates:
                break
            op_cls, ins = b.rng.choice(candidates)
            inst = b.try_op(op_cls, cur, scope, ins, len(ins), target=cur.type, allow_new=False)
            if inst is not None:
                insts.append(inst)
                scope.extend(inst.results)
                cur = inst.results[0]
                break
    return insts, cur


def _predicate(b, values: list[Value]) -> list[Inst] | None:
    """Instructions computing a bool scalar from a numeric value (the last result)."""
    reduce_sum, greater = OP_REGISTRY["reduce_sum"], OP_REGISTRY["gt"]
    sources = [v for v in values if (v.type.dtype.is_float or v.type.dtype.is_int)
               and ((v.type.dtype,), (v.type.dtype,)) in list(reduce_sum.signatures(1))]
    if not sources:
        return None
    cur = b.rng.choice(sources)
    insts: list[Inst] = []
    while cur.type.rank > 0:
        inst = b.try_op(reduce_sum, cur, [], (cur.type.dtype,), 1,
                        op=reduce_sum(axis=0, keepdim=False))
        if inst is None:
            return None
        insts.append(inst)
        cur = inst.results[0]
    dt = cur.type.dtype
    inst = b.try_op(greater, cur, [], (dt, dt), 2)
    if inst is None:
        return None
    return insts + [inst]


def _body(b, name: str, operands: list[Value], ops: list[type[Op]], head: tuple[Value, ...] = ()
          ) -> Graph:
    """A closed body taking `head` + copies of `operands` and returning values of the operands'
    types (chains of up to `cfg.body_nodes` ops each; the head values are usable operands)."""
    ins = [Value(b.fresh_name("b"), v.type) for v in operands]
    head = tuple(Value(b.fresh_name("b"), v.type) for v in head)
    scope = [*head, *ins]
    insts: list[Inst] = []
    outs = []
    for v in ins:
        chain, out = _typed_chain(b, v, scope, ops, b.rng.randint(0, b.cfg.body_nodes))
        insts += chain
        outs.append(out.name)
    return Graph(name, (*head, *ins), tuple(insts), tuple(outs))


def _operands(b, values: list[Value]) -> list[Value]:
    return b.rng.sample(values, k=min(len(values), b.rng.randint(1, 2)))


def try_if(b, values: list[Value], ops: list[type[Op]]) -> list[Inst] | None:
    """The instructions of a predicate and an `if` over existing values, or None."""
    pred = _predicate(b, values)
    if pred is None:
        return None
    operands = _operands(b, values)
    blocks = (_body(b, "then", operands, ops), _body(b, "else", operands, ops))
    results = tuple(Value(b.fresh_name("v"), v.type) for v in operands)
    cond = pred[-1].results[0].name
    return pred + [Inst(If(), (cond, *[v.name for v in operands]), results, blocks)]


def try_loop(b, values: list[Value], ops: list[type[Op]]) -> list[Inst] | None:
    """A `loop` over existing values with a new int64 scalar input as its trip count."""
    trip = b.add_input(TensorType((), DType.int64))
    operands = _operands(b, values)
    counter = Value("i", TensorType((), DType.int64))
    body = _body(b, "body", operands, ops, head=(counter,))
    results = tuple(Value(b.fresh_name("v"), v.type) for v in operands)
    return [Inst(Loop(), (trip.name, *[v.name for v in operands]), results, (body,))]
