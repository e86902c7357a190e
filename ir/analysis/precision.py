"""Precision analysis: for each output, the least precise float dtype that fed it.

A float64 output computed from a float32 intermediate carries float32 rounding, so comparisons
must use float32 tolerances for it. The analysis walks each output's dependency cone (nested
bodies included, conservatively: every float value inside a body counts for all its results).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ir.core.dtypes import DType
from ir.core.graph import Graph
from ir.core.op import Op

_ORDER = {DType.float16: 0, DType.float32: 1, DType.float64: 2}


def _least(a: DType | None, b: DType | None) -> DType | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if _ORDER[a] <= _ORDER[b] else b


def _own(dtype: DType) -> DType | None:
    return dtype if dtype in _ORDER else None


def _block_floor(g: Graph) -> DType | None:
    floor = None
    for v in g.all_values():
        floor = _least(floor, _own(v.type.dtype))
    return floor


def value_precisions(g: Graph) -> dict[str, DType | None]:
    """Value name -> least precise float dtype in its cone (None: no float involved)."""
    prec: dict[str, DType | None] = {v.name: _own(v.type.dtype) for v in (*g.inputs, *g.params)}
    for inst in g.insts:
        floor = None
        for a in inst.args:
            floor = _least(floor, prec[a])
        for block in inst.blocks:
            floor = _least(floor, _block_floor(block))
        for r in inst.results:
            prec[r.name] = _least(floor, _own(r.type.dtype))
    return prec


def _pure(g: Graph) -> Graph:
    """The functionalized form of a graph with in-place writes (docs/inplace.md): an output
    aliasing written memory depends on what was written into it, which only it shows."""
    from ir.analysis.inplace import pure_form

    return pure_form(g)


def output_precisions(g: Graph) -> list[DType | None]:
    g = _pure(g)
    prec = value_precisions(g)
    return [prec[o] for o in g.outputs]


# ---------------------------------------------------------------------------------------------
# tolerances


@dataclass(frozen=True)
class Tolerance:
    """Elementwise acceptance: |actual - expected| <= atol + rtol * |expected|."""

    rtol: float
    atol: float

    @property
    def exact(self) -> bool:
        return self.rtol == 0.0 and self.atol == 0.0


#: base tolerance per float precision (docs/results-schema.md#tolerances)
BASE_TOLERANCE: dict[DType, Tolerance] = {
    DType.float16: Tolerance(1e-2, 1e-2),
    DType.float32: Tolerance(1e-3, 1e-4),
    DType.float64: Tolerance(1e-7, 1e-9),
}
EXACT = Tolerance(0.0, 0.0)

#: the most the op families in a cone may loosen the base tolerance, in all
MAX_FACTOR = 8.0

#: an op family in a cone, with its ops' `Op.tolerance_factor`
FamilyFactor = tuple[str, float]


def _family_factor(op: Op) -> FamilyFactor:
    return op.family, op.tolerance_factor


def _cone_families(g: Graph) -> dict[str, frozenset[FamilyFactor]]:
    """Value name -> the op families in its cone (bodies included), each with its factor."""
    fams: dict[str, frozenset[FamilyFactor]] = {v.name: frozenset() for v in (*g.inputs, *g.params)}
    for inst in g.insts:
        here = frozenset().union(*(fams[a] for a in inst.args)) | {_family_factor(inst.op)}
        for block in inst.blocks:
            here |= {_family_factor(i.op) for i, _ in block.walk()}
        for r in inst.results:
            fams[r.name] = here
    return fams


def output_tolerances(g: Graph) -> list[Tolerance]:
    """The tolerance of each output: the base tolerance of the least precise float dtype in its
    cone, loosened by the product of the factors of the op families present in the cone
    (`Op.tolerance_factor`, each family once; capped at MAX_FACTOR); exact when no float is
    involved."""
    g = _pure(g)
    prec = value_precisions(g)
    fams = _cone_families(g)
    out = []
    for o in g.outputs:
        p = prec[o]
        if p is None:
            out.append(EXACT)
            continue
        factor = 1.0
        for _, f in fams[o]:
            factor *= f
        factor = min(factor, MAX_FACTOR)
        base = BASE_TOLERANCE[p]
        out.append(Tolerance(base.rtol * factor, base.atol * factor))
    return out


#: what a gradient's tolerance has over the forward's: the backward sums over every broadcast,
#: reused and reduced value (docs/training.md)
BACKWARD_FACTOR = 2.0


def gradient_tolerances(g: Graph, leaves: Sequence[str]) -> list[Tolerance]:
    """The tolerance of each leaf's gradient: its cone is every output the leaf reaches with
    the cones of those outputs (the backward reads the forward's values there), so the least
    precise float there, loosened by the family factors there (capped at MAX_FACTOR) and then
    by BACKWARD_FACTOR."""
    from ir.analysis.autograd import grad_values

    g = _pure(g)
    prec = value_precisions(g)
    fams = _cone_families(g)
    out = []
    for leaf in leaves:
        reached = [o for o in g.outputs if o in grad_values(g, [leaf]) and prec[o] is not None]
        p = _own(g.types()[leaf].dtype)
        families: frozenset[FamilyFactor] = frozenset()
        for o in reached:
            p = _least(p, prec[o])
            families |= fams[o]
        factor = 1.0
        for _, f in families:
            factor *= f
        factor = min(factor, MAX_FACTOR) * BACKWARD_FACTOR
        base = BASE_TOLERANCE[p or DType.float32]
        out.append(Tolerance(base.rtol * factor, base.atol * factor))
    return out


def gradient_precisions(g: Graph, leaves: Sequence[str]) -> list[DType | None]:
    """The least precise float dtype in each leaf's gradient's cone (see
    `gradient_tolerances`)."""
    from ir.analysis.autograd import grad_values

    g = _pure(g)
    prec = value_precisions(g)
    out: list[DType | None] = []
    for leaf in leaves:
        p = _own(g.types()[leaf].dtype)
        for o in g.outputs:
            if o in grad_values(g, [leaf]):
                p = _least(p, prec[o])
        out.append(p)
    return out
