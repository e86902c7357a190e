"""Element types of GraphIR values and their names in torch, ONNX and numpy.

A `DType` is the single source of truth for an element type; every materializer maps from it and
nothing maps back except through `DType.from_name` (the text form's short names).
"""
from __future__ import annotations

import builtins
import enum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torch import dtype as TorchDType


class DType(enum.Enum):
    """A tensor element type; `value` is the short name used by the text form (`f32`, `i64`, ...)."""

    float16 = "f16"
    float32 = "f32"
    float64 = "f64"
    int32 = "i32"
    int64 = "i64"
    bool = "b8"

    @property
    def short(self) -> str:
        return self.value

    # builtins.bool: in the class body `bool` is the member above
    @property
    def is_float(self) -> builtins.bool:
        return self in FLOAT_DTYPES

    @property
    def is_int(self) -> builtins.bool:
        return self in INT_DTYPES

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(_NUMPY[self])

    @property
    def torch(self) -> TorchDType:  # torch imported lazily so the IR stays light
        import torch

        return getattr(torch, self.name)

    @property
    def onnx(self) -> int:
        from onnx import TensorProto

        return _ONNX[self](TensorProto)

    @staticmethod
    def from_name(name: str) -> DType:
        """Parse a short name (`f32`); raises ValueError naming the valid ones."""
        try:
            return DType(name)
        except ValueError:
            valid = ", ".join(d.value for d in DType)
            raise ValueError(f"unknown dtype {name!r} (expected one of: {valid})") from None

    @staticmethod
    def from_numpy(dt: np.dtype) -> DType:
        for d, n in _NUMPY.items():
            if np.dtype(n) == dt:
                return d
        raise ValueError(f"no GraphIR dtype for numpy dtype {dt}")


FLOAT_DTYPES = frozenset({DType.float16, DType.float32, DType.float64})
INT_DTYPES = frozenset({DType.int32, DType.int64})
NUMERIC_DTYPES = FLOAT_DTYPES | INT_DTYPES
ALL_DTYPES = frozenset(DType)

_NUMPY = {
    DType.float16: "float16",
    DType.float32: "float32",
    DType.float64: "float64",
    DType.int32: "int32",
    DType.int64: "int64",
    DType.bool: "bool",
}
_ONNX = {
    DType.float16: lambda tp: tp.FLOAT16,
    DType.float32: lambda tp: tp.FLOAT,
    DType.float64: lambda tp: tp.DOUBLE,
    DType.int32: lambda tp: tp.INT32,
    DType.int64: lambda tp: tp.INT64,
    DType.bool: lambda tp: tp.BOOL,
}
