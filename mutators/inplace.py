"""`to_inplace`: out-of-place ops rewritten into in-place ones, also through views, where the
in-place analysis says the program stays well-defined (docs/inplace.md).

`r = add(a, b)` becomes `r = add_(a, b)`: `a`'s storage is overwritten and `r` is `a` itself,
so every later read of `a` (and of any view of it) sees the new contents: torch semantics,
which the reference computes on dynsmith's functionalized graph while torch backends get the
real mutation. Through views: when `a` is made by a movement op (`slice`, `transpose`,
`reshape`, `expand`), that op may become its view counterpart (`view_slice`, `view_permute`,
`view_reshape`, `view_expand`), so the write lands in the base's storage and later reads of
the base see it. A written graph input is returned (a mutated input is an observable output).

Candidates that the analysis rejects (a write to a param or a body input, overlapping reads,
a view torch cannot make, writes through repeated elements...) are never proposed: each is
checked with `ir.core.verify` (which runs `ir.analysis.inplace.check`) and another is tried instead. Needs
the in-place and view ops (`ir.ops.inplace`, `ir.ops.views`); without them it declines.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

from ir.core.graph import Graph, Inst, Value
from ir.core.op import OP_REGISTRY, Op
from ir.core.rewrite import replace_uses
from ir.core.verify import VerifyError, verify
from ir.gen.builder import GenConfig
from mutators.base import Mutant
from mutators.scope import Ctx, ScopedMutator


def ops_present() -> bool:
    """Whether the in-place and view ops are registered: some op has an in-place twin
    (`Op.inplace_twin`) and some a view twin (`Op.view_twin`)."""
    ops = OP_REGISTRY.values()
    return any(c.inplace_twin is not None for c in ops) and any(c.view_twin is not None for c in ops)


class ToInplace(ScopedMutator):
    name = "to_inplace"
    into_kernels = False
    #: candidates tried per proposal (each checked by the in-place analysis)
    attempts: int = 4

    @classmethod
    def available(cls) -> bool:
        return ops_present()

    def propose(self, g: Graph, rng: random.Random, gen: GenConfig) -> Mutant | None:
        if not ops_present():
            return None
        for _ in range(self.attempts):
            mutant = super().propose(g, rng, gen)
            if mutant is None:
                continue
            try:
                verify(mutant.graph)
            except VerifyError:
                continue
            return mutant
        return None

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        types = g.types()
        params = {p.name for p in g.params}
        inputs = {v.name for v in g.inputs}
        made_by = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
        sites = [i for i, inst in enumerate(g.insts)
                 if inst.op.inplace_twin is not None and len(inst.results) == 1 and inst.args
                 and types[inst.args[0]] == inst.results[0].type
                 and inst.args[0] not in params and (ctx.root or inst.args[0] not in inputs)]
        if not sites:
            return None
        # writes through a movement op made a view, when there are any: half the time
        through = [i for i in sites
                   if g.insts[made_by.get(g.insts[i].args[0], i)].op.view_twin is not None
                   and made_by.get(g.insts[i].args[0], i) != i]
        i = rng.choice(through if through and rng.random() < 0.5 else sites)
        inst = g.insts[i]
        op = inst.op.inplace_form()
        assert op is not None  # (a site has an in-place twin)
        rest = [types[a] for a in inst.args[1:]]
        if rng.random() < 0.35 and all(t.rank == 0 for t in rest) and types[inst.args[0]].rank:
            return self._partial(g, ctx, i, op, types, inputs)
        dest = inst.args[0]
        insts = list(g.insts)
        insts[i] = Inst(op, inst.args, inst.results)
        out: dict[str, Any] = {"op": inst.op.name, "at": inst.results[0].name}
        j = made_by.get(dest)
        if j is not None and j != i and g.insts[j].op.view_twin is not None and rng.random() < 0.8:
            mover = g.insts[j]
            view_cls = mover.op.view_twin
            assert view_cls is not None
            attrs = mover.op.attrs()
            if {f.name for f in dataclasses.fields(view_cls)} == set(attrs):
                insts[j] = Inst(view_cls(**attrs), mover.args, mover.results)
                out["view"] = view_cls.name
                dest = mover.args[0]
        return g.with_insts(insts, _returned(g, ctx, dest, inputs)), out

    def _partial(self, g: Graph, ctx: Ctx, i: int, op, types, inputs):
        """`r = f(x)` becomes `v = view(x); f_(v)`, later uses of `r` reading `x`: the op
        applied in place to a slice, a selected row or a permutation of `x` only."""
        rng = ctx.rng
        inst = g.insts[i]
        x = inst.args[0]
        t = types[x]
        axis = rng.randrange(t.rank)
        n = t.shape[axis]
        kind = rng.choice(["view_slice", "view_slice", "view_select", "view_permute"])
        make: Callable[..., Op] = OP_REGISTRY[kind]
        if kind == "view_slice":
            start = rng.randrange(n)
            end = rng.randint(start + 1, n)
            view = make(axis=axis, start=start, end=end, step=rng.choice((1, 1, 2)))
        elif kind == "view_select":
            view = make(axis=axis, index=rng.randrange(n))
        else:
            perm = list(range(t.rank))
            rng.shuffle(perm)
            view = make(perm=tuple(perm))
        (vt,) = view.infer([t])
        v = Value(ctx.fresh("v"), vt)
        w = Value(ctx.fresh("v"), vt)
        out = replace_uses(g, inst.results[0].name, x, start=i + 1)
        insts = list(out.insts)
        insts[i:i + 1] = [Inst(view, (x,), (v,)), Inst(op, (v.name, *inst.args[1:]), (w,))]
        out = out.with_insts(insts)
        return out.with_insts(out.insts, _returned(out, ctx, x, inputs)), {
            "op": inst.op.name, "at": inst.results[0].name, "view": kind, "partial": True}


def _returned(g: Graph, ctx: Ctx, dest: str, inputs: set[str]) -> tuple[str, ...]:
    """The outputs, with `dest` added when it is a written graph input (a mutated input must be
    returned, docs/inplace.md)."""
    if ctx.root and dest in inputs and dest not in g.outputs:
        return g.outputs + (dest,)
    return g.outputs

