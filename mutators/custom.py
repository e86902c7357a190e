"""Mutators for custom ops (`ir.ops.custom`): `wrap_custom` makes a region of any scope the
kernel of a custom op, in one of the forms the generator places (`ir.gen.custom.FORMS`: pure,
in place, behind a clone, through a view); `unwrap_custom` puts a custom op's body back in its
place (`ir.ops.custom.inline_inst`: a mutating op's writes become `copy_`s), so the same program
reaches the compilers with and without the opaque call.

Both are off unless a campaign weighs them (`mutation.weights`; cpu_extend does): a test that
differentiates takes only pure custom ops, so `wrap_custom` places those in a float graph of a
training config (`GenConfig.p_custom_mutates`, 0 after `for_training`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from ir.core.graph import Graph
from ir.gen.custom import FORMS, label_for, pick_region, wrap_region
from ir.ops.custom import Custom, inline_inst
from mutators.scope import Ctx, Scope, ScopedMutator


class WrapCustom(ScopedMutator):
    """A region becomes a custom op: pure, or (a share `GenConfig.p_custom_mutates`) one that
    mutates an operand in place, behind a clone or through a view."""

    name = "wrap_custom"
    into_kernels = False

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        r = pick_region(g, rng)
        if r is None:
            return None
        form = rng.choice(FORMS[1:]) if rng.random() < ctx.gen.p_custom_mutates else "pure"
        made = wrap_region(g, r, form, rng, ctx.fresh, label_for(g))
        if made is None and form != "pure":
            made = wrap_region(g, r, "pure", rng, ctx.fresh, label_for(g))
        if made is None:
            return None
        new, placed = made
        return new, {"region": [r.start, r.end], "form": placed}


class UnwrapCustom(ScopedMutator):
    """A custom op's body back in its place, its writes as `copy_`."""

    name = "unwrap_custom"

    def eligible(self, site: Scope) -> bool:
        return any(isinstance(i.op, Custom) for i in site.graph.insts)

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        at = [i for i, inst in enumerate(g.insts) if isinstance(inst.op, Custom)]
        if not at:
            return None
        i = ctx.rng.choice(at)
        inst = g.insts[i]
        op = cast(Custom, inst.op)
        made, results = inline_inst(inst, ctx.fresh)
        rest = [replace(later, args=tuple(results.get(a, a) for a in later.args))
                for later in g.insts[i + 1:]]
        out = g.with_insts([*g.insts[:i], *made, *rest],
                           [results.get(o, o) for o in g.outputs])
        return out, {"label": op.label, "mutates": list(op.mutates)}
