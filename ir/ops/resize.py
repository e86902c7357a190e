"""Upsampling of the trailing 1 or 2 spatial dims (N, C, *S) by integer factors.

Coordinate mappings match exactly:
  - nearest: torch mode="nearest" (src = floor(dst / s)) <-> ONNX Resize mode="nearest",
    coordinate_transformation_mode="asymmetric", nearest_mode="floor";
  - linear: torch "linear"/"bilinear" with align_corners=False <-> ONNX mode="linear",
    coordinate_transformation_mode="half_pixel" (both clamp source coordinates to the edges).
Scales are given as factors (not sizes) on both sides so both compute the same 1/s.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ir.core.dtypes import DType
from ir.core.op import Op, Signature
from ir.core.types import TensorType
from ir.ops.common import F16_32, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class Resize(Op):
    family: ClassVar[str] = "resize"
    dtypes: ClassVar[frozenset[DType]] = F16_32
    torch_mode: ClassVar[tuple[str, str]]
    onnx_attrs: ClassVar[dict]
    saves_for_backward: ClassVar[bool] = False  # linear in x, weights from the geometry
    scales: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(scales=tuple(ctx.rng.choice((1, 2, 2, 3)) for _ in range(first.rank - 2)))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [len(self.scales) == ins[0].rank - 2 >= 1, all(s >= 1 for s in self.scales)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType(s[:2] + tuple(d * f for d, f in zip(s[2:], self.scales, strict=True)), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        import torch.nn.functional as F

        mode = self.torch_mode[len(self.scales) - 1]
        extra = {} if mode == "nearest" else {"align_corners": False}
        return F.interpolate(x, scale_factor=tuple(float(s) for s in self.scales), mode=mode, **extra)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        scales = b.const(np.asarray((1.0, 1.0) + tuple(float(s) for s in self.scales), dtype=np.float32))
        b.node("Resize", [ins[0], "", scales], outs, **self.onnx_attrs)


@dataclass(frozen=True)
class ResizeNearest(Resize):
    name: ClassVar[str] = "resize_nearest"
    exact: ClassVar[bool] = True  # a selection
    torch_mode: ClassVar[tuple[str, str]] = ("nearest", "nearest")
    onnx_attrs: ClassVar[dict] = dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                      nearest_mode="floor")


@dataclass(frozen=True)
class ResizeLinear(Resize):
    name: ClassVar[str] = "resize_linear"
    torch_mode: ClassVar[tuple[str, str]] = ("linear", "bilinear")
    onnx_attrs: ClassVar[dict] = dict(mode="linear", coordinate_transformation_mode="half_pixel")
