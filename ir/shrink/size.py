"""The reducer's total order on graphs ("smaller"): `Size`, compared lexicographically.

  (instructions with nested ones counted, total elements of every value, sum of ranks, dtype
   cost (f32 0, i64/bool 1, f64/i32 2, f16 3), inputs + params, params, outputs, canonical
   text).

The canonical text breaks every tie, so two graphs of equal size print identically: the order
is total on canonical forms, and a reduction whose every step is strictly smaller ends.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ir.core.dtypes import DType
from ir.core.graph import Graph
from ir.core.text import canonical_text
from ir.core.types import TensorType

DTYPE_COST = {DType.float32: 0, DType.int64: 1, DType.bool: 1, DType.float64: 2, DType.int32: 2,
              DType.float16: 3}


@dataclass(frozen=True, order=True)
class Size:
    """A graph's size; compared lexicographically in field order (a total order on canonical
    forms: the canonical text breaks every tie)."""

    insts: int  #: instructions, nested ones counted
    elements: int  #: elements of every value (inputs, params, results, nested ones)
    rank: int  #: sum of the ranks of every value
    dtype_cost: int  #: sum of DTYPE_COST over every value
    io: int  #: graph inputs + params
    params: int  #: params (weights, which compilers may constant-fold): inputs are simpler
    outputs: int
    text: str = field(repr=False)

    def brief(self) -> str:
        return f"{self.insts} insts, {self.elements} elements"


def size_of(g: Graph) -> Size:
    vals = list(g.all_values())
    return Size(g.num_insts(), sum(numel(v.type) for v in vals), sum(v.type.rank for v in vals),
                sum(DTYPE_COST.get(v.type.dtype, 3) for v in vals), len(g.inputs) + len(g.params),
                len(g.params), len(g.outputs), canonical_text(g))


def numel(t: TensorType) -> int:
    """Elements of a concrete type."""
    n = 1
    for d in t.shape:
        n *= int(d)
    return n
