"""`mutate_attrs`: fresh attributes for an op, its weights rebuilt to fit."""
from __future__ import annotations

import dataclasses
from typing import Any

from ir.core.graph import Graph, Value
from mutators.resolve import jsonable, plain, replaceable
from mutators.scope import (
    Ctx,
    ScopedMutator,
)
from mutators.solve import solve


class MutateAttrs(ScopedMutator):
    """Fresh attributes for an op (sampled as z3 symbols, solved so its result types stay): a
    convolution's stride, padding, dilation and kernel, a pool's window, a reduction's axis,
    a recurrent layer's hidden size and direction, ... Weights and inputs only this op reads
    are rebuilt to fit (a new kernel size is a new weight shape)."""

    name = "mutate_attrs"

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        sites = [i for i, inst in enumerate(g.insts)
                 if plain(inst) and dataclasses.fields(inst.op)]
        if not sites:
            return None
        i = rng.choice(sites)
        inst = g.insts[i]
        types = g.types()
        rebuild = replaceable(g, ctx, i)
        values = [Value(a, types[a]) for a in inst.args]
        args: list[Value | str] = [values[0], *(rebuild.get(v.name, v) if rng.random() < 0.8 else v
                                                for v in values[1:])]
        dtypes = [types[a].dtype for a in inst.args]
        targets = [r.type for r in inst.results]
        for _ in range(3):
            new = solve(ctx.b, type(inst.op), args, dtypes, targets, names=inst.result_names)
            now = {**types, **{v.name: v.type for v in (*ctx.b.inputs, *ctx.b.params)}}
            if new is None or (new.op == inst.op and all(
                    now[a] == types[b] for a, b in zip(new.args, inst.args, strict=True))):
                continue  # nothing changed (same attributes, weights of the same shapes)
            changed = {k: v for k, v in new.op.attrs().items() if inst.op.attrs()[k] != v}
            insts = list(g.insts)
            insts[i] = new
            return g.with_insts(insts), {"at": inst.results[0].name, "op": inst.op.name,
                                         "attrs": {k: jsonable(v) for k, v in changed.items()}}
        return None
