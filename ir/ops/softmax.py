"""Softmax over one axis."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ir.dtypes import DType
from ir.op import Op


@dataclass(frozen=True)
class Softmax(Op):
    name: ClassVar[str] = "softmax"
    family: ClassVar[str] = "softmax"
    axis: int

    @classmethod
    def signatures(cls, n_inputs):
        return [((d,), (d,)) for d in (DType.float32, DType.float64)]

    @classmethod
    def first_ranks(cls):
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx, first):
        return cls(axis=ctx.rng.randrange(first.rank))

    def requires(self, ins):
        return [0 <= self.axis < ins[0].rank]

    def infer(self, ins):
        return [ins[0]]

    def torch(self, x):
        import torch

        return torch.softmax(x, dim=self.axis)

    def onnx(self, b, ins, outs):
        b.node("Softmax", ins, outs, axis=self.axis)
