"""Padding of the last one or two dims: constant, reflect and replicate (ONNX "edge").

`pads` holds (before, after) pairs for the padded dims, outermost first. torch's F.pad takes them
innermost first; ONNX Pad takes all begins then all ends over every dim. torch pads reflect and
replicate only on the trailing 1-2 dims of rank n+1 or n+2 inputs, and reflect needs pad < size.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, SourceNode, ints
from ir.core.op import Op, Signature
from ir.core.shapes import Dim, Or
from ir.core.types import TensorType
from ir.ops.common import ALL, NUMERIC, const_like, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

MAX_PAD = 3


@dataclass(frozen=True)
class Pad(Op):
    family: ClassVar[str] = "pad"
    exact: ClassVar[bool] = True  # data movement
    dtypes: ClassVar[frozenset[DType]] = NUMERIC
    mode: ClassVar[str]
    onnx_mode: ClassVar[str]
    pads: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    @classmethod
    def padded_dims(cls, rank: int) -> range:
        """How many trailing dims may be padded for an input of this rank."""
        return range(max(1, rank - 2), min(2, rank - 1) + 1)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        n = ctx.rng.choice(cls.padded_dims(first.rank))
        return cls(pads=tuple(ctx.sym("pad") for _ in range(2 * n)))

    def limit(self, size: Dim) -> Dim:
        """The largest pad on a dim of this size."""
        return MAX_PAD

    def requires(self, ins: Sequence[TensorType]) -> list:
        x = ins[0]
        n = len(self.pads) // 2
        if len(self.pads) % 2 or n not in self.padded_dims(x.rank):
            return [False]
        sizes = x.shape[x.rank - n:]
        cons = [c for i, p in enumerate(self.pads) for c in (p >= 0, p <= MAX_PAD, p <= self.limit(sizes[i // 2]))]
        return cons + [Or(*[p > 0 for p in self.pads])]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        x = ins[0]
        n = len(self.pads) // 2
        lead = x.shape[: x.rank - n]
        padded = tuple(d + self.pads[2 * i] + self.pads[2 * i + 1] for i, d in enumerate(x.shape[x.rank - n:]))
        return [TensorType(lead + padded, x.dtype)]

    def torch_pads(self) -> list[int]:
        pairs = [self.pads[i:i + 2] for i in range(0, len(self.pads), 2)]
        return [p for pair in reversed(pairs) for p in pair]

    def torch(self, x: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.pad(x, self.torch_pads(), mode=self.mode)

    def onnx_inputs(self, b: OnnxBuilder, x: str) -> list[str]:
        """data, pads (begins then ends), constant value, axes (the last n, as negative axes:
        Pad-18's axes input spares knowing the rank)."""
        n = len(self.pads) // 2
        pads = b.const_i64(list(self.pads[0::2]) + list(self.pads[1::2]))
        return [x, pads, self.onnx_value(b, x), b.const_i64(list(range(-n, 0)))]

    def onnx_value(self, b: OnnxBuilder, x: str) -> str:
        return ""

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Pad", self.onnx_inputs(b, ins[0]), outs, mode=self.onnx_mode)


@dataclass(frozen=True)
class PadReflect(Pad):
    """Mirror padding without repeating the edge; each pad < the padded dim's size."""

    name: ClassVar[str] = "pad_reflect"
    mode: ClassVar[str] = "reflect"
    onnx_mode: ClassVar[str] = "reflect"

    def limit(self, size: Dim) -> Dim:
        return size - 1


@dataclass(frozen=True)
class PadReplicate(Pad):
    """Repeat the edge value (ONNX mode "edge")."""

    name: ClassVar[str] = "pad_replicate"
    mode: ClassVar[str] = "replicate"
    onnx_mode: ClassVar[str] = "edge"


@dataclass(frozen=True)
class PadConstant(Pad):
    """Pad with the constant `value` (integer-valued for integer inputs)."""

    name: ClassVar[str] = "pad_constant"
    mode: ClassVar[str] = "constant"
    onnx_mode: ClassVar[str] = "constant"
    # reflect and replicate save their operand (torch's backward kernels take it)
    saves_for_backward: ClassVar[bool] = False
    dtypes: ClassVar[frozenset[DType]] = ALL
    value: float
    pads: tuple[int, ...]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def padded_dims(cls, rank: int) -> range:
        return range(1, min(2, rank) + 1)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        n = ctx.rng.choice(cls.padded_dims(first.rank))
        if first.dtype is DType.bool:
            value = ctx.rng.choice((0.0, 1.0))
        else:
            # float pad values avoid integers and halves other than 0 (see clip)
            value = ctx.rng.choice((0.0, 0.25, -0.75) if first.dtype.is_float else (0.0, 1.0, -1.0, 2.0))
        return cls(value=value, pads=tuple(ctx.sym("pad") for _ in range(2 * n)))

    def requires(self, ins: Sequence[TensorType]) -> list:
        if ins[0].dtype is DType.bool:
            return super().requires(ins) + [self.value in (0.0, 1.0)]
        return super().requires(ins) + [ins[0].dtype.is_float or self.value == int(self.value)]

    def torch(self, x: Tensor) -> Tensor:
        import torch.nn.functional as F

        value = self.value if x.dtype.is_floating_point else int(self.value)  # bool: 0 or 1
        return F.pad(x, self.torch_pads(), mode="constant", value=value)

    def onnx_value(self, b: OnnxBuilder, x: str) -> str:
        return const_like(b, self.value, x)


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _pad_aten(cls: type[Pad], node: SourceNode) -> Imported | None:
    """pad(x, pad, mode, value) / constant_pad_nd(x, pad, value): torch's pairs run from the
    last dim outwards, GraphIR's from the outermost padded dim."""
    if node.target == "aten.constant_pad_nd.default":
        mode, value = "constant", node.arg(2, 0)
    else:
        mode, value = node.arg(2, "constant"), node.arg(3)
    if mode != cls.mode:
        return None
    flat = ints(node.arg(1))
    pairs = [flat[i:i + 2] for i in range(0, len(flat), 2)]
    pads = tuple(p for pair in reversed(pairs) for p in pair)
    if cls is PadConstant:
        return Imported.one(cls(value=float(value or 0.0), pads=pads), node.tensor(0))
    return Imported.one(cls(pads=pads), node.tensor(0))


def _pad_onnx(cls: type[Pad], node: SourceNode) -> Imported | None:
    """Pad(x, pads, value, axes) with mode: pads are all begins, then all ends."""
    mode = node.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != cls.onnx_mode:
        return None
    rank = node.type(0).rank
    flat = ints(node.arg(1))
    n = len(flat) // 2
    axes = ints(node.arg(3)) if node.n_given > 3 else tuple(range(rank - n, rank))
    axes = tuple(a + rank if a < 0 else a for a in axes)
    begins, ends = flat[:n], flat[n:]
    by_axis = dict(zip(axes, zip(begins, ends, strict=True), strict=True))
    first = min(axes, default=rank - 1)
    pads = tuple(p for a in range(first, rank) for p in by_axis.get(a, (0, 0)))
    if cls is PadConstant:
        value = node.const(2) if node.n_given > 2 else None
        v = 0.0 if value is None else float(value.reshape(()))
        return Imported.one(cls(value=v, pads=pads), node.tensor(0))
    return Imported.one(cls(pads=pads), node.tensor(0))


for _pcls in (PadReflect, PadReplicate, PadConstant):
    _pcls.aten_imports = ("aten.pad.default",) + (
        ("aten.constant_pad_nd.default",) if _pcls is PadConstant else ())
    _pcls.onnx_imports = ("Pad",)
    _pcls.from_aten = classmethod(_pad_aten)  # type: ignore[method-assign,assignment]
    _pcls.from_onnx = classmethod(_pad_onnx)  # type: ignore[method-assign,assignment]
