"""`mutate_shape`: a graph input gets a new shape, every op downstream re-solved with z3."""
from __future__ import annotations

import dataclasses
from typing import Any

from ir.core.graph import Graph, Value
from ir.core.types import TensorType
from mutators.resolve import repropagate
from mutators.scope import (
    Ctx,
    ScopedMutator,
)


class MutateShape(ScopedMutator):
    """A graph input gets a new shape (one dim changed); every op downstream keeps its
    attributes where they still hold and is re-solved with z3 where not (weights rebuilt).
    Top level only (a body's inputs are its signature)."""

    name = "mutate_shape"

    def eligible(self, site) -> bool:
        return site.root

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        cands = [v for v in g.inputs if v.type.rank >= 1 and g.users(v.name)]
        if not cands:
            return None
        x = rng.choice(cands)
        axis = rng.randrange(x.type.rank)
        cap = min(ctx.b.dim_cap(x.type.rank), 2 * ctx.gen.dim_hint)
        choices = [d for d in range(1, cap + 1) if d != x.type.shape[axis]]
        if not choices:
            return None
        dim = rng.choice(choices)
        shape = list(x.type.shape)
        shape[axis] = dim
        nt = TensorType(tuple(shape), x.type.dtype)
        types = dict(g.types())
        types[x.name] = nt
        insts = repropagate(g, ctx, 0, types, rebuild_ok=True)
        if insts is None:
            return None
        inputs = tuple(Value(v.name, nt) if v.name == x.name else v for v in g.inputs)
        new = dataclasses.replace(g, inputs=inputs, insts=tuple(insts))
        return new, {"input": x.name, "axis": axis, "dim": dim}
