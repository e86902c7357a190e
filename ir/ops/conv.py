"""2-D convolution and pooling over NCHW tensors."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ir.dtypes import DType
from ir.op import Op, Slot
from ir.shapes import eq, floordiv
from ir.types import TensorType


def window_out(size, kernel, stride, pad, dilation=1):
    """Output length of a sliding window (floor mode)."""
    return floordiv(size + 2 * pad - dilation * (kernel - 1) - 1, stride) + 1


@dataclass(frozen=True)
class Conv2d(Op):
    """y = conv2d(x[N,C,H,W], w[O,C,kh,kw]); groups = 1, no bias (a following add is the bias)."""

    name: ClassVar[str] = "conv2d"
    family: ClassVar[str] = "conv"
    arity: ClassVar[int] = 2
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs):
        return [((DType.float32, DType.float32), (DType.float32,))]

    @classmethod
    def first_ranks(cls):
        return (4,)

    @classmethod
    def slots(cls, n_inputs, first):
        return [Slot((4,), param=True)]

    @classmethod
    def sample(cls, ctx, first):
        r = ctx.rng
        return cls(
            stride=(r.randint(1, 2), r.randint(1, 2)),
            padding=(ctx.sym("pad"), ctx.sym("pad")),
            dilation=(r.choice((1, 1, 2)), r.choice((1, 1, 2))),
        )

    def operand_type(self, index, first, dtype, ctx):
        return TensorType((ctx.dim(4), first.shape[1], ctx.dim(4), ctx.dim(4)), dtype)

    def requires(self, ins):
        x, w = ins
        cons = [eq(w.shape[1], x.shape[1])]
        for i in range(2):
            cons += [self.padding[i] >= 0, self.padding[i] <= 2, self.stride[i] >= 1, self.dilation[i] >= 1]
            cons.append(window_out(x.shape[2 + i], w.shape[2 + i], self.stride[i], self.padding[i],
                                   self.dilation[i]) >= 1)
        return cons

    def infer(self, ins):
        x, w = ins
        hw = tuple(
            window_out(x.shape[2 + i], w.shape[2 + i], self.stride[i], self.padding[i], self.dilation[i])
            for i in range(2)
        )
        return [TensorType((x.shape[0], w.shape[0]) + hw, x.dtype)]

    def torch(self, x, w):
        import torch

        return torch.nn.functional.conv2d(x, w, stride=self.stride, padding=self.padding,
                                          dilation=self.dilation)

    def onnx(self, b, ins, outs):
        ph, pw = self.padding
        b.node("Conv", ins, outs, strides=list(self.stride), pads=[ph, pw, ph, pw],
               dilations=list(self.dilation))


@dataclass(frozen=True)
class Pool2d(Op):
    """Max or average pooling with a (kh, kw) window; padding at most half the window."""

    family: ClassVar[str] = "pool"
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs):
        return [((d,), (d,)) for d in (DType.float32, DType.float64)]

    @classmethod
    def first_ranks(cls):
        return (4,)

    @classmethod
    def sample(cls, ctx, first):
        r = ctx.rng
        return cls(
            kernel=(ctx.sym("k"), ctx.sym("k")),
            stride=(r.randint(1, 2), r.randint(1, 2)),
            padding=(ctx.sym("pad"), ctx.sym("pad")),
        )

    def requires(self, ins):
        x = ins[0]
        cons = []
        for i in range(2):
            k, p = self.kernel[i], self.padding[i]
            cons += [k >= 1, k <= 5, p >= 0, 2 * p <= k, self.stride[i] >= 1,
                     window_out(x.shape[2 + i], k, self.stride[i], p) >= 1]
        return cons

    def infer(self, ins):
        x = ins[0]
        hw = tuple(window_out(x.shape[2 + i], self.kernel[i], self.stride[i], self.padding[i])
                   for i in range(2))
        return [TensorType(x.shape[:2] + hw, x.dtype)]

    def _onnx_attrs(self) -> dict:
        ph, pw = self.padding
        return dict(kernel_shape=list(self.kernel), strides=list(self.stride), pads=[ph, pw, ph, pw])


@dataclass(frozen=True)
class MaxPool2d(Pool2d):
    name: ClassVar[str] = "maxpool2d"

    def torch(self, x):
        import torch

        return torch.nn.functional.max_pool2d(x, self.kernel, self.stride, self.padding)

    def onnx(self, b, ins, outs):
        b.node("MaxPool", ins, outs, **self._onnx_attrs())


@dataclass(frozen=True)
class AvgPool2d(Pool2d):
    """Average pooling counting padded zeros (torch's default, ONNX count_include_pad=1)."""

    name: ClassVar[str] = "avgpool2d"

    @classmethod
    def signatures(cls, n_inputs):
        return [((DType.float32,), (DType.float32,))]  # ORT's CPU AveragePool has no double kernel

    def torch(self, x):
        import torch

        return torch.nn.functional.avg_pool2d(x, self.kernel, self.stride, self.padding,
                                              count_include_pad=True)

    def onnx(self, b, ins, outs):
        b.node("AveragePool", ins, outs, count_include_pad=1, **self._onnx_attrs())
