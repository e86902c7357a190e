"""Custom-op sites (`GenConfig.p_custom`, `ir.ops.custom`): a run of straight-line pure
instructions of any scope (the top level or a body of an if, loop or scan) becomes the body of
a custom op, placed where functionalization and Inductor's re-inplacing have choices to make.

A site's form (`wrap_region`), drawn per site:
  - `pure`: the op returns the region's live-outs (no mutation);
  - `in_place`: one live-out has the type of an operand that the scope owns (a local pure
    result, no view): the op overwrites that operand with it (`mutates`) and later readers of
    the live-out read the operand, as a kernel written `op_(x, y)` is used;
  - `behind_clone`: the written operand is a `clone` of a region operand made just before the
    op, which reads the original too (`y = x.clone(); op(y, x)`, pytorch#198031's shape): how
    a value the scope does not own (an input, a param, a body's input) is written;
  - `through_view`: the written operand is a view (the view twin of the movement op that made
    it: a slice, permute, reshape, ...), so the op writes into the base's memory, which later
    readers of the base see (pytorch#153389, #197829's shapes); a base the scope does not own
    is cloned first.
Each candidate is verified (types, the in-place rules); one that fails is not placed. A test
that differentiates (`GenConfig.for_training`: `p_custom_mutates` 0) gets pure ops only: torch
has no autograd formula for a custom op that mutates.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import replace

from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.op import Op
from ir.core.paths import scopes as walk_scopes
from ir.core.span import Span, pick_span
from ir.core.verify import VerifyError, verify
from ir.ops.call import BodyCall
from ir.ops.custom import Custom
from ir.ops.views import Clone, ViewReshape, ViewSlice

#: the site forms, in the order `wrap_region` tries a drawn one's fallbacks
FORMS = ("pure", "in_place", "behind_clone", "through_view")
#: the longest region a site wraps
MAX_REGION = 4


def _plain(inst: Inst) -> bool:
    return not inst.blocks and inst.op.effect.pure and inst.op.in_custom_kernels


def pick_region(g: Graph, rng: random.Random) -> Span | None:
    """A random run of 1..MAX_REGION plain pure instructions with live-outs."""
    return pick_span(g, rng, MAX_REGION, _plain)


def label_for(g: Graph, prefix: str = "k") -> str:
    """A label no body call of `g` has (`k0`, `k1`, ... for a custom op)."""
    taken = {inst.op.label for inst, _ in g.walk() if isinstance(inst.op, BodyCall)}
    k = 0
    while f"{prefix}{k}" in taken:
        k += 1
    return f"{prefix}{k}"


def _owned(g: Graph, name: str) -> bool:
    """A value this scope may write: a result of a pure instruction of it (not an input, a
    param, a body's input, a view or an in-place result)."""
    return any(name in inst.result_names and inst.op.effect.pure for inst in g.insts)


def _rename(g: Graph, start: int, old: str, new: str) -> tuple[tuple[Inst, ...], tuple[str, ...]]:
    """Instructions from `start` on and the outputs, reading `new` where they read `old`
    (bodies are closed: only operands change)."""
    insts = tuple(replace(i, args=tuple(new if a == old else a for a in i.args))
                  for i in g.insts[start:])
    return insts, tuple(new if o == old else o for o in g.outputs)


def _view_into(g: Graph, r: Span, a: str, types: dict, rng: random.Random,
               fresh: Callable[[str], str]) -> list[Inst]:
    """Instructions ending in a view of `a`'s type into the memory of a value the scope owns,
    defined before region `r`: a reshape of one of as many elements, or a slice of one larger
    on one axis; with none, a slice of a copy of `a`."""
    t = types[a]
    n = 1
    for d in t.shape:
        n *= int(d)
    fits: list[tuple[str, Op]] = []
    for inst in g.insts[:r.start]:
        for v in inst.results:
            u = v.type
            if not inst.op.effect.pure or u.dtype != t.dtype or u.rank == 0:
                continue
            m = 1
            for d in u.shape:
                m *= int(d)
            if m == n and u.shape != t.shape:
                fits.append((v.name, ViewReshape(shape=tuple(int(d) for d in t.shape))))
            wider = [d for d in range(u.rank) if u.rank == t.rank and u.shape[d] != t.shape[d]]
            if len(wider) == 1 and u.shape[wider[0]] > t.shape[wider[0]]:
                d = wider[0]
                start = rng.randint(0, int(u.shape[d]) - int(t.shape[d]))
                fits.append((v.name, ViewSlice(axis=d, start=start,
                                               end=start + int(t.shape[d]), step=1)))
    out: list[Inst] = []
    if fits:
        base, view = rng.choice(fits)
    else:
        c = Value(fresh("c"), t)
        out.append(Inst(Clone(), (a,), (c,)))
        base = c.name
        view = (ViewSlice(axis=0, start=0, end=int(t.shape[0]), step=1) if t.rank
                else ViewReshape(shape=()))
    out.append(Inst(view, (base,), (Value(fresh("w"), t),)))
    return out


def wrap_region(g: Graph, r: Span, form: str, rng: random.Random,
                fresh: Callable[[str], str], label: str,
                make: Callable[[str, tuple[int, ...]], BodyCall] = Custom
                ) -> tuple[Graph, str] | None:
    """Scope `g` with region `r` made a custom op of `form` (`FORMS`; the module doc), or None
    when the region has no site of that form. Returns the scope and the form placed. The
    scope's result is unverified. `fresh`: new value names (unique in the whole graph).
    `make(label, written)`: the op (a custom op; a compile region takes the `pure` form)."""
    types = g.types()
    made_by = {res: i for i, inst in enumerate(g.insts) for res in inst.result_names}
    pairs = [(k, o) for k, a in enumerate(r.ins) for o in r.outs if types[a] == types[o]]
    before: list[Inst] = []
    operands = list(r.ins)
    written: tuple[int, ...] = ()
    out_written: str | None = None
    head = list(g.insts[:r.start])
    if form != "pure":
        if not pairs:
            return None
        k, out_written = rng.choice(pairs)
        a = r.ins[k]
        if form == "in_place":
            if not _owned(g, a):
                return None
            written = (k,)
        elif form == "behind_clone":
            c = Value(fresh("c"), types[a])
            before.append(Inst(Clone(), (a,), (c,)))
            operands = [c.name, *operands]
            written = (0,)
        else:  # through_view
            j = made_by.get(a)
            mover = g.insts[j] if j is not None else None
            view_cls = mover.op.view_twin if mover is not None else None
            if mover is not None and view_cls is not None and j is not None and \
                    {f.name for f in dataclasses.fields(view_cls)} == set(mover.op.attrs()):
                # the operand a movement op made becomes a view of its base
                base = mover.args[0]
                args = mover.args
                if not _owned(g, base):  # a base the scope does not own: a copy, viewed
                    cb = Value(fresh("c"), types[base])
                    head.insert(j, Inst(Clone(), (base,), (cb,)))
                    args = (cb.name, *mover.args[1:])
                    j += 1
                head[j] = Inst(view_cls(**mover.op.attrs()), args, mover.results)
            else:  # the operand becomes a view of the operand's type into another value
                made = _view_into(g, r, a, types, rng, fresh)
                before += made
                operands[k] = made[-1].results[0].name
            written = (k,)
    types.update((v.name, v.type) for i in before for v in i.results)
    inputs = tuple(Value(fresh("b"), types[a]) for a in operands)
    shift = len(operands) - len(r.ins)  # a copy made first is operand 0
    rename = {a: inputs[i + shift].name for i, a in enumerate(r.ins)}
    body_insts = []
    for inst in g.insts[r.start:r.end]:
        res = tuple(Value(fresh("v"), v.type) for v in inst.results)
        body_insts.append(Inst(inst.op, tuple(rename.get(x, x) for x in inst.args), res,
                               inst.blocks))
        rename.update((v.name, n.name) for v, n in zip(inst.results, res, strict=True))
    results = [o for o in r.outs if o != out_written]
    body_outs = ([rename[out_written]] if out_written else []) + [rename[o] for o in results]
    body = Graph(label, inputs, tuple(body_insts), tuple(body_outs))
    inst = Inst(make(label, written), tuple(operands),
                tuple(Value(o, types[o]) for o in results), (body,))
    rest, outputs = g.insts[r.end:], g.outputs
    if out_written is not None:
        target = operands[written[0]]
        rest, outputs = _rename(g, r.end, out_written, target)
    insts = (*head, *before, inst, *rest)
    return replace(g, insts=tuple(insts), outputs=outputs), form


def add_custom(g: Graph, rng: random.Random, mutates: float, sites: int = 2,
               attempts: int = 8) -> Graph:
    """`g` with up to `sites` custom-op sites in random scopes, a share `mutates` of them
    mutating (`FORMS[1:]`, drawn evenly, falling back to `pure`); each verified."""
    placed = 0
    for _ in range(attempts):
        if placed >= sites:
            break
        scope_path, scope = rng.choice(list(walk_scopes(g)))
        r = pick_region(scope, rng)
        if r is None:
            continue
        form = rng.choice(FORMS[1:]) if rng.random() < mutates else "pure"
        made = wrap_region(scope, r, form, rng, Names.of(g).fresh, label_for(g))
        if made is None and form != "pure":
            made = wrap_region(scope, r, "pure", rng, Names.of(g).fresh, label_for(g))
        if made is None:
            continue
        cand = scope_path.replace_at(g, made[0])
        try:
            verify(cand)
        except VerifyError:
            continue
        g = cand
        placed += 1
    return g
