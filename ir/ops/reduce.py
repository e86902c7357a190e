"""Reductions over one axis, with keepdim."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ir.dtypes import DType, FLOAT_DTYPES, NUMERIC_DTYPES
from ir.op import Op
from ir.types import TensorType


@dataclass(frozen=True)
class Reduce(Op):
    family: ClassVar[str] = "reduce"
    dtypes: ClassVar[frozenset[DType]] = NUMERIC_DTYPES
    onnx_name: ClassVar[str]
    axis: int
    keepdim: bool

    @classmethod
    def signatures(cls, n_inputs):
        return [((d,), (d,)) for d in sorted(cls.dtypes, key=lambda d: d.value)]

    @classmethod
    def first_ranks(cls):
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx, first):
        return cls(axis=ctx.rng.randrange(first.rank), keepdim=ctx.rng.random() < 0.5)

    def requires(self, ins):
        return [0 <= self.axis < ins[0].rank]

    def infer(self, ins):
        s = ins[0].shape
        out = s[: self.axis] + ((1,) if self.keepdim else ()) + s[self.axis + 1 :]
        return [TensorType(out, ins[0].dtype)]

    def onnx(self, b, ins, outs):
        axes = b.const_i64([self.axis])
        b.node(self.onnx_name, [ins[0], axes], outs, keepdims=int(self.keepdim))


@dataclass(frozen=True)
class ReduceSum(Reduce):
    name: ClassVar[str] = "reduce_sum"
    onnx_name: ClassVar[str] = "ReduceSum"

    def torch(self, x):
        return x.sum(dim=self.axis, keepdim=self.keepdim, dtype=x.dtype)


@dataclass(frozen=True)
class ReduceMean(Reduce):
    name: ClassVar[str] = "reduce_mean"
    onnx_name: ClassVar[str] = "ReduceMean"
    dtypes: ClassVar[frozenset[DType]] = FLOAT_DTYPES

    def torch(self, x):
        return x.mean(dim=self.axis, keepdim=self.keepdim)
