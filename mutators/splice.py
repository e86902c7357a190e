"""`splice`: a region of another seed grafted in."""
from __future__ import annotations

from typing import Any

from ir.core.graph import Graph
from ir.core.rewrite import insert_insts, replace_uses
from ir.core.span import span
from mutators.optable import enabled_ops, fragile_deep
from mutators.resolve import repropagate
from mutators.scope import (
    Ctx,
    ScopedMutator,
    copy_insts,
    pick_region,
    values_before,
)


class Splice(ScopedMutator):
    """A region of another seed grafted in: its operands bound to values of the same type
    (else new inputs, or new weights for the donor's weights; when none fits, the region is
    re-solved for an existing value of the same rank and dtype), one of its results put in
    place of a same-typed value (its later uses read it) or, at the top level, returned."""

    name = "splice"
    into_kernels = False  # a donor region may hold control flow

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        if self.donors is None:
            return None
        got = self.donors(rng)
        if got is None:
            return None
        donor_id, donor = got
        k = rng.randint(0, len(g.insts))
        avail = values_before(g, k)
        kinds = {(v.type.dtype, v.type.rank) for v in avail}
        dtypes_d = donor.types()
        donor_params = {p.name for p in donor.params}
        # a region with a data operand this scope has a value of the same dtype and rank for
        for _ in range(6):
            r = pick_region(donor, rng, max_len=5)
            if r is not None and any((dtypes_d[a].dtype, dtypes_d[a].rank) in kinds
                                     for a in r.ins if a not in donor_params):
                break
        else:
            return None
        dtypes = set(ctx.gen.enabled_dtypes())
        enabled = {c.name for c in enabled_ops(ctx.gen)}
        if ctx.iterated and any(fragile_deep(inst) for inst in r.insts):
            return None
        if any(dtypes_d[a].dtype not in dtypes for a in r.ins) or any(
                v.type.dtype not in dtypes for inst in r.insts for v in inst.results) or any(
                inst.op.name not in enabled and not inst.blocks for inst in r.insts):
            return None
        if ctx.depth + max((b.max_depth() + 1 for inst in r.insts for b in inst.blocks),
                           default=0) > self.max_depth:
            return None
        region_g = donor
        insts = list(r.insts)
        binding: dict[str, str] = {}
        data_ins = [a for a in r.ins if a not in donor_params]
        # no data operand has a same-typed value here: re-solve the region for one of the
        # same dtype and rank (the donor's weights it alone reads rebuilt to fit)
        if not any(v.type == dtypes_d[a] for a in data_ins for v in avail):
            a = rng.choice([a for a in data_ins if (dtypes_d[a].dtype, dtypes_d[a].rank) in kinds])
            u = rng.choice([v for v in avail if v.type.dtype == dtypes_d[a].dtype
                            and v.type.rank == dtypes_d[a].rank])
            sub = donor.with_insts(donor.insts[:r.end])
            types = dict(sub.types())
            types[a] = u.type
            new = repropagate(sub, _DonorCtx(ctx), r.start, types, rebuild_ok=True)
            if new is None:
                return None
            binding[a] = u.name
            region_g = sub.with_insts([*donor.insts[:r.start], *new])
            r = span(region_g.with_insts(region_g.insts, tuple(r.outs)), r.start, r.end)
            insts = list(r.insts)
        made = {v.name: v.type for v in (*ctx.b.inputs, *ctx.b.params)}  # rebuilt weights
        rtypes = {**region_g.types(), **made}
        for a in r.ins:
            if a in made:
                binding[a] = a
            if a in binding:
                continue
            t = rtypes[a]
            same = [v for v in avail if v.type == t]
            if a in donor_params:
                binding[a] = (rng.choice(same).name if same and rng.random() < 0.3
                              else ctx.need(t, param=True).name)
            elif same and rng.random() < 0.9:
                binding[a] = rng.choice(same).name
            else:
                binding[a] = ctx.need(t).name
        names = dict(binding)
        copy = copy_insts(insts, names, ctx.fresh)
        o = rng.choice(r.outs)
        o2, to = names[o], rtypes[o]
        out = insert_insts(g, k, copy)
        after = k + len(copy)
        later = {a for inst in out.insts[after:] for a in inst.args} | set(out.outputs)
        spots = [v for v in avail if v.type == to and v.name in later]
        if spots:
            u = rng.choice(spots)
            out = replace_uses(out, u.name, o2, start=after)
            how = {"replaces": u.name}
        elif ctx.root:
            out = out.with_insts(out.insts, out.outputs + (o2,))
            how = {"returned": o2}
        else:
            return None
        ops = [inst.op.name for inst in insts]
        return out, {"donor": donor_id, "ops": ops, "at": k, **how}


class _DonorCtx:
    """A `Ctx` stand-in for re-solving donor instructions (as if at the donor's top level:
    the donor's weights are rebuilt as new weights of the scope)."""

    def __init__(self, ctx: Ctx):
        self.b, self.rng, self.gen, self.root = ctx.b, ctx.rng, ctx.gen, True
