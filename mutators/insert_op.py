"""`insert_op`: put a new op on a value's def-use edges, with a result of the value's exact type.

The op's other operands are earlier values or new inputs/params; its attributes and the new
placeholders' shapes are solved with z3 under the constraint "result type == the value's type",
so every later user still type-checks.
"""
from __future__ import annotations

import random

from ir.generate import GenConfig, SymbolicGraphBuilder
from ir.graph import Graph, Value
from ir.rewrite import add_inputs, add_params, insert_insts, replace_uses
from mutators.base import Mutant, Mutator


class InsertOp(Mutator):
    name = "insert_op"

    def propose(self, g: Graph, rng: random.Random, gen: GenConfig) -> Mutant | None:
        # (value, index of the first instruction allowed to read the new result)
        sites: list[tuple[Value, int]] = [(v, 0) for v in g.inputs]
        sites += [(r, i + 1) for i, inst in enumerate(g.insts) for r in inst.results]
        v, at = rng.choice(sites)
        ops = [
            (op_cls, ins)
            for op_cls in gen.enabled_ops()
            if v.type.rank in op_cls.first_ranks()
            for arity in op_cls.arities()
            for ins, outs in op_cls.signatures(arity)
            if ins[0] == v.type.dtype and outs == (v.type.dtype,)
            and all(d in gen.enabled_dtypes() for d in ins)
        ]
        if not ops:
            return None
        op_cls, in_dtypes = rng.choice(ops)
        names = {x.name for x in g.all_values()}
        b = SymbolicGraphBuilder(rng, gen, names)
        earlier = [*g.inputs, *g.params] + [r for inst in g.insts[:at] for r in inst.results]
        inst = b.try_op(op_cls, v, earlier, in_dtypes, len(in_dtypes), target=v.type)
        if inst is None:
            return None
        new = inst.results[0].name
        out = replace_uses(g, v.name, new, start=at)
        out = insert_insts(out, at, [inst])
        out = add_params(add_inputs(out, b.inputs), b.params)
        return Mutant(out, {"op": op_cls.name, "at": v.name})

