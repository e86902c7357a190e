"""Generation of views and in-place writes (`GenConfig.p_inplace`), a pass over a generated
graph.

For each of `cfg.nodes` steps, with chance `p_inplace`, a *site* is tried at a random point of
the top-level instruction list (so instructions after it read the new contents):
  - a destination: an existing value (a graph input or any result; never a param), reached
    through 0-2 new view ops (view_slice, view_select, view_reshape, view_permute,
    view_diagonal, view_expand, view_unfold) or not;
  - one in-place op on it (add_, sub_, mul_, div_, clamp_, relu_, sigmoid_, copy_, fill_,
    masked_fill_, index_put_, setitem), its other operands existing values (views of the same
    storage included) or new inputs/params, attributes and new shapes solved as the plain
    generator does (`SymbolicGraphBuilder.try_op`);
  - or (one site in five) only views, the last one made an output: it is read at the end, so
    it shows what later writes did to its storage.
The write's result becomes an output when nothing else would show the write (or by chance);
a written graph input becomes an output (the analysis requires it). Then every body of every
control-flow instruction gets, with chance `p_inplace`, one write on a value local to it (torch's
rule: bodies may not mutate their operands), from the body's own values.

Each candidate is kept only if the whole graph verifies, the in-place analysis included, so a
rejected program is never emitted. Deterministic: every choice comes from the generator's rng.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

from ir.analysis.inplace import analyze
from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.op import Op
from ir.core.verify import VerifyError, verify
from ir.gen.builder import GenConfig, SymbolicGraphBuilder
from ir.ops.inplace import INPLACE_OPS
from ir.ops.views import ViewDiagonal, ViewExpand, ViewPermute, ViewReshape, ViewSelect, ViewSlice, ViewUnfold

VIEW_OPS: tuple[type[Op], ...] = (
    ViewSlice, ViewSlice, ViewSelect, ViewReshape, ViewPermute, ViewDiagonal, ViewExpand,
    ViewUnfold,
)


def _enabled(cfg: GenConfig, classes: Sequence[type[Op]]) -> list[type[Op]]:
    return [c for c in classes if c.name not in cfg.ops_exclude]


class _Sites:
    def __init__(self, g: Graph, rng: random.Random, cfg: GenConfig):
        self.rng = rng
        self.cfg = cfg
        self.b = SymbolicGraphBuilder(rng, cfg, Names.of(g))
        self.b.inputs = list(g.inputs)
        self.b.params = list(g.params)
        self.name = g.name
        self.dtypes = set(cfg.enabled_dtypes())
        self.writes = _enabled(cfg, INPLACE_OPS)
        self.views = _enabled(cfg, VIEW_OPS)

    # ---- pieces --------------------------------------------------------------------------------
    def _views(self, start: Value, before: list[Value], allow_new: bool) -> list[Inst]:
        insts: list[Inst] = []
        cur = start
        for _ in range(self.rng.choice((0, 0, 1, 1, 1, 2))):
            ok = [c for c in self.views if cur.type.rank in c.first_ranks()]
            if not ok:
                break
            cls = self.rng.choice(ok)
            inst = self.b.try_op(cls, cur, before, (cur.type.dtype,), 1, allow_new=allow_new)
            if inst is None or inst.results[0].type.rank > self.cfg.max_rank:
                continue
            insts.append(inst)
            cur = inst.results[0]
        return insts

    def _write(self, dest: Value, before: list[Value], allow_new: bool) -> Inst | None:
        d = dest.type.dtype
        choices = []
        for cls in self.writes:
            if dest.type.rank not in cls.first_ranks():
                continue
            for arity in cls.arities():
                sigs = [ins for ins, outs in cls.signatures(arity)
                        if ins[0] == d and all(x in self.dtypes for x in ins)]
                if sigs:
                    choices.append((cls, arity, sigs))
        if not choices:
            return None
        cls, arity, sigs = self.rng.choice(choices)
        same = [s for s in sigs if all(x == d for x in s[1:]) or s[1:] == (DType.bool,)]
        ins = self.rng.choice(same if same and self.rng.random() < 0.75 else sigs)
        return self.b.try_op(cls, dest, before, ins, arity, allow_new=allow_new)

    def _ok(self, g: Graph) -> bool:
        try:
            verify(g)
        except VerifyError:
            return False
        return True

    # ---- top-level sites -----------------------------------------------------------------------
    def site(self, insts: list[Inst], outputs: list[str]) -> tuple[list[Inst], list[str]] | None:
        b, rng = self.b, self.rng
        n_in, n_par = len(b.inputs), len(b.params)
        pos = rng.randint(0, len(insts))
        before = [*b.inputs, *b.params] + [r for inst in insts[:pos] for r in inst.results]
        dests = [v for v in before if v.type.dtype in self.dtypes and v.type.rank <= self.cfg.max_rank
                 and v not in b.params]
        if not dests:
            return None
        locals_ = [v for v in dests if v not in b.inputs]
        start = rng.choice(locals_ if locals_ and rng.random() < 0.7 else dests)
        new = self._views(start, before, True)
        cand_outputs = list(outputs)
        if rng.random() < 0.2:  # views only: the last one read at the end
            if not new:
                self._rollback(n_in, n_par)
                return None
            cand_outputs.append(new[-1].results[0].name)
        else:
            dest = new[-1].results[0] if new else start
            write = self._write(dest, before + [i.results[0] for i in new], True)
            if write is None:
                self._rollback(n_in, n_par)
                return None
            new.append(write)
        cand = insts[:pos] + new + insts[pos:]
        g = self._graph(cand, cand_outputs)
        if new and new[-1].op.effect.writes is not None:
            try:
                unseen = _unobserved(g, pos + len(new) - 1)
            except VerifyError:
                self._rollback(n_in, n_par)
                return None
            if unseen or rng.random() < 0.3:
                cand_outputs.append(new[-1].results[0].name)
            g = self._graph(cand, cand_outputs + _unreturned(g, cand_outputs))
        if not self._ok(g):
            self._rollback(n_in, n_par)
            return None
        return cand, list(g.outputs)

    def _rollback(self, n_in: int, n_par: int) -> None:
        del self.b.inputs[n_in:]
        del self.b.params[n_par:]

    def _graph(self, insts: Sequence[Inst], outputs: Sequence[str]) -> Graph:
        return Graph(self.name, tuple(self.b.inputs), tuple(insts), tuple(outputs), tuple(self.b.params))

    # ---- sites in bodies -----------------------------------------------------------------------
    def body_site(self, body: Graph, rebuild: Callable[[Graph], Graph]) -> Graph | None:
        """`body` with one write on a value local to it, or None; `rebuild(body)` is the whole
        graph with it, for verification."""
        rng = self.rng
        if not body.insts:
            return None
        pos = rng.randint(1, len(body.insts))
        before = list(body.inputs) + [r for inst in body.insts[:pos] for r in inst.results]
        local = [r for inst in body.insts[:pos] if inst.op.effect.pure for r in inst.results
                 if r.type.dtype in self.dtypes]
        if not local:
            return None
        start = rng.choice(local)
        new = self._views(start, before, False)
        write = self._write(new[-1].results[0] if new else start,
                            before + [i.results[0] for i in new], False)
        if write is None:
            return None
        out = replace(body, insts=tuple(body.insts[:pos]) + tuple(new) + (write,) + tuple(body.insts[pos:]))
        return out if self._ok(rebuild(out)) else None


def _unobserved(g: Graph, index: int) -> bool:
    """Whether nothing shows the write of instruction `index`: no later instruction reads its
    storage and no output is in it."""
    lv = analyze(g, require_returned=False).top
    inst = g.insts[index]
    k = inst.op.effect.writes
    assert k is not None  # a write (the caller checks)
    st = lv.node(inst.args[k]).storage
    later = {x for i in g.insts[index + 1:] for x in i.args} | set(g.outputs)
    return not any(lv.canon(n) in lv.nodes and lv.node(n).storage is st for n in later)


def _unreturned(g: Graph, outputs: list[str]) -> list[str]:
    """Written graph inputs missing from `outputs` (they must be returned)."""
    lv = analyze(g, require_returned=False).top
    return [v.name for v in g.inputs if lv.nodes[v.name].storage.writes and v.name not in outputs]


def add_inplace(g: Graph, rng: random.Random, cfg: GenConfig) -> Graph:
    """`g` with views and in-place writes placed at rate `cfg.p_inplace` (see the module doc);
    verified."""
    s = _Sites(g, rng, cfg)
    insts, outputs = list(g.insts), list(g.outputs)
    for _ in range(cfg.nodes):
        if rng.random() >= cfg.p_inplace:
            continue
        placed = s.site(insts, outputs)
        if placed is not None:
            insts, outputs = placed
    out = s._graph(insts, outputs)
    out = _in_bodies(out, s, lambda body: body, rng, cfg)
    return verify(out)


def _in_bodies(g: Graph, s: _Sites, rebuild: Callable[[Graph], Graph], rng: random.Random,
               cfg: GenConfig) -> Graph:
    """`g` (a level of the whole graph; `rebuild(level)` makes the whole graph) with writes
    placed in its control-flow bodies, nested ones included."""
    insts = list(g.insts)
    for i, inst in enumerate(insts):
        if not inst.blocks:
            continue
        blocks = list(inst.blocks)
        for k in range(len(blocks)):
            def whole(body: Graph, i: int = i, k: int = k, blocks: list[Graph] = blocks) -> Graph:
                bs = list(blocks)
                bs[k] = body
                level = g.with_insts(insts[:i] + [replace(insts[i], blocks=tuple(bs))] + insts[i + 1:])
                return rebuild(level)

            if rng.random() < cfg.p_inplace:
                placed = s.body_site(blocks[k], whole)
                if placed is not None:
                    blocks[k] = placed
            blocks[k] = _in_bodies(blocks[k], s, whole, rng, cfg)
        insts[i] = replace(inst, blocks=tuple(blocks))
    return g.with_insts(insts)
