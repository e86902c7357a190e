"""Compile-region sites (`GenConfig.p_region`, `ir.ops.region`): spans of a graph called
through one `torch.compiler.nested_compile_region` function from several sites.

A group (one label, one function) starts with a span of plain pure instructions of any scope
(the top level or a body of an if, loop or scan) made a region call. A region in a loop or
scan body is called once per step: the python dialect's unrolled loop calls it from as many
sites. Then the group's form (`GROUP_FORMS`) adds another site:
  - `repeat`: the same body called again at the end of the top level, on other values of the
    operands' types (other weights: a new param where none is left), its results new outputs;
  - `chain`: the body called again on the first call's results (a layer stacked on itself);
  - `shape`: the body called on new inputs of other shapes (one dim size changed wherever it
    occurs, the body's types re-inferred): the two calls differ in shape guards;
  - `flag`: another span, anywhere, made a call of the same function with another body: the
    function picks the body by an attribute of its site argument, so the calls differ in a
    guard on that attribute (pytorch#192905's layer flag);
  - `nested`: a span around the first call made a region of its own: a region inside a
    region (#192905's nesting);
  - `single`: no other site.
Each candidate is verified; one that fails is not placed.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import cast

from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.paths import Path
from ir.core.paths import scopes as walk_scopes
from ir.core.rewrite import rename_values
from ir.core.span import pick_span, span
from ir.core.types import TensorType
from ir.core.verify import VerifyError, verify
from ir.gen.custom import MAX_REGION, label_for, wrap_region
from ir.ops.region import Region
from ir.shrink.retype import retype

#: the forms of a group's second site (the module doc), drawn evenly
GROUP_FORMS = ("single", "repeat", "chain", "shape", "flag", "nested")


def _plain(inst: Inst) -> bool:
    return not inst.blocks and inst.op.effect.pure


def _spannable(inst: Inst) -> bool:
    """What a region's body may hold: plain pure code and region calls."""
    return _plain(inst) or isinstance(inst.op, Region)


def _make(label: str, written: tuple[int, ...]) -> Region:
    return Region(label)


def _wrap(g: Graph, rng: random.Random, label: str, ok: Callable[[Inst], bool] = _plain
          ) -> tuple[Graph, Path, int] | None:
    """`g` with a span of a random scope made a call of region `label`: the graph, the
    scope's path and the call's index in it (None: no span found, or it did not verify)."""
    path, scope = rng.choice(list(walk_scopes(g)))
    s = pick_span(scope, rng, MAX_REGION, ok)
    if s is None:
        return None
    made = wrap_region(scope, s, "pure", rng, Names.of(g).fresh, label, _make)
    if made is None:
        return None
    cand = path.replace_at(g, made[0])
    try:
        verify(cand)
    except VerifyError:
        return None
    return cand, path, s.start


def _call_again(g: Graph, site: Inst, operands: list[str], body: Graph,
                fresh: Callable[[str], str]) -> Graph:
    """`g` (a top-level graph) calling `site`'s region again at its end, on `operands`
    with `body`, its results new outputs."""
    results = tuple(Value(fresh(r.name), t) for r, t in zip(site.results, body.output_types(),
                                                          strict=True))
    body = rename_values(body, lambda v, kind: fresh(v.name))  # names are unique graph-wide
    inst = Inst(site.op, tuple(operands), results, (body,))
    return replace(g, insts=(*g.insts, inst), outputs=(*g.outputs, *(r.name for r in results)))


def _repeat(g: Graph, site: Inst, rng: random.Random, names: Names) -> Graph | None:
    types = g.types()
    values = [*(v.name for v in (*g.inputs, *g.params)),
              *(r.name for inst in g.insts for r in inst.results)]
    operands: list[str] = []
    new_params: list[Value] = []
    for a in site.args:
        others = [v for v in values if v != a and types[v] == types[a]]
        if others:
            operands.append(rng.choice(others))
        else:  # another weight of that type
            p = Value(names.fresh("w"), types[a])
            new_params.append(p)
            operands.append(p.name)
    g = replace(g, params=(*g.params, *new_params))
    return _call_again(g, site, operands, site.blocks[0], names.fresh)


def _chain(g: Graph, site: Inst, rng: random.Random, names: Names) -> Graph | None:
    types = g.types()
    operands = list(site.args)
    fed = False
    for k, a in enumerate(site.args):
        outs = [r.name for r in site.results if r.type == types[a]]
        if outs:
            operands[k] = rng.choice(outs)
            fed = True
    return _call_again(g, site, operands, site.blocks[0], names.fresh) if fed else None


def _reshaped(t: TensorType, old: int, new: int) -> TensorType:
    return replace(t, shape=tuple(new if int(d) == old else d for d in t.shape))


def _shape(g: Graph, site: Inst, rng: random.Random, names: Names) -> Graph | None:
    body = site.blocks[0]
    sizes = sorted({int(d) for v in body.inputs for d in v.type.shape if int(d) > 1})
    if not sizes:
        return None
    old = rng.choice(sizes)
    new = rng.choice([old - 1, old + 1, 2 * old])
    retyped = retype(body, {v.name: _reshaped(v.type, old, new) for v in body.inputs})
    if retyped is None:
        return None
    fresh_inputs = tuple(Value(names.fresh("x"), v.type) for v in retyped.inputs)
    g = replace(g, inputs=(*g.inputs, *fresh_inputs))
    return _call_again(g, site, [v.name for v in fresh_inputs], retyped, names.fresh)


def _second_site(g: Graph, path: Path, at: int, form: str, rng: random.Random
                 ) -> Graph | None:
    """`g` with the group's second site of `form` (the module doc); None: none placed."""
    scope = path.at(g)
    site = scope.insts[at]
    label = cast(Region, site.op).label
    if form == "flag":
        made = _wrap(g, rng, label)
        return made[0] if made is not None else None
    if form == "nested":
        names = Names.of(g)
        for _ in range(4):
            start = rng.randint(max(0, at - 2), at)
            end = rng.randint(at + 1, min(len(scope.insts), at + 3))
            if all(_spannable(i) for i in scope.insts[start:end]):
                made_scope = wrap_region(scope, span(scope, start, end), "pure", rng,
                                         names.fresh, label_for(g, "r"), _make)
                if made_scope is not None:
                    return path.replace_at(g, made_scope[0])
        return None
    if not path.root:  # a new site with new outputs: at the top level only
        return None
    names = Names.of(g)
    return {"repeat": _repeat, "chain": _chain, "shape": _shape}[form](g, site, rng, names)


def add_regions(g: Graph, rng: random.Random, groups: int = 2, attempts: int = 8) -> Graph:
    """`g` with up to `groups` region groups, each a first site and a second of a form
    drawn from `GROUP_FORMS`, each verified."""
    placed = 0
    for _ in range(attempts):
        if placed >= groups:
            break
        made = _wrap(g, rng, label_for(g, "r"))
        if made is None:
            continue
        g1, path, at = made
        form = rng.choice(GROUP_FORMS)
        g2 = _second_site(g1, path, at, form, rng) if form != "single" else None
        if g2 is not None:
            try:
                verify(g2)
                g1 = g2
            except VerifyError:
                pass
        g = g1
        placed += 1
    return g
