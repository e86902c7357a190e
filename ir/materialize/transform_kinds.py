"""The torch.func transforms a transform test draws, one object each (`KINDS`), with the
facts that belong to that transform beside it: how it is applied (its program,
`ir.materialize.torch_func.PROGRAMS`), what its results are (`labels`) and their tolerances,
what torch eager runs it on (`eager_support`; an op eager cannot run under it says so
itself, `Op.eager_transform_refusals`), and how large a Jacobian it may build.
`ir.materialize.transforms` (drawing, refitting, the reference) asks the transform; it never
tests its name.

What eager runs (`eager_support`, per dialect: control-flow kind -> condition) is measured on
torch 2.13, CPU; `ir.materialize.transforms`'s module doc gives the table and its footnotes.
A condition is one of "ok", "never", "pred_unbatched", "trip_unbatched", "cond_batching",
"carries_keep_batching" (`ir.materialize.transforms.eager_problem` applies them).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ir.materialize.torch_func import PROGRAMS, FuncProgram

if TYPE_CHECKING:
    from ir.core.graph import Graph

#: the torch control-flow dialects (`ir.ops.control`)
DIALECTS: tuple[str, ...] = ("python", "hop")
#: a derivative transform of either dialect's control flow, in eager: python's runs, the
#: higher-order ops' never do (called eagerly they compile themselves with Dynamo, which cannot
#: fake a functorch-wrapped tensor)
_DERIVATIVE_SUPPORT: dict[str, dict[str, str]] = {
    "python": {"if": "ok", "loop": "ok", "scan": "ok"},
    "hop": {"if": "never", "loop": "never", "scan": "never"},
}
#: jacrev runs one backward per element of the differentiated outputs, jacfwd one forward per
#: element of the leaves (vmapped): at most this many of each ...
MAX_JACOBIAN_BASIS = 256
#: ... and at most this many Jacobian elements in all
MAX_JACOBIAN_ELEMS = 1 << 16


@dataclass(frozen=True)
class Transform:
    """One torch.func transform. Invariants: `name` is its torch.func name and its key in
    `KINDS` and `PROGRAMS`; `eager_support` has a rule for every dialect of `DIALECTS` and
    every control-flow kind (if, loop, scan)."""

    name: str
    eager_support: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: _DERIVATIVE_SUPPORT)

    @property
    def program(self) -> FuncProgram:
        """How it is applied (`ir.materialize.torch_func.PROGRAMS`)."""
        return PROGRAMS[self.name]

    @property
    def derivative(self) -> bool:
        """Whether it differentiates (leaves among the float inputs and params, differentiated
        outputs); vmap batches instead."""
        return not self.program.batched

    @property
    def takes(self) -> str | None:
        """The arrays it needs per input set: `cotangents`, `tangents` or None."""
        return self.program.takes

    def labels(self, spec: Any, g: Graph) -> list[str]:
        """What each result of one input set is, for `spec` (a `TransformSpec`)."""
        diff = [f"output {i}" for i in spec.outputs]
        return [f"{self.name} {o} / %{x}" for o in diff for x in spec.leaves]

    def tolerances(self, spec: Any, outs: tuple[list, list], leaf: tuple[dict, dict]
                   ) -> tuple[list, list]:
        """Per result (`labels` order): its tolerance and precision, from the outputs'
        (`outs`: per graph output) and the leaves' gradients' (`leaf`: by leaf name)."""
        pairs = [(o, x) for o in spec.outputs for x in spec.leaves]
        return [leaf[0][x] for _, x in pairs], [leaf[1][x] for _, x in pairs]

    #: whether its size is bounded (`within_basis`, `fits`): a Jacobian's
    bounded = False

    @property
    def batched(self) -> bool:
        """Whether its arguments are the leaves stacked over samples (vmap)."""
        return self.program.batched

    def within_basis(self, leaf_elems: int, out_elems: int) -> bool:
        """Whether one pass's basis (a Jacobian's) is small enough for this many leaf and
        differentiated-output elements."""
        return True

    def fits(self, leaf_elems: int, out_elems: int) -> bool:
        """Whether a test with this many leaf and differentiated-output elements is small
        enough to run (a Jacobian's basis and size)."""
        return True


@dataclass(frozen=True)
class Vmap(Transform):
    """Every output batched on a new axis 0, for the batched leaves; a result is one output."""

    def labels(self, spec: Any, g: Graph) -> list[str]:
        return [f"vmap output {i}" for i in range(len(g.outputs))]

    def tolerances(self, spec: Any, outs: tuple[list, list], leaf: tuple[dict, dict]
                   ) -> tuple[list, list]:
        return outs


@dataclass(frozen=True)
class Grad(Transform):
    """dL/dx per leaf (L: the cotangents' inner product with the differentiated outputs)."""

    def labels(self, spec: Any, g: Graph) -> list[str]:
        return [f"grad %{x}" for x in spec.leaves]

    def tolerances(self, spec: Any, outs: tuple[list, list], leaf: tuple[dict, dict]
                   ) -> tuple[list, list]:
        return [leaf[0][x] for x in spec.leaves], [leaf[1][x] for x in spec.leaves]


@dataclass(frozen=True)
class Vjp(Grad):
    """The outputs, then the pullback of the cotangents to every leaf."""

    def labels(self, spec: Any, g: Graph) -> list[str]:
        return [f"output {i}" for i in range(len(g.outputs))] + [f"vjp %{x}" for x in spec.leaves]

    def tolerances(self, spec: Any, outs: tuple[list, list], leaf: tuple[dict, dict]
                   ) -> tuple[list, list]:
        by_leaf = super().tolerances(spec, outs, leaf)
        return outs[0] + by_leaf[0], outs[1] + by_leaf[1]


@dataclass(frozen=True)
class Jvp(Transform):
    """The outputs, then each differentiated output's tangent; a tangent mixes every leaf, so
    it gets the loosest leaf's tolerance and the least precise leaf's precision."""

    def labels(self, spec: Any, g: Graph) -> list[str]:
        return ([f"output {i}" for i in range(len(g.outputs))]
                + [f"jvp output {i}" for i in spec.outputs])

    def tolerances(self, spec: Any, outs: tuple[list, list], leaf: tuple[dict, dict]
                   ) -> tuple[list, list]:
        loosest = max(leaf[0].values(), key=lambda t: (t.rtol, t.atol))
        least = min((p for p in leaf[1].values() if p is not None),
                    key=lambda d: d.numpy.itemsize, default=None)
        k = len(spec.outputs)
        return outs[0] + [loosest] * k, outs[1] + [least] * k


@dataclass(frozen=True)
class Jacobian(Transform):
    """One Jacobian per (differentiated output, leaf), output-major; `basis`: what one pass
    runs per element of (`outputs`: jacrev's backward per output element, `leaves`:
    jacfwd's forward per leaf element)."""

    basis: str = "outputs"
    bounded = True

    def within_basis(self, leaf_elems: int, out_elems: int) -> bool:
        return (leaf_elems if self.basis == "leaves" else out_elems) <= MAX_JACOBIAN_BASIS

    def fits(self, leaf_elems: int, out_elems: int) -> bool:
        return (self.within_basis(leaf_elems, out_elems)
                and leaf_elems * out_elems <= MAX_JACOBIAN_ELEMS)


def _kinds(*kinds: Transform) -> dict[str, Transform]:
    return {t.name: t for t in kinds}


#: every transform a test may draw, by name (torch.func's), in drawing order
KINDS: dict[str, Transform] = _kinds(
    Vmap("vmap", eager_support={
        "python": {"if": "pred_unbatched", "loop": "trip_unbatched", "scan": "ok"},
        "hop": {"if": "cond_batching", "loop": "never", "scan": "carries_keep_batching"}}),
    Grad("grad"),
    Vjp("vjp"),
    Jvp("jvp"),
    Jacobian("jacrev", basis="outputs"),
    Jacobian("jacfwd", basis="leaves"),
)


def kind_of(name: str) -> Transform:
    """The transform named `name`; a ValueError naming the known ones otherwise."""
    if name not in KINDS:
        raise ValueError(f"unknown transform {name!r} (known: {', '.join(KINDS)})")
    return KINDS[name]
