"""Matrix products: `matmul` (x[..., k] @ w[k, n]) and `linear` (x @ W^T + b, weights as params)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import eq
from ir.core.types import TensorType
from ir.ops.common import NUMERIC, is_float, no_wraparound, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class MatMul(Op):
    """ONNX MatMul / torch.matmul with a rank-2 right operand (a value or a weight)."""

    name: ClassVar[str] = "matmul"
    family: ClassVar[str] = "matmul"
    tolerance_factor: ClassVar[float] = 2.0  # long accumulations: summation order
    arity: ClassVar[int] = 2
    dtypes: ClassVar[frozenset[DType]] = NUMERIC

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, n_inputs)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((2,), param=None)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return TensorType((first.shape[-1], ctx.dim(2)), dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [eq(ins[0].shape[-1], ins[1].shape[0])]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(ins[0].shape[:-1] + ins[1].shape[1:], ins[0].dtype)]

    def domain(self, x: Tensor, w: Tensor) -> list[Tensor]:
        """Integers: no partial sum of products wraps around (`no_wraparound`; |x| @ |w|
        bounds them all); floats: none."""
        return _int_matmul_bound(x, w)

    def torch(self, x: Tensor, w: Tensor) -> Tensor:
        import torch

        return torch.matmul(x, w)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("MatMul", ins, outs)


@dataclass(frozen=True)
class Linear(MatMul):
    """torch.nn.functional.linear: x[..., k] @ W[n, k]^T + b[n]; W and b are weights. ONNX:
    Transpose + MatMul + Add (Gemm would need rank 2)."""

    name: ClassVar[str] = "linear"
    arity: ClassVar[int] = 3

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((2,), param=True), Slot((1,), param=True)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        if index == 1:
            return TensorType((ctx.dim(2), first.shape[-1]), dtype)
        return None  # the bias: any rank-1 dims; `requires` ties it to W's rows

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, w, bias = ins
        return [eq(x.shape[-1], w.shape[1]), eq(bias.shape[0], w.shape[0])]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(ins[0].shape[:-1] + ins[1].shape[:1], ins[0].dtype)]

    # override ignored: linear is a matmul with a third operand (the bias); an op is called with
    # its operand list, never through MatMul's two-operand signature
    def domain(self, x: Tensor, w: Tensor, bias: Tensor) -> list[Tensor]:  # type: ignore[override]
        """As matmul's, the bias added to the bound (ONNX: MatMul, then Add)."""
        return _int_matmul_bound(x, w.T, bias)

    def torch(self, x: Tensor, w: Tensor, bias: Tensor) -> Tensor:  # type: ignore[override]
        import torch

        return torch.nn.functional.linear(x, w, bias)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        x, w, bias = ins
        wt, xw = b.fresh("wt"), b.fresh("xw")
        b.node("Transpose", [w], [wt], perm=[1, 0])
        b.node("MatMul", [x, wt], [xw])
        b.node("Add", [xw, bias], outs)


def _int_matmul_bound(x: Tensor, w: Tensor, bias: Tensor | None = None) -> list[Tensor]:
    """`no_wraparound` for integer x @ w (+ bias): |x| @ |w| (+ |bias|) in float64 bounds every
    partial sum of products, in any order."""
    if is_float(x) or not x.numel() or not w.numel():
        return []
    import torch

    bound = torch.matmul(x.to(torch.float64).abs(), w.to(torch.float64).abs())
    if bias is not None:
        bound = bound + bias.to(torch.float64).abs()
    return [no_wraparound(torch.log2(bound), x.dtype)]
