"""`duplicate_region`: a region computed twice, some uses moved to the copy."""
from __future__ import annotations

import dataclasses
from typing import Any

from ir.core.graph import Graph, Value
from ir.core.rewrite import insert_insts, replace_uses
from mutators.optable import same_type_ops
from mutators.scope import (
    Ctx,
    ScopedMutator,
    copy_insts,
    pick_region,
)
from mutators.solve import solve


class DuplicateRegion(ScopedMutator):
    """A region computed twice: a copy (fresh names, same operands) right after it, and some
    uses of one of its results moved to the copy; a result with a single use is combined with
    its copy by a binary op instead (`op(v, copy(v))`, an op that declares
    `Op.combines_with_copy`). Common-subexpression bait."""

    name = "duplicate_region"

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        r = pick_region(g, rng)
        if r is None:
            return None
        names: dict[str, str] = {}
        copy = copy_insts(r.insts, names, ctx.fresh)
        o = rng.choice(r.outs)
        o2 = names[o]
        types = g.types()
        out = insert_insts(g, r.end, copy)
        after = r.end + len(copy)
        uses = [i for i in range(after, len(out.insts)) for a in out.insts[i].args if a == o]
        uses += [-1] * sum(1 for x in out.outputs if x == o)
        if len(uses) >= 2:
            moved = rng.sample(range(len(uses)), k=rng.randint(1, len(uses) - 1))
            out = _move_uses(out, o, o2, [uses[k] for k in moved], after)
            return out, {"region": [r.start, r.end], "value": o, "moved": len(moved)}
        ops = [(c, ins) for c, ins in same_type_ops(ctx.gen, types[o], ctx.iterated)
               if len(ins) == 2 and ins[1] == ins[0] and c.combines_with_copy]
        rng.shuffle(ops)
        for op_cls, ins in ops[:3]:
            comb = solve(ctx.b, op_cls, [Value(o, types[o]), Value(o2, types[o])], ins,
                         [types[o]])
            if comb is None:
                continue
            out = replace_uses(out, o, comb.results[0].name, start=after)
            out = insert_insts(out, after, [comb])
            return out, {"region": [r.start, r.end], "value": o, "combine": op_cls.name}
        return None


def _move_uses(g: Graph, old: str, new: str, which: list[int], start: int) -> Graph:
    """Uses of `old` listed in `which` (instruction indices, -1 for an output; one entry per
    use, in order) read `new` instead."""
    insts = list(g.insts)
    take = sorted(which)
    for i in sorted(set(w for w in take if w >= 0)):
        n = take.count(i)
        args = list(insts[i].args)
        for k, a in enumerate(args):
            if a == old and n:
                args[k] = new
                n -= 1
        insts[i] = dataclasses.replace(insts[i], args=tuple(args))
    outputs = list(g.outputs)
    n = take.count(-1)
    for k, o in enumerate(outputs):
        if o == old and n:
            outputs[k] = new
            n -= 1
    return g.with_insts(insts, outputs)
