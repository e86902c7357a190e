"""Generation of control flow: `if` instructions with data-dependent predicates.

An `if` here takes 1-2 existing values as operands; each body maps them to values of the same
types through a chain of ops built with the generator's own typed insertion (result type forced
to the operand's type, operands only from inside the body: bodies are closed). The predicate is
`reduce(...(reduce(x))) > t`: a scalar from data compared with a new scalar input or param, so
input data decides the branch (and the input search can steer it).
"""
from __future__ import annotations

from ir.graph import Graph, Inst, Value
from ir.op import OP_REGISTRY, Op
from ir.ops.control import If


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


def try_if(b, values: list[Value], ops: list[type[Op]]) -> list[Inst] | None:
    """The instructions of a predicate and an `if` over existing values, or None."""
    rng = b.rng
    pred = _predicate(b, values)
    if pred is None:
        return None
    operands = rng.sample(values, k=min(len(values), rng.randint(1, 2)))
    blocks = []
    for name in ("then", "else"):
        ins = [Value(b.fresh_name("b"), v.type) for v in operands]
        scope = list(ins)
        insts: list[Inst] = []
        outs = []
        for v in ins:
            chain, out = _typed_chain(b, v, scope, ops, rng.randint(0, b.cfg.body_nodes))
            insts += chain
            outs.append(out.name)
        blocks.append(Graph(name, tuple(ins), tuple(insts), tuple(outs)))
    results = tuple(Value(b.fresh_name("v"), v.type) for v in operands)
    cond = pred[-1].results[0].name
    return pred + [Inst(If(), (cond, *[v.name for v in operands]), results, tuple(blocks))]
