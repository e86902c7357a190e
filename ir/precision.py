"""Precision analysis: for each output, the least precise float dtype that fed it.

A float64 output computed from a float32 intermediate carries float32 rounding, so comparisons
must use float32 tolerances for it. The analysis walks each output's dependency cone (nested
bodies included, conservatively: every float value inside a body counts for all its results).
"""
from __future__ import annotations

from ir.dtypes import DType
from ir.graph import Graph

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


def output_precisions(g: Graph) -> list[DType | None]:
    prec = value_precisions(g)
    return [prec[o] for o in g.outputs]
