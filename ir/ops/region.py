"""Compile regions: an instruction calling its body as a `torch.compiler.nested_compile_region`.

    %y = region[label=r0](%x, %w) : f32[4,3] {
      graph r0(%x1: f32[4,3], %w1: f32[4,3]) { ... return %y1 }
    }

Semantics: the body, a closed pure graph, called on the operands; its outputs are the
results. It holds no control flow, views or in-place writes, but may call other regions
(nesting: pytorch#192905's shape).

Materialization (torch, `register_regions`, called when a `GraphModule` is built): the
sites with one label are calls of ONE function marked `nested_compile_region`, which torch
compiles once and reuses at every call whose conditions allow it. The function takes a site
object and the operands. Sites whose bodies are the same code (`skeleton`: the same ops on
the same operands, whatever the shapes) share a variant. The function runs
`bodies[site.variant]`:
  - an attribute read of an argument (a flag, as a layer's `self.flag`) decides which body
    runs, so sites of one label differ in a guard on that attribute;
  - sites of one variant on operands of other shapes differ in shape guards;
  - a region inside a region is a nested compile region.
Eagerly the mark does nothing: the reference is the bodies' plain code. Torch promises that a
region is compiled again whenever a call's conditions (shapes, dtypes, strides, globals) make
the reused code invalid, so a result that differs from eager's is the compiler's bug.

ONNX: a model-local function per distinct body (`BodyCall.onnx_call`).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ir.core.graph import Graph, Inst
from ir.core.interpreter import Interpreter, is_number, scalar_tensor
from ir.core.op import RunBlock
from ir.ops.call import BodyCall


@dataclass(frozen=True)
class Region(BodyCall):
    """`results = region[label](operands) { body }`: see the module doc."""

    name: ClassVar[str] = "region"
    torch_hop: ClassVar[str] = "torch.compiler.nested_compile_region"
    torch_may_alias: ClassVar[bool] = False  # an output that is an input is returned as a copy

    #: measured on 2.13: torch.func transforms over a region run eagerly, but no transform
    #: test holds one until its compiled form is measured as a surface
    eager_transform_refusals: ClassVar[Mapping[str, str]] = {
        t: "compile regions are not drawn for transform tests"
        for t in ("grad", "vjp", "jacrev", "jvp", "jacfwd", "vmap")}

    label: str = "r0"

    def body_problem(self, inst: Inst) -> str | None:
        if isinstance(inst.op, Region):
            return None
        if inst.blocks or not inst.op.effect.pure:
            return (f"body holds {inst.op.name}: a region's body is pure code (no control flow "
                    f"but regions, no views or in-place writes)")
        return None

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        (body,) = blocks
        site = _SITES.get(id(body))
        if site is None:  # not registered (a plain interpreter run): the body's code
            outs = list(run_block(body, list(args)))
        else:
            _, fn, where, copied = site
            xs = [scalar_tensor(a, v.type.dtype) if is_number(a)
                  else a.clone() if k in copied else a
                  for k, (a, v) in enumerate(zip(args, body.inputs, strict=True))]
            out = fn(where, *xs)
            outs = [out] if len(body.outputs) == 1 else list(out)
        return outs[0] if len(outs) == 1 else outs

    def transparent(self) -> Region:
        return InlinedRegion(self.label)


@dataclass(frozen=True)
class InlinedRegion(Region):
    """A region whose call runs its body through the interpreter (`run_block`: every value
    checked), not through the compile region (`Op.transparent`)."""

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        outs = list(run_block(blocks[0], list(args)))
        return outs[0] if len(outs) == 1 else outs


# ---- materialization ---------------------------------------------------------------------------

class RegionSite:
    """The object a site passes to its region's function: the body variant it runs is an
    attribute the function reads (a guard on it, as on a layer's flag)."""

    def __init__(self, variant: int):
        self.variant = variant

    def __repr__(self) -> str:
        return f"RegionSite({self.variant})"


#: id of a body -> (that body, its region's function, the site object its call passes, the
#: operands it passes as copies); the body is kept so that its id is not reused
_SITES: dict[int, tuple[Graph, Callable[..., Any], RegionSite, frozenset[int]]] = {}


def skeleton(body: Graph) -> Hashable:
    """The body's code without its types and names: equal for two bodies that run the same
    torch calls (on operands of any shapes)."""
    env = {v.name: f"i{k}" for k, v in enumerate(body.inputs)}
    steps = []
    for inst in body.insts:
        for r in inst.results:
            env[r.name] = f"r{len(env)}"
        steps.append((inst.op, tuple(env[a] for a in inst.args), len(inst.results),
                      tuple(skeleton(b) for b in inst.blocks)))
    return tuple(steps), len(body.inputs), tuple(env[o] for o in body.outputs)


def copied_outputs(body: Graph) -> frozenset[int]:
    """The outputs the region's function returns as copies: torch's regions take no output
    that may alias an input or another output (an input itself, a view an op may return:
    `Op.torch_may_alias`; a value returned twice), so the function clones them, as torch's
    own message asks users to."""
    inputs = {v.name for v in body.inputs}
    may_alias = {r.name for inst in body.insts if inst.op.torch_may_alias
                 for r in inst.results}
    seen: set[str] = set()
    out = set()
    for k, o in enumerate(body.outputs):
        if o in inputs or o in may_alias or o in seen:
            out.add(k)
        seen.add(o)
    return frozenset(out)


def _region_fn(label: str, variants: tuple[Graph, ...]) -> Callable[..., Any]:
    """One label's function, marked a nested compile region: `fn(site, *operands)` runs
    `variants[site.variant]`. Each label's function has a code object of its own
    (`region_<label>`), as the printed program's functions have: torch keys a region's reuse
    on its code object, so closures of one code object are one region to it (F60), a known
    bug each test would otherwise hit again."""
    import types

    import torch

    interp = Interpreter("python")
    copies = tuple(copied_outputs(b) for b in variants)

    def region(site: RegionSite, *xs: Any) -> Any:
        body = variants[site.variant]
        values = interp.run(body, {v.name: x for v, x in zip(body.inputs, xs, strict=True)})
        outs = tuple(values[o].clone() if k in copies[site.variant] else values[o]
                     for k, o in enumerate(body.outputs))
        return outs[0] if len(outs) == 1 else outs

    own = types.FunctionType(region.__code__.replace(co_name=f"region_{label}"),
                             region.__globals__, f"region_{label}", None, region.__closure__)
    return torch.compiler.nested_compile_region(own)


def _copied_operands(scope: Graph, inst: Inst, top: bool) -> frozenset[int]:
    """The operands of region call `inst` (in `scope`) its call passes as copies: torch's
    regions take no input that may alias another. Passed as they are: a top-level input or
    param (`top`), or a value of a pure op that makes new storage, each passed once."""
    made = {r.name: i.op for i in scope.insts for r in i.results}
    own = {v.name for v in (*scope.inputs, *scope.params)} if top else set()
    out = set()
    for k, a in enumerate(inst.args):
        op = made.get(a)
        fresh = a in own or (op is not None and op.effect.pure and not op.takes_blocks
                             and not op.torch_may_alias)
        if not fresh or inst.args.count(a) > 1:
            out.add(k)
    return frozenset(out)


@dataclass(frozen=True)
class SitePlan:
    """How one region call is materialized: its function (`label`), the body variant its
    site object selects, the operands it passes as copies."""

    label: str
    variant: int
    copied: frozenset[int]


@dataclass(frozen=True)
class RegionPlan:
    """A graph's compile regions: each label's body variants (the function's bodies, in
    order of first call), and each call's `SitePlan` by the id of its body."""

    variants: Mapping[str, tuple[Graph, ...]]
    sites: Mapping[int, SitePlan]
    #: the region calls' bodies, kept so that their ids stay theirs
    bodies: tuple[Graph, ...]


def plan_regions(g: Graph) -> RegionPlan:
    """The compile regions of `g` (bodies included): one function per label, one variant per
    distinct `skeleton`."""
    from ir.core.paths import scopes

    variants: dict[str, list[Graph]] = {}
    keys: dict[str, list[Hashable]] = {}
    sites: dict[int, SitePlan] = {}
    bodies: list[Graph] = []
    for path, scope in scopes(g):
        for inst in scope.insts:
            if not isinstance(inst.op, Region):
                continue
            body, label = inst.blocks[0], inst.op.label
            k = skeleton(body)
            known = keys.setdefault(label, [])
            if k not in known:
                known.append(k)
                variants.setdefault(label, []).append(body)
            sites[id(body)] = SitePlan(label, known.index(k),
                                       _copied_operands(scope, inst, path.root))
            bodies.append(body)
    return RegionPlan({label: tuple(v) for label, v in variants.items()}, sites, tuple(bodies))


def register_regions(g: Graph) -> None:
    """Make the compile-region function of each label of `g` (bodies included), and its sites'
    objects: before a compiler traces it."""
    plan = plan_regions(g)
    fns = {label: _region_fn(label, v) for label, v in plan.variants.items()}
    for body in plan.bodies:
        site = plan.sites[id(body)]
        _SITES[id(body)] = (body, fns[site.label], RegionSite(site.variant), site.copied)


def region_sites(g: Graph) -> int:
    """The region instructions of `g`, nested ones counted."""
    return sum(isinstance(inst.op, Region) for inst, _ in g.walk())
