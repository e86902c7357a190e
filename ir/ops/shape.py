"""Data-movement ops: reshape, transpose, concat, slice. They accept every dtype."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ir.dtypes import DType
from ir.op import Op, Slot
from ir.shapes import eq, floordiv, product
from ir.types import TensorType

_ALL = sorted(DType, key=lambda d: d.value)


def _same_dtype(n: int):
    return [((d,) * n, (d,)) for d in _ALL]


@dataclass(frozen=True)
class Reshape(Op):
    """Reshape to `shape` (no -1: every target dim is explicit and solved)."""

    name: ClassVar[str] = "reshape"
    family: ClassVar[str] = "shape"
    shape: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs):
        return _same_dtype(1)

    @classmethod
    def sample(cls, ctx, first):
        return cls(shape=tuple(ctx.sym("rs") for _ in range(ctx.rng.randint(1, 4))))

    def requires(self, ins):
        return [d >= 1 for d in self.shape] + [eq(product(self.shape), product(ins[0].shape))]

    def infer(self, ins):
        return [TensorType(tuple(self.shape), ins[0].dtype)]

    def torch(self, x):
        return x.reshape(self.shape)

    def onnx(self, b, ins, outs):
        b.node("Reshape", [ins[0], b.const_i64(list(self.shape))], outs)


@dataclass(frozen=True)
class Transpose(Op):
    name: ClassVar[str] = "transpose"
    family: ClassVar[str] = "shape"
    perm: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs):
        return _same_dtype(1)

    @classmethod
    def first_ranks(cls):
        return (2, 3, 4)

    @classmethod
    def sample(cls, ctx, first):
        perm = list(range(first.rank))
        while perm == sorted(perm):
            ctx.rng.shuffle(perm)
        return cls(perm=tuple(perm))

    def requires(self, ins):
        return [sorted(self.perm) == list(range(ins[0].rank))]

    def infer(self, ins):
        return [TensorType(tuple(ins[0].shape[p] for p in self.perm), ins[0].dtype)]

    def torch(self, x):
        return x.permute(self.perm)

    def onnx(self, b, ins, outs):
        b.node("Transpose", ins, outs, perm=list(self.perm))


@dataclass(frozen=True)
class Concat(Op):
    name: ClassVar[str] = "concat"
    family: ClassVar[str] = "shape"
    arity: ClassVar[tuple[int, int]] = (2, 3)
    axis: int

    @classmethod
    def signatures(cls, n_inputs):
        return _same_dtype(n_inputs)

    @classmethod
    def first_ranks(cls):
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx, first):
        return cls(axis=ctx.rng.randrange(first.rank))

    def operand_type(self, index, first, dtype, ctx):
        dims = list(first.shape)
        dims[self.axis] = ctx.dim(first.rank)
        return TensorType(tuple(dims), dtype)

    def requires(self, ins):
        first = ins[0]
        if not 0 <= self.axis < first.rank or any(t.rank != first.rank for t in ins):
            return [False]
        return [eq(t.shape[i], first.shape[i]) for t in ins[1:] for i in range(first.rank) if i != self.axis]

    def infer(self, ins):
        first = ins[0]
        total = sum((t.shape[self.axis] for t in ins[1:]), first.shape[self.axis])
        shape = first.shape[: self.axis] + (total,) + first.shape[self.axis + 1 :]
        return [TensorType(shape, first.dtype)]

    def torch(self, *xs):
        import torch

        return torch.cat(xs, dim=self.axis)

    def onnx(self, b, ins, outs):
        b.node("Concat", ins, outs, axis=self.axis)


@dataclass(frozen=True)
class Slice(Op):
    """x[..., start:end:step, ...] on one axis, 0 <= start < end <= size."""

    name: ClassVar[str] = "slice"
    family: ClassVar[str] = "shape"
    axis: int
    start: int
    end: int
    step: int

    @classmethod
    def signatures(cls, n_inputs):
        return _same_dtype(1)

    @classmethod
    def first_ranks(cls):
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx, first):
        r = ctx.rng
        return cls(axis=r.randrange(first.rank), start=ctx.sym("start"), end=ctx.sym("end"),
                   step=r.choice((1, 1, 2)))

    def requires(self, ins):
        if not 0 <= self.axis < ins[0].rank:
            return [False]
        size = ins[0].shape[self.axis]
        return [self.start >= 0, self.start < self.end, self.end <= size, self.step >= 1]

    def infer(self, ins):
        s = ins[0].shape
        n = floordiv(self.end - self.start - 1, self.step) + 1
        return [TensorType(s[: self.axis] + (n,) + s[self.axis + 1 :], ins[0].dtype)]

    def torch(self, x):
        index = (slice(None),) * self.axis + (slice(self.start, self.end, self.step),)
        return x[index]

    def onnx(self, b, ins, outs):
        args = [b.const_i64([v]) for v in (self.start, self.end, self.axis, self.step)]
        b.node("Slice", [ins[0], *args], outs)
