"""The classic mutators: replace an op by a type-compatible one, mutate an op's attributes (its
weights rebuilt to fit), mutate an input's shape (every op downstream re-solved with z3),
duplicate a region, splice a region from another seed. (`insert_op` is in its own module.)
"""
from __future__ import annotations

import dataclasses
import random
from typing import Any, Protocol

from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op, TypeRuleError
from ir.core.rewrite import insert_insts, replace_uses
from ir.core.shapes import holds
from ir.core.types import TensorType
from ir.gen.builder import GenConfig, SymbolicGraphBuilder
from mutators.optable import enabled_ops, fragile_deep, ops_to, same_type_ops
from mutators.scope import (
    Ctx,
    ScopedMutator,
    copy_insts,
    pick_region,
    pure,
    region,
    values_before,
)
from mutators.solve import NEW, NEW_PARAM, solve


class SolveCtx(Protocol):
    """What re-solving instructions reads of a `Ctx` (`_DonorCtx` stands in for one)."""

    b: SymbolicGraphBuilder
    rng: random.Random
    gen: GenConfig

    @property
    def root(self) -> bool: ...


def _plain(inst: Inst) -> bool:
    """An ordinary pure op (no bodies, no view or write, placed by the generator)."""
    return not inst.blocks and pure(inst.op) and getattr(type(inst.op), "generic", True)


def _exclusive(g: Graph, name: str, index: int) -> bool:
    """`name` is read by instruction `index` only (once) and is not an output."""
    return name not in g.outputs and g.users(name) == [index] and g.insts[index].args.count(name) == 1


def _replaceable(g: Graph, ctx: SolveCtx, index: int) -> dict[str, str]:
    """Operands of instruction `index` that may be rebuilt: at the top level, params and graph
    inputs nothing else reads (NEW_PARAM / NEW)."""
    if not ctx.root:
        return {}
    params = {p.name for p in g.params}
    inputs = {v.name for v in g.inputs}
    out = {}
    for a in g.insts[index].args[1:]:
        if _exclusive(g, a, index):
            if a in params:
                out[a] = NEW_PARAM
            elif a in inputs and len(g.inputs) > 1:
                out[a] = NEW
    return out


class ReplaceOp(ScopedMutator):
    """An op becomes another op giving the same result type from the same first operand (or
    another value of its dtype); other operands are earlier values or new placeholders."""

    name = "replace_op"

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        sites = [i for i, inst in enumerate(g.insts) if _plain(inst) and len(inst.results) == 1]
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


class MutateAttrs(ScopedMutator):
    """Fresh attributes for an op (sampled as z3 symbols, solved so its result types stay): a
    convolution's stride, padding, dilation and kernel, a pool's window, a reduction's axis,
    a recurrent layer's hidden size and direction, ... Weights and inputs only this op reads
    are rebuilt to fit (a new kernel size is a new weight shape)."""

    name = "mutate_attrs"

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        sites = [i for i, inst in enumerate(g.insts)
                 if _plain(inst) and dataclasses.fields(inst.op)]
        if not sites:
            return None
        i = rng.choice(sites)
        inst = g.insts[i]
        types = g.types()
        rebuild = _replaceable(g, ctx, i)
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
                                         "attrs": {k: _jsonable(v) for k, v in changed.items()}}
        return None


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, (int, float, bool, str)) or v is None:
        return v
    return str(v)


def repropagate(g: Graph, ctx: SolveCtx, start: int, types: dict[str, TensorType],
                rebuild_ok: bool) -> list[Inst] | None:
    """Instructions `start:` of `g` re-typed after some values changed type (`types`: every
    value's type, the changed ones already new; updated in place). An instruction reading a
    changed value keeps its attributes if they still hold, else is re-solved with fresh ones
    (its exclusive weights and inputs rebuilt when `rebuild_ok`); its results keep their names.
    None when some instruction cannot be re-solved (or has bodies or memory effects)."""
    out: list[Inst] = []
    orig = g.types()
    for i in range(start, len(g.insts)):
        inst = g.insts[i]
        ins = [types[a] for a in inst.args]
        if all(t == orig[a] for a, t in zip(inst.args, ins, strict=True)):
            out.append(inst)
            continue
        if not _plain(inst):
            return None
        outs = _keep(inst.op, ins, ctx)
        if outs is not None:
            new = Inst(inst.op, inst.args, tuple(Value(r.name, t) for r, t in zip(inst.results, outs, strict=True)))
        else:
            rebuild = _replaceable(g, ctx, i) if rebuild_ok else {}
            args: list[Value | str] = [Value(inst.args[0], ins[0]), *(
                rebuild.get(a, Value(a, t)) for a, t in zip(inst.args[1:], ins[1:], strict=True))]
            solved = solve(ctx.b, type(inst.op), args, [t.dtype for t in ins],
                           names=inst.result_names)
            if solved is None:
                return None
            new = solved
        types.update((r.name, r.type) for r in new.results)
        out.append(new)
    return out


def _keep(op: Op, ins: list[TensorType], ctx: SolveCtx) -> list[TensorType] | None:
    """The result types of `op` over `ins` when its attributes still fit them (its type rule,
    `Op.type_rule`, accepts them and they are within the backend's bounds)."""
    try:
        outs = op.type_rule(ins)
    except TypeRuleError:
        return None
    if not all(all(isinstance(c, bool) and c or holds(c) for c in ctx.b.bounds(t)) for t in outs):
        return None
    return outs


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


class Splice(ScopedMutator):
    """A region of another seed grafted in: its operands bound to values of the same type
    (else new inputs, or new weights for the donor's weights; when none fits, the region is
    re-solved for an existing value of the same rank and dtype), one of its results put in
    place of a same-typed value (its later uses read it) or, at the top level, returned."""

    name = "splice"

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
            r = region(region_g.with_insts(region_g.insts, tuple(r.outs)), r.start, r.end)
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
