"""Normalizations in inference mode; scale, bias (and batch_norm's running stats) are params.

Domains: batch_norm's running variance must be clearly positive. layer_norm and instance_norm
divide by the standard deviation of a group of input values; a nearly constant group (std below
the margin, but not exactly one element) amplifies rounding noise, so it is rejected.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import Dim, Or, eq
from ir.core.types import TensorType
from ir.ops.common import F32, FLOATS, as_float, at_least, is_float, margin, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

EPS = 1e-5


def spread(x: Tensor, dims: tuple[int, ...]) -> list[Tensor]:
    """Violation of: the variance of x over `dims` is at least margin**2 (groups of one element
    are exact: x - mean(x) = 0)."""
    import math

    if not is_float(x) or math.prod(x.shape[d] for d in dims) < 2:
        return []
    var = as_float(x).var(dim=dims, unbiased=False)
    return [at_least(var, margin(x.dtype, 0.0) ** 2)]


@dataclass(frozen=True)
class Norm(Op):
    """x plus per-channel (or per-element) params built from x's dims."""

    family: ClassVar[str] = "norm"
    #: mean and variance: two accumulations, and a division by the spread
    tolerance_factor: ClassVar[float] = 4.0
    dtypes: ClassVar[frozenset[DType]] = FLOATS

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, n_inputs)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((1, 2), param=True) for _ in range(n_inputs - 1)]

    def param_shape(self, first: TensorType) -> tuple:
        return (first.shape[1],)

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return TensorType(self.param_shape(first), dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        shape = self.param_shape(ins[0])
        return [all(p.rank == len(shape) for p in ins[1:])] + [
            eq(p.shape[i], shape[i]) for p in ins[1:] for i in range(len(shape)) if p.rank == len(shape)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]


@dataclass(frozen=True)
class BatchNorm(Norm):
    """batch_norm(x[N, C, ...], scale, bias, mean, var) with running statistics (inference);
    var >= margin."""

    name: ClassVar[str] = "batch_norm"
    arity: ClassVar[int] = 5

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    def domain(self, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor) -> list[Tensor]:
        if not is_float(var):
            return []
        return [at_least(var, margin(var.dtype, 0.0))]

    def torch(self, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor) -> Tensor:
        """Written out rather than F.batch_norm, which is not differentiable in the running
        statistics (the input search differentiates the whole graph)."""
        import torch

        shape = (1, -1) + (1,) * (x.dim() - 2)
        inv = torch.rsqrt(var + EPS).reshape(shape)
        return (x - mean.reshape(shape)) * inv * scale.reshape(shape) + bias.reshape(shape)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("BatchNormalization", ins, outs, epsilon=EPS)


@dataclass(frozen=True)
class LayerNorm(Norm):
    """layer_norm over the last `dims` dims, with elementwise scale and bias of those dims."""

    name: ClassVar[str] = "layer_norm"
    arity: ClassVar[int] = 3
    dims: int

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(dims=ctx.rng.randint(1, min(2, first.rank)))

    def param_shape(self, first: TensorType) -> tuple[Dim, ...]:
        return first.shape[first.rank - self.dims:]

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [1 <= self.dims <= ins[0].rank] + super().requires(ins)

    def domain(self, x: Tensor, scale: Tensor, bias: Tensor) -> list[Tensor]:
        return spread(x, tuple(range(x.dim() - self.dims, x.dim())))

    def torch(self, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.layer_norm(x, tuple(x.shape[x.dim() - self.dims:]), scale, bias, eps=EPS)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("LayerNormalization", ins, outs, axis=-self.dims, epsilon=EPS)


@dataclass(frozen=True)
class InstanceNorm(Norm):
    """instance_norm(x[N, C, *S], scale[C], bias[C]): per (n, c) statistics over S."""

    name: ClassVar[str] = "instance_norm"
    arity: ClassVar[int] = 3
    dtypes: ClassVar[frozenset[DType]] = F32  # ORT: no double kernel

    def requires(self, ins: Sequence[TensorType]) -> list:
        # torch's instance_norm rejects a single spatial element
        return super().requires(ins) + [Or(*[d >= 2 for d in ins[0].shape[2:]])]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (3, 4)

    def domain(self, x: Tensor, scale: Tensor, bias: Tensor) -> list[Tensor]:
        return spread(x, tuple(range(2, x.dim())))

    def torch(self, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.instance_norm(x, weight=scale, bias=bias, eps=EPS)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("InstanceNormalization", ins, outs, epsilon=EPS)
