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
from ir.core.importing import Imported, SourceNode
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


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _integral(values: object) -> tuple[int, ...] | None:
    if not isinstance(values, (list, tuple)) or not values:
        return None
    out = tuple(int(v) for v in values)
    return out if all(float(v) == o and o >= 1 for v, o in zip(values, out, strict=True)) else None


def _resize_aten(cls: type[Resize], node: SourceNode) -> Imported | None:
    """upsample_{nearest1d,nearest2d,linear1d,bilinear2d}.vec(x, output_size, [align_corners,]
    scale_factors): integral scales (given, or the sizes' ratios); linear without corners."""
    x = node.type(0)
    linear = "linear" in node.target
    if linear and node.arg(2):
        return None
    factors = node.arg(3 if linear else 2)
    if factors is None:
        size = node.arg(1)
        if not isinstance(size, (list, tuple)) or any(s % d for s, d in zip(size, x.shape[2:], strict=True)):
            return None
        factors = [s // d for s, d in zip(size, x.shape[2:], strict=True)]
    scales = _integral(factors)
    return None if scales is None else Imported.one(cls(scales=scales), node.tensor(0))


#: ONNX Resize's defaults of the attributes GraphIR sets
_ONNX_DEFAULTS = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                  "nearest_mode": "round_prefer_floor"}


def _resize_onnx(cls: type[Resize], node: SourceNode) -> Imported | None:
    """Resize(x, roi, scales) with integral scales over the spatial dims (1 on N and C), this
    op's mode and coordinate transformation."""
    for k, want in cls.onnx_attrs.items():
        if node.attr(k, _ONNX_DEFAULTS[k]) != want:
            return None
    if node.attr("antialias", 0) or node.attr("axes") is not None or node.n_given != 3:
        return None
    scales = _integral(node.arg(2))
    if scales is None or len(scales) < 3 or scales[:2] != (1, 1):
        return None
    return Imported.one(cls(scales=scales[2:]), node.tensor(0))


ResizeNearest.aten_imports = ("aten.upsample_nearest1d.vec", "aten.upsample_nearest2d.vec")
ResizeLinear.aten_imports = ("aten.upsample_linear1d.vec", "aten.upsample_bilinear2d.vec")
for _cls in (ResizeNearest, ResizeLinear):
    _cls.onnx_imports = ("Resize",)
    _cls.from_aten = classmethod(_resize_aten)  # type: ignore[method-assign,assignment]
    _cls.from_onnx = classmethod(_resize_onnx)  # type: ignore[method-assign,assignment]
