"""`replace_op`: an op becomes another op giving the same result type."""
from __future__ import annotations

from typing import Any

from ir.core.graph import Graph, Inst, Value
from mutators.optable import ops_to
from mutators.resolve import plain
from mutators.scope import (
    Ctx,
    ScopedMutator,
    values_before,
)


class ReplaceOp(ScopedMutator):
    """An op becomes another op giving the same result type from the same first operand (or
    another value of its dtype); other operands are earlier values or new placeholders."""

    name = "replace_op"

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        sites = [i for i, inst in enumerate(g.insts) if plain(inst) and len(inst.results) == 1]
        if not sites:
            return None
        i = rng.choice(sites)
        inst = g.insts[i]
        types = g.types()
        result = inst.results[0]
        earlier = values_before(g, i)
        first = Value(inst.args[0], types[inst.args[0]])
        if rng.random() < 0.3:
            same = [v for v in earlier if v.type.dtype == first.type.dtype]
            first = rng.choice(same) if same else first
        ops = [(c, ins) for c, ins in ops_to(ctx.gen, first.type, result.type.dtype, ctx.iterated)
               if c.name != inst.op.name]
        rng.shuffle(ops)
        for op_cls, ins in ops[:3]:
            new = ctx.b.try_op(op_cls, first, earlier, ins, len(ins), target=result.type)
            if new is None:
                continue
            new = Inst(new.op, new.args, (result,))
            insts = list(g.insts)
            insts[i] = new
            return g.with_insts(insts), {"at": result.name, "old": inst.op.name,
                                         "op": op_cls.name}
        return None
