"""`TensorType`: the static type of a GraphIR value (a shape and an element type)."""
from __future__ import annotations

from dataclasses import dataclass

import z3

from ir.core.dtypes import DType
from ir.core.shapes import Dim, concretize, is_symbolic, product


@dataclass(frozen=True)
class TensorType:
    """Shape + dtype. Shapes hold ints once a graph is concrete, z3 terms while generating.

    Invariant of a concrete type: every dim is an int >= 1 (rank 0 is a scalar).
    """

    shape: tuple[Dim, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_concrete(self) -> bool:
        return not any(is_symbolic(d) for d in self.shape)

    def numel(self) -> Dim:
        return product(self.shape)

    def concretize(self, model: z3.ModelRef) -> TensorType:
        return TensorType(tuple(concretize(d, model) for d in self.shape), self.dtype)

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{self.dtype.short}[{dims}]"

    def same_as(self, other: TensorType) -> bool:
        """Structural equality that is safe for z3 dims (z3 overloads `==`)."""
        if self.dtype != other.dtype or self.rank != other.rank:
            return False
        return all(
            (str(a) == str(b)) if (is_symbolic(a) or is_symbolic(b)) else a == b
            for a, b in zip(self.shape, other.shape, strict=True)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorType) and self.same_as(other)

    def __hash__(self) -> int:
        return hash((tuple(str(d) for d in self.shape), self.dtype))
