"""Convolutions over N,C,spatial... tensors: conv1d, conv2d (stride, padding, dilation, groups)
and conv_transpose2d. No bias (a following add is the bias); the weight is always a param.

`groups` is a concrete int drawn by `sample`; the weight is built as [groups * o, C / groups, k...]
so divisibility holds by construction and the solver only ties C = groups * (C / groups).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, Prev, Ref, SourceNode, ints
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import Dim, eq, floordiv
from ir.core.types import TensorType
from ir.ops.common import F16_32, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


def window_out(size: Dim, kernel: Dim, stride: Dim, pad: Dim, dilation: Dim = 1) -> Dim:
    """Output length of a sliding window (floor mode)."""
    return floordiv(size + 2 * pad - dilation * (kernel - 1) - 1, stride) + 1


def transposed_out(size: Dim, kernel: Dim, stride: Dim, pad: Dim, dilation: Dim = 1) -> Dim:
    """Output length of a transposed convolution (no output padding)."""
    return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + 1


@dataclass(frozen=True)
class ConvBase(Op):
    """Shared attributes and ONNX attribute layout of the convolutions."""

    family: ClassVar[str] = "conv"
    tolerance_factor: ClassVar[float] = 2.0  # long accumulations: summation order
    arity: ClassVar[int] = 2
    spatial: ClassVar[int]
    dtypes: ClassVar[frozenset[DType]] = F16_32
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, 2)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (cls.spatial + 2,)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((cls.spatial + 2,), param=True)]

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        r, n = ctx.rng, cls.spatial
        return cls(
            stride=tuple(r.randint(1, 2) for _ in range(n)),
            padding=tuple(ctx.sym("pad") for _ in range(n)),
            dilation=tuple(r.choice((1, 1, 2)) for _ in range(n)),
            groups=r.choice((1, 1, 1, 2, 3)),
        )

    def _attr_requires(self, w: TensorType | None = None) -> list:
        """The attributes' ranges. A padding the generator draws (symbolic) is at most 2; a
        given one (an imported model's 7x7 stem with padding 3) at most the kernel's extent
        `dilation * (k - 1)` of weight `w`, or 2."""
        cons = [self.groups >= 1]
        for i in range(self.spatial):
            pad = self.padding[i]
            if w is not None and isinstance(pad, int) and isinstance(w.shape[2 + i], int) \
                    and isinstance(self.dilation[i], int):
                most = max(2, self.dilation[i] * (w.shape[2 + i] - 1))
            else:
                most = 2
            cons += [pad >= 0, pad <= most, self.stride[i] >= 1, self.dilation[i] >= 1]
        return cons

    def _onnx_attrs(self) -> dict:
        return dict(strides=list(self.stride), pads=list(self.padding) * 2,
                    dilations=list(self.dilation), group=self.groups)

    def _torch_kw(self) -> dict:
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)


@dataclass(frozen=True)
class Conv(ConvBase):
    """y = conv(x[N, C, *S], w[O, C/groups, *K]), O divisible by groups."""

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        kernel = tuple(ctx.dim(self.spatial + 2) for _ in range(self.spatial))
        return TensorType((self.groups * ctx.dim(self.spatial + 2), ctx.dim(self.spatial + 2)) + kernel, dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, w = ins
        if x.rank != self.spatial + 2 or w.rank != self.spatial + 2:
            return [False]
        cons = self._attr_requires(w) + [eq(x.shape[1], self.groups * w.shape[1]),
                                         w.shape[0] % self.groups == 0]
        for i in range(self.spatial):
            cons.append(window_out(x.shape[2 + i], w.shape[2 + i], self.stride[i], self.padding[i],
                                   self.dilation[i]) >= 1)
        return cons

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        x, w = ins
        out = tuple(window_out(x.shape[2 + i], w.shape[2 + i], self.stride[i], self.padding[i], self.dilation[i])
                    for i in range(self.spatial))
        return [TensorType((x.shape[0], w.shape[0]) + out, x.dtype)]

    def torch(self, x: Tensor, w: Tensor) -> Tensor:
        import torch.nn.functional as F

        return (F.conv1d, F.conv2d, F.conv3d)[self.spatial - 1](x, w, **self._torch_kw())

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Conv", ins, outs, **self._onnx_attrs())


@dataclass(frozen=True)
class Conv1d(Conv):
    name: ClassVar[str] = "conv1d"
    spatial: ClassVar[int] = 1


@dataclass(frozen=True)
class Conv2d(Conv):
    name: ClassVar[str] = "conv2d"
    spatial: ClassVar[int] = 2


@dataclass(frozen=True)
class ConvTranspose2d(ConvBase):
    """y = conv_transpose2d(x[N, C, H, W], w[C, O/groups, kh, kw]); no output padding. Padding is
    at most dilation * (k - 1) per side, so every output position has a contribution."""

    name: ClassVar[str] = "conv_transpose2d"
    spatial: ClassVar[int] = 2

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        kernel = tuple(ctx.dim(4) for _ in range(self.spatial))
        return TensorType((first.shape[1], ctx.dim(4)) + kernel, dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, w = ins
        if x.rank != 4 or w.rank != 4:
            return [False]
        cons = self._attr_requires() + [eq(x.shape[1], w.shape[0]), x.shape[1] % self.groups == 0]
        for i in range(self.spatial):
            cons.append(2 * self.padding[i] <= self.dilation[i] * (w.shape[2 + i] - 1))
        return cons

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        x, w = ins
        out = tuple(transposed_out(x.shape[2 + i], w.shape[2 + i], self.stride[i], self.padding[i],
                                   self.dilation[i]) for i in range(self.spatial))
        return [TensorType((x.shape[0], self.groups * w.shape[1]) + out, x.dtype)]

    def torch(self, x: Tensor, w: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.conv_transpose2d(x, w, **self._torch_kw())

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("ConvTranspose", ins, outs, **self._onnx_attrs())


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _with_bias(op: Op, x: Ref, w: Ref, bias: Ref | None, channels: int, rank: int) -> Imported:
    """op(x, w), plus a bias per channel (GraphIR's convolutions have none): reshaped to
    [C, 1, ...] and added."""
    if bias is None:
        return Imported.one(op, x, w)
    from ir.ops.binary import Add
    from ir.ops.shape import Reshape

    return Imported.chain([(op, [x, w]), (Reshape(shape=(channels,) + (1,) * (rank - 2)), [bias]),
                           (Add(), [Prev(0), Prev(1)])])


def _channels(op: ConvBase, node: SourceNode) -> int:
    """The result's channels, from the weight: [O, C/g, ...] or, transposed, [C, O/g, ...]."""
    w = node.type(1)
    return int(w.shape[1]) * op.groups if isinstance(op, ConvTranspose2d) else int(w.shape[0])


def _conv_aten(cls: type[ConvBase], node: SourceNode) -> Imported | None:
    """conv1d/conv2d(x, w, bias, stride, padding, dilation, groups); conv_transpose2d.input(x,
    w, bias, stride, padding, output_padding, groups, dilation); convolution(x, w, bias,
    stride, padding, dilation, transposed, output_padding, groups)."""
    n = cls.spatial
    t = node.target
    if t == "aten.convolution.default":
        if bool(node.arg(6)) != (cls is ConvTranspose2d) or any(ints(node.arg(7), n)):
            return None
        stride, padding, dilation, groups = node.arg(3), node.arg(4), node.arg(5), node.arg(8)
    elif t.startswith("aten.conv_transpose"):
        if any(ints(node.arg(5, 0), n)):
            return None
        stride, padding, groups, dilation = (node.arg(3, 1), node.arg(4, 0), node.arg(6, 1),
                                             node.arg(7, 1))
    else:
        stride, padding, dilation, groups = (node.arg(3, 1), node.arg(4, 0), node.arg(5, 1),
                                             node.arg(6, 1))
    if isinstance(padding, str):
        return None
    op = cls(stride=ints(stride, n), padding=ints(padding, n), dilation=ints(dilation, n),
             groups=int(groups))
    bias = node.tensor(2) if node.is_tensor(2) else None
    return _with_bias(op, node.tensor(0), node.tensor(1), bias, _channels(op, node), n + 2)


def _conv_onnx(cls: type[ConvBase], node: SourceNode) -> Imported | None:
    n = cls.spatial
    w = node.type(1)
    if w.rank != n + 2 or node.attr("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return None
    if any(node.attr("output_padding", [0] * n)) or node.attr("output_shape") is not None:
        return None
    pads = ints(node.attr("pads", [0] * 2 * n))
    if pads[:n] != pads[n:]:
        return None
    op = cls(stride=ints(node.attr("strides", [1] * n), n), padding=pads[:n],
             dilation=ints(node.attr("dilations", [1] * n), n), groups=int(node.attr("group", 1)))
    bias = node.tensor(2) if node.n_given > 2 else None
    return _with_bias(op, node.tensor(0), node.tensor(1), bias, _channels(op, node), n + 2)


for _ccls, _aten, _onnx in ((Conv1d, ("aten.conv1d.default", "aten.convolution.default"), "Conv"),
                            (Conv2d, ("aten.conv2d.default", "aten.convolution.default"), "Conv"),
                            (ConvTranspose2d, ("aten.conv_transpose2d.input",
                                               "aten.convolution.default"), "ConvTranspose")):
    _ccls.aten_imports = _aten
    _ccls.onnx_imports = (_onnx,)
    _ccls.from_aten = classmethod(_conv_aten)  # type: ignore[method-assign,assignment]
    _ccls.from_onnx = classmethod(_conv_onnx)  # type: ignore[method-assign,assignment]
