"""Mutators that add control flow around existing code: `wrap_branch` (a region becomes one
branch of an `if`) and `wrap_loop` (a region becomes the body of a `loop`, or the cell of a
`scan` over a sequence axis: the loop-wrapped recurrent cell).

Both follow the generator's conventions (`ir.gen.control`), so the tests they make get the same
input-set coverage: an if's predicate is `reduce_sum(...(v)) > t` with `t` a new scalar graph
input (threaded into bodies unchanged, see `mutators.scope`), a loop's trip count is a new int64
scalar graph input, a scan runs over axis 0 of a value of the scope or of a new input. Values
a body needs from outside are operands (bodies are closed): an if takes the region's live-ins
as operands; a loop or scan carries them through unchanged.
"""
from __future__ import annotations

from typing import Any

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.paths import Path
from ir.core.rewrite import rename_canonically, replace_uses
from ir.core.span import Span, span
from ir.core.text import print_graph
from ir.core.types import TensorType
from ir.gen.control import MAX_SCAN_LEN, BodyScope, make_predicate, mix_carry, to_scalar
from ir.ops.control import If, Loop, Scan
from mutators.insert_op import InsertOp
from mutators.mutate_attrs import MutateAttrs
from mutators.optable import enabled_ops, fragile_deep, ops_to
from mutators.replace_op import ReplaceOp
from mutators.scope import (
    Ctx,
    Scope,
    ScopedMutator,
    copy_insts,
    depends,
    pick_region,
    prune,
    pure_deep,
    values_before,
)


def _nesting(r: Span) -> int:
    """How deep the region's own bodies nest (0: none)."""
    return max((b.max_depth() + 1 for inst in r.insts for b in inst.blocks), default=0)


def _body_scope(ctx: Ctx, values: list[Value]) -> BodyScope:
    return BodyScope(ctx.b, ctx.depth + 1, list(values))


def _same(a: Graph, b: Graph) -> bool:
    return print_graph(rename_canonically(a)) == print_graph(rename_canonically(b))


class WrapBranch(ScopedMutator):
    """A region becomes the then-branch of an `if` whose else-branch computes values of the
    same types differently: fresh typed op chains from the region's operands, or the region
    perturbed (one op replaced, re-attributed or inserted). The predicate compares a scalar
    reduced from data computed before the region with a new scalar graph input."""

    name = "wrap_branch"
    into_kernels = False

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng, b = ctx.rng, ctx.b
        r = pick_region(g, rng)
        if r is None or ctx.depth + 1 + _nesting(r) > self.max_depth:
            return None
        types = g.types()
        scope = BodyScope(b, ctx.depth, values_before(g, r.start))
        cond = make_predicate(b, scope)
        ctx.needs += scope.needs
        if cond is None:
            return None
        then_ins = [Value(ctx.fresh("b"), types[a]) for a in r.ins]
        names = dict(zip(r.ins, (v.name for v in then_ins), strict=True))
        then_insts = copy_insts(r.insts, names, ctx.fresh)
        then_g = Graph("then", tuple(then_ins), tuple(then_insts), tuple(names[o] for o in r.outs))
        made = None
        how = "chains" if rng.random() < 0.5 else "perturbed"
        if how == "chains":
            made = self._chains(ctx, [types[a] for a in r.ins], [types[o] for o in r.outs])
        if made is None:
            how = "perturbed"
            made = self._perturbed(ctx, then_g)
        if made is None:
            return None
        else_g, else_needs = made
        if _same(then_g, else_g):
            return None
        # both bodies take every need: their own, and an unused input for the other's
        else_outer = [ctx.need(v.type, p) for v, p in else_needs]
        then_g = Graph("then", then_g.inputs + tuple(Value(ctx.fresh("b"), v.type) for v, _ in else_needs),
                       then_g.insts, then_g.outputs)
        else_g = Graph("else", else_g.inputs + tuple(v for v, _ in else_needs), else_g.insts,
                       else_g.outputs)
        results = tuple(Value(o, types[o]) for o in r.outs)
        inst = Inst(If(), (cond.name, *r.ins, *(v.name for v in else_outer)), results,
                    (then_g, else_g))
        insts = [*g.insts[:r.start], *scope.insts, inst, *g.insts[r.end:]]
        return g.with_insts(insts), {"region": [r.start, r.end], "else": how,
                                     "ops": [i.op.name for i in r.insts]}

    def _chains(self, ctx: Ctx, ins: list[TensorType], outs: list[TensorType]):
        """An else-body of fresh chains: each output from an input of its type (or of its
        dtype, by an op solved to give the type)."""
        rng = ctx.rng
        body_ins = [Value(ctx.fresh("b"), t) for t in ins]
        es = _body_scope(ctx, body_ins)
        ops = list(enabled_ops(ctx.gen, ctx.iterated))
        results = []
        for t in outs:
            same = [v for v in body_ins if v.type == t]
            if same:
                start = rng.choice(same)
                results.append(es.chain(start, ops, rng.randint(1, max(1, ctx.gen.body_nodes))))
                continue
            made = None
            firsts = [v for v in es.values if v.type.dtype == t.dtype] or list(es.values)
            for _ in range(4):
                first = rng.choice(firsts)
                cands = ops_to(ctx.gen, first.type, t.dtype, ctx.iterated)
                if not cands:
                    continue
                op_cls, dts = rng.choice(cands)
                inst = es.try_op(op_cls, first, es.values, dts, len(dts), target=t)
                if inst is not None:
                    es.place([inst])
                    made = inst.results[0]
                    break
            if made is None:
                return None
            results.append(made)
        return Graph("else", tuple(body_ins), tuple(es.insts), tuple(v.name for v in results)), []

    def _perturbed(self, ctx: Ctx, then_g: Graph):
        """A renamed copy of the then-body with one classic rewrite applied (its new operands
        are needs of the else-body)."""
        rng, b = ctx.rng, ctx.b
        names: dict[str, str] = {}
        base = Graph("else", tuple(Value(ctx.fresh("b"), v.type) for v in then_g.inputs), (), ())
        names.update(zip((v.name for v in then_g.inputs), (v.name for v in base.inputs), strict=True))
        insts = copy_insts(then_g.insts, names, ctx.fresh)
        else_g = Graph("else", base.inputs, tuple(insts), tuple(names.get(o, o) for o in then_g.outputs))
        kinds = [ReplaceOp(), MutateAttrs(), InsertOp()]
        rng.shuffle(kinds)
        for m in kinds:
            n_in, n_par = len(b.inputs), len(b.params)
            sub = Ctx(b, rng, ctx.gen, Scope(Path(((-1, 1),)), else_g, ctx.depth + 1, ctx.iterated),
                      ctx.donors)
            done = m.rewrite(else_g, sub)
            new_in, new_par = b.inputs[n_in:], b.params[n_par:]
            del b.inputs[n_in:], b.params[n_par:]
            if done is None:
                continue
            new = prune(done[0], root=False)
            if new.inputs != else_g.inputs or new.output_types() != else_g.output_types():
                continue
            needs = sub.needs + [(v, False) for v in new_in] + [(v, True) for v in new_par]
            return new, needs
        return None


class WrapLoop(ScopedMutator):
    """A region whose result has the type of one of its operands is iterated: the body of a
    `loop` carrying that operand (trip count: a new int64 scalar input), or the cell of a
    `scan` over axis 0 of a sequence (a value of the scope whose slices fit another operand of
    the region, or a new input mixed into the carry): `carry' = region(carry, x_t)`,
    `y_t = chain(carry')`. Recurrent layers whose output type equals their input's (Y = X)
    are preferred as regions: the loop-wrapped RNN callable (a stack of tied layers)."""

    name = "wrap_loop"
    into_kernels = False
    #: share of wraps made as a scan (when the scope allows one)
    p_scan: float = 0.4

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng = ctx.rng
        types = g.types()
        rnn = [i for i, inst in enumerate(g.insts) if inst.op.family == "rnn"
               and types[inst.args[0]] == inst.results[0].type]
        r = span(g, rng.choice(rnn), rng.choice(rnn) + 1) if rnn and rng.random() < 0.5 else None
        if r is None or not r.outs:
            r = pick_region(g, rng, ok=lambda inst: pure_deep(inst) and not fragile_deep(inst))
        if r is None or ctx.depth + 1 + _nesting(r) > self.max_depth:
            return None
        pairs = [(a, o) for a in r.ins for o in r.outs
                 if types[a] == types[o] and depends(r.insts, a, o)]
        if not pairs:
            return None
        a, o = rng.choice(pairs)
        if rng.random() < self.p_scan:
            done = self._scan(g, ctx, r, a, o, types)
            if done is not None:
                return done
        return self._loop(g, ctx, r, a, o, types)

    def _loop(self, g, ctx: Ctx, r: Span, a: str, o: str, types):
        if DType.int64 not in ctx.gen.enabled_dtypes():
            return None
        trip = ctx.need(TensorType((), DType.int64))
        others = [x for x in r.ins if x != a]
        counter = Value(ctx.fresh("i"), TensorType((), DType.int64))
        carried = [Value(ctx.fresh("b"), types[x]) for x in [a, *others]]
        names = dict(zip([a, *others], (v.name for v in carried), strict=True))
        insts = copy_insts(r.insts, names, ctx.fresh)
        body = Graph("body", (counter, *carried), tuple(insts),
                     (names[o], *(v.name for v in carried[1:])))
        results = tuple(Value(ctx.fresh("v"), types[x]) for x in [a, *others])
        inst = Inst(Loop(), (trip.name, a, *others), results, (body,))
        out = replace_uses(g, o, results[0].name, start=r.end)
        out = out.with_insts([*out.insts[:r.end], inst, *out.insts[r.end:]])
        return out, {"region": [r.start, r.end], "kind": "loop", "carry": a,
                     "ops": [i.op.name for i in r.insts]}

    def _scan(self, g, ctx: Ctx, r: Span, a: str, o: str, types):
        rng, b = ctx.rng, ctx.b
        t = types[a]
        cap = b.dim_cap(t.rank + 1)
        others = [x for x in r.ins if x != a]
        avail = values_before(g, r.start)
        # (the live-in replaced by x_t, or None: x_t is mixed into the carry; the sequence)
        options: list[tuple[str | None, Value | None, TensorType]] = []
        for x in [None, *others]:
            xt = t if x is None else types[x]
            if xt.rank + 1 > ctx.gen.max_rank:
                continue
            options += [(x, v, xt) for v in avail if v.type.rank == xt.rank + 1
                        and v.type.shape[0] <= MAX_SCAN_LEN and v.type.dtype == xt.dtype
                        and tuple(v.type.shape[1:]) == tuple(xt.shape)]
            if all(1 <= d <= cap for d in xt.shape):
                options.append((x, None, xt))
        if not options:
            return None
        x, seq, xt = rng.choice(options)
        if seq is None:
            length = rng.randint(2, min(MAX_SCAN_LEN, cap))
            seq = ctx.need(TensorType((length, *xt.shape), xt.dtype))
        length = seq.type.shape[0]
        carries = [a, *(y for y in others if y != x)]
        c_ins = [Value(ctx.fresh("b"), types[y]) for y in carries]
        x_in = Value(ctx.fresh("b"), xt)
        body = _body_scope(ctx, [*c_ins, x_in])
        names = dict(zip(carries, (v.name for v in c_ins), strict=True))
        if x is None:
            mixed = mix_carry(b, body, list(enabled_ops(ctx.gen, True)), c_ins[0], x_in)
            if mixed is None:
                return None
            names[a] = mixed.name
        else:
            names[x] = x_in.name
        insts = copy_insts(r.insts, names, ctx.fresh)
        body.place(insts)
        new_c = next(res for i in insts for res in i.results if res.name == names[o])
        y = body.chain(new_c, list(enabled_ops(ctx.gen, True)), rng.randint(1, max(1, ctx.gen.body_nodes)))
        ys = [y]
        if not all(1 <= d <= b.dim_cap(y.type.rank + 1) for d in (length, *y.type.shape)):
            reduced = to_scalar(body, y)
            ys = [] if reduced is None else [reduced[1]]
            if reduced is not None:
                body.place(reduced[0])
        graph = Graph("body", (*c_ins, x_in), tuple(body.insts),
                      (names[o], *(v.name for v in c_ins[1:]), *(v.name for v in ys)))
        results = tuple(Value(ctx.fresh("v"), types[y]) for y in carries) + tuple(
            Value(ctx.fresh("v"), TensorType((length, *v.type.shape), v.type.dtype)) for v in ys)
        inst = Inst(Scan(num_carries=len(carries), reverse=rng.random() < 0.5),
                    (*carries, seq.name), results, (graph,))
        out = replace_uses(g, o, results[0].name, start=r.end)
        outputs = out.outputs + ((results[-1].name,) if ys and ctx.root else ())
        out = out.with_insts([*out.insts[:r.end], inst, *out.insts[r.end:]], outputs)
        return out, {"region": [r.start, r.end], "kind": "scan", "carry": a,
                     "x": x, "sequence": "new" if seq.name not in {v.name for v in avail} else seq.name,
                     "ops": [i.op.name for i in r.insts]}
