"""Max and average pooling over 1 or 2 trailing spatial dims (N, C, *S), floor mode.

Max pooling's values are continuous in the input (only the argmax jumps), so it needs no domain;
its gradient goes to the window's argmax, so gradient tests keep the largest value of every window
a margin above the next (`kinks`: a tie's gradient may go to either element).
Average pooling counts padded zeros (torch's default, ONNX count_include_pad=1); padding is at
most half the window, as torch requires.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, Prev, SourceNode, ints
from ir.core.op import Op, Signature
from ir.core.types import TensorType
from ir.ops.common import F16_32, FLOATS, as_float, float_only, same_dtype, tie_apart
from ir.ops.conv import window_out

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class Pool(Op):
    family: ClassVar[str] = "pool"
    spatial: ClassVar[int]
    dtypes: ClassVar[frozenset[DType]] = F16_32
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (cls.spatial + 2,)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        n = cls.spatial
        return cls(
            kernel=tuple(ctx.sym("k") for _ in range(n)),
            stride=tuple(ctx.rng.randint(1, 2) for _ in range(n)),
            padding=tuple(ctx.sym("pad") for _ in range(n)),
        )

    def requires(self, ins: Sequence[TensorType]) -> list:
        x = ins[0]
        if x.rank != self.spatial + 2:
            return [False]
        cons = []
        for i in range(self.spatial):
            k, p = self.kernel[i], self.padding[i]
            cons += [k >= 1, k <= 5, p >= 0, 2 * p <= k, self.stride[i] >= 1,
                     window_out(x.shape[2 + i], k, self.stride[i], p) >= 1]
        return cons

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        x = ins[0]
        out = tuple(window_out(x.shape[2 + i], self.kernel[i], self.stride[i], self.padding[i])
                    for i in range(self.spatial))
        return [TensorType(x.shape[:2] + out, x.dtype)]

    def _onnx_attrs(self) -> dict:
        return dict(kernel_shape=list(self.kernel), strides=list(self.stride), pads=list(self.padding) * 2)


@dataclass(frozen=True)
class MaxPool(Pool):
    exact: ClassVar[bool] = True  # a selection
    dtypes: ClassVar[frozenset[DType]] = FLOATS

    @float_only
    def kinks(self, x: Tensor) -> list[Tensor]:
        """Violation of: in every window the largest value and the next one differ by the margin.
        Padding (-inf to max pooling) is no candidate: a window with one real element has no tie."""
        import math

        import torch
        import torch.nn.functional as F

        if math.prod(self.kernel) < 2:
            return []
        pads = [p for p in reversed(self.padding) for _ in range(2)]  # F.pad: innermost dim first
        w = F.pad(as_float(x), pads, value=-math.inf)
        for i in range(self.spatial):
            w = w.unfold(2 + i, self.kernel[i], self.stride[i])
        top = torch.topk(w.flatten(-self.spatial), 2, dim=-1).values
        hi, lo = top[..., 0], top[..., 1]
        real = torch.isfinite(lo)
        # the -inf runner-up replaced before any arithmetic: its gradient stays finite (zero)
        lo = torch.where(real, lo, hi)
        return [torch.where(real, tie_apart(hi, lo, x.dtype), 0.0)]

    def torch(self, x: Tensor) -> Tensor:
        import torch.nn.functional as F

        return (F.max_pool1d, F.max_pool2d, F.max_pool3d)[self.spatial - 1](x, self.kernel, self.stride, self.padding)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("MaxPool", ins, outs, **self._onnx_attrs())


@dataclass(frozen=True)
class AvgPool(Pool):
    def torch(self, x: Tensor) -> Tensor:
        import torch.nn.functional as F

        return (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[self.spatial - 1](x, self.kernel, self.stride, self.padding,
                                                      count_include_pad=True)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("AveragePool", ins, outs, count_include_pad=1, **self._onnx_attrs())


@dataclass(frozen=True)
class MaxPool1d(MaxPool):
    name: ClassVar[str] = "maxpool1d"
    spatial: ClassVar[int] = 1


@dataclass(frozen=True)
class MaxPool2d(MaxPool):
    name: ClassVar[str] = "maxpool2d"
    spatial: ClassVar[int] = 2


@dataclass(frozen=True)
class AvgPool1d(AvgPool):
    name: ClassVar[str] = "avgpool1d"
    spatial: ClassVar[int] = 1


@dataclass(frozen=True)
class AvgPool2d(AvgPool):
    name: ClassVar[str] = "avgpool2d"
    spatial: ClassVar[int] = 2


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _pool_aten(cls: type[Pool], node: SourceNode) -> Imported | None:
    """max_poolNd(x, kernel, stride=kernel, padding=0, dilation=1, ceil_mode=False);
    avg_poolNd(x, kernel, stride, padding, ceil_mode, count_include_pad=True, divisor=None).
    A max pool with `ceil_mode` is the floor-mode pool of x padded at the end of each spatial
    dim with the dtype's lowest value (`_ceil_mode_pads`)."""
    n = cls.spatial
    kernel = ints(node.arg(1), n)
    stride = ints(node.arg(2) or kernel, n)
    padding = ints(node.arg(3, 0), n)
    extra: tuple[int, ...] = (0,) * n
    if issubclass(cls, MaxPool):
        if any(d != 1 for d in ints(node.arg(4, 1), n)):
            return None
        if node.arg(5, False):
            extra = _ceil_mode_pads(node.type(0), kernel, stride, padding)
    elif node.arg(4, False) or not node.arg(5, True) or node.arg(6) is not None:
        return None
    op = cls(kernel=kernel, stride=stride, padding=padding)
    if not any(extra):
        return Imported.one(op, node.tensor(0))
    import numpy as np

    from ir.ops.pad import MAX_PAD, PadConstant

    if max(extra) > MAX_PAD:
        return None
    dtype = node.type(0).dtype.numpy
    pad = PadConstant(value=float(np.finfo(dtype).min),
                      pads=tuple(p for e in extra for p in (0, e)))
    return Imported.chain([(pad, [node.tensor(0)]), (op, [Prev(0)])])


def _ceil_mode_pads(x: TensorType, kernel: tuple[int, ...], stride: tuple[int, ...],
                    padding: tuple[int, ...]) -> tuple[int, ...]:
    """Per spatial dim, how much longer x must be at the end for the floor-mode pool to give
    torch's ceil-mode output size: ceil((L + 2p - k) / s) + 1 windows, less the last one when
    it would start in the right padding (torch's rule)."""
    n = len(kernel)
    out = []
    for i in range(n):
        size, k, s, p = int(x.shape[x.rank - n + i]), kernel[i], stride[i], padding[i]
        windows = -(-(size + 2 * p - k) // s) + 1
        if (windows - 1) * s >= size + p:
            windows -= 1
        out.append(max(0, (windows - 1) * s + k - (size + 2 * p)))
    return tuple(out)


def _pool_onnx(cls: type[Pool], node: SourceNode) -> Imported | None:
    n = cls.spatial
    if (node.attr("ceil_mode", 0) or node.attr("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET")
            or any(d != 1 for d in node.attr("dilations", [1] * n)) or node.type(0).rank != n + 2):
        return None
    if issubclass(cls, AvgPool) and not node.attr("count_include_pad", 0):
        return None
    pads = ints(node.attr("pads", [0] * 2 * n))
    if pads[:n] != pads[n:]:
        return None
    kernel = ints(node.attr("kernel_shape"), n)
    return Imported.one(cls(kernel=kernel, stride=ints(node.attr("strides", [1] * n), n),
                            padding=pads[:n]), node.tensor(0))


for _pcls, _aten, _onnx in ((MaxPool1d, "aten.max_pool1d.default", "MaxPool"),
                            (MaxPool2d, "aten.max_pool2d.default", "MaxPool"),
                            (AvgPool1d, "aten.avg_pool1d.default", "AveragePool"),
                            (AvgPool2d, "aten.avg_pool2d.default", "AveragePool")):
    _pcls.aten_imports = (_aten,)
    _pcls.onnx_imports = (_onnx,)
    _pcls.from_aten = classmethod(_pool_aten)  # type: ignore[method-assign,assignment]
    _pcls.from_onnx = classmethod(_pool_onnx)  # type: ignore[method-assign,assignment]
