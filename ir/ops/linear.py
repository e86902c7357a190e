"""Matrix multiplication: x[..., k] @ w[k, n] (w is usually a weight)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ir.dtypes import DType
from ir.op import Op, Slot
from ir.shapes import eq
from ir.types import TensorType


@dataclass(frozen=True)
class MatMul(Op):
    """ONNX MatMul / torch.matmul with a rank-2 right operand."""

    name: ClassVar[str] = "matmul"
    family: ClassVar[str] = "matmul"
    arity: ClassVar[int] = 2

    @classmethod
    def signatures(cls, n_inputs):
        return [((d, d), (d,)) for d in (DType.float32, DType.float64)]

    @classmethod
    def first_ranks(cls):
        return (2, 3, 4)

    @classmethod
    def slots(cls, n_inputs, first):
        return [Slot((2,), param=None)]

    def operand_type(self, index, first, dtype, ctx):
        return TensorType((first.shape[-1], ctx.dim(2)), dtype)

    def requires(self, ins):
        return [eq(ins[0].shape[-1], ins[1].shape[0])]

    def infer(self, ins):
        return [TensorType(ins[0].shape[:-1] + ins[1].shape[1:], ins[0].dtype)]

    def torch(self, x, w):
        import torch

        return torch.matmul(x, w)

    def onnx(self, b, ins, outs):
        b.node("MatMul", ins, outs)
