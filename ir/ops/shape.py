"""Data-movement ops that accept every dtype: reshape, flatten, squeeze, unsqueeze, expand,
transpose, tile, concat, slice, split. They move values without arithmetic, so they are exact
and have no numerical domain.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ir.core.dtypes import DType
from ir.core.op import Op, Signature
from ir.core.shapes import And, Dim, Or, eq, floordiv, is_symbolic, product
from ir.core.types import TensorType
from ir.ops.common import ALL, AxisOp, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext, SymbolicSampleContext


@dataclass(frozen=True)
class Movement(Op):
    """A one-input data-movement op (any dtype, result dtype = input dtype)."""

    family: ClassVar[str] = "shape"
    saves_for_backward: ClassVar[bool] = False
    exact: ClassVar[bool] = True

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL, n_inputs)


@dataclass(frozen=True)
class ToShape(Movement):
    """An op producing the explicit target `shape` (an ONNX int64 constant input)."""

    onnx_name: ClassVar[str]
    shape: tuple[int, ...]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(tuple(self.shape), ins[0].dtype)]

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node(self.onnx_name, [ins[0], b.const_i64(list(self.shape))], outs)


@dataclass(frozen=True)
class Reshape(ToShape):
    """Reshape to `shape` (no -1: every target dim is explicit and solved)."""

    name: ClassVar[str] = "reshape"
    onnx_name: ClassVar[str] = "Reshape"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view where the strides allow

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(shape=tuple(ctx.sym("rs") for _ in range(ctx.rng.randint(1, 4))))

    @classmethod
    def sample_symbolic(cls, ctx: SymbolicSampleContext, first: TensorType
                        ) -> dict[str, Any] | None:
        """A target of a random rank: the concrete dims' product split at random, each
        symbolic dim multiplied into one target dim (`(B*2, 6)`)."""
        rng = ctx.rng
        dims = list(first.shape)
        rank = rng.randint(1, min(4, ctx.max_rank))
        const = math.prod(d for d in dims if not is_symbolic(d))
        parts = [1] * rank
        order = list(range(rank))
        rng.shuffle(order)
        rest = const
        for i in order[:-1]:
            d = rng.choice(_divisors(rest))
            parts[i] *= d
            rest //= d
        parts[order[-1]] *= rest
        target: list = list(parts)
        for d in dims:
            if is_symbolic(d):
                i = rng.randrange(rank)
                target[i] = d if isinstance(target[i], int) and target[i] == 1 else target[i] * d
        return {"shape": tuple(target)}

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [d >= 1 for d in self.shape] + [eq(product(self.shape), product(ins[0].shape))]

    def torch(self, x: Tensor) -> Tensor:
        return x.reshape(self.shape)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class Flatten(Movement):
    """ONNX Flatten: [prod(dims[:axis]), prod(dims[axis:])] (always rank 2)."""

    name: ClassVar[str] = "flatten"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view
    axis: int

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randint(0, first.rank))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [0 <= self.axis <= ins[0].rank]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType((product(s[: self.axis]), product(s[self.axis:])), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        import math

        return x.reshape(math.prod(x.shape[: self.axis]), math.prod(x.shape[self.axis:]))

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Flatten", ins, outs, axis=self.axis)


@dataclass(frozen=True)
class Squeeze(Movement, AxisOp):
    """Drop axis `axis`, which must have size 1."""

    name: ClassVar[str] = "squeeze"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self.axis_ok(ins[0]):
            return [False]
        return [eq(ins[0].shape[self.axis], 1)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType(s[: self.axis] + s[self.axis + 1:], ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.squeeze(self.axis)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Squeeze", [ins[0], b.const_i64([self.axis])], outs)


@dataclass(frozen=True)
class Unsqueeze(Movement):
    """Insert a size-1 axis at position `axis` of the result."""

    name: ClassVar[str] = "unsqueeze"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view
    axis: int

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (0, 1, 2, 3)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randint(0, first.rank))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [0 <= self.axis <= ins[0].rank]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType(s[: self.axis] + (1,) + s[self.axis:], ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.unsqueeze(self.axis)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Unsqueeze", [ins[0], b.const_i64([self.axis])], outs)


def expand_target(ctx: SampleContext, first: TensorType) -> tuple[Dim, ...]:
    """A symbolic target shape to expand `first` to: its rank, or one more (at most 4)."""
    extra = ctx.rng.randint(0, 1) if first.rank < 4 else 0
    return tuple(ctx.sym("ex") for _ in range(first.rank + extra))


def expands_to(shape: Sequence[Dim], target: Sequence[Dim]) -> list:
    """The constraints of `shape` broadcasting to `target` (torch's `expand`): the same rank
    or more, each dim its target's or 1, every target dim at least 1."""
    if len(target) < len(shape):
        return [False]
    cons = [d >= 1 for d in target]
    # zip strict=False: broadcast: trailing dims paired, ranks may differ
    return cons + [Or(eq(t, d), eq(d, 1)) for t, d in zip(reversed(target), reversed(shape), strict=False)]


@dataclass(frozen=True)
class Expand(ToShape):
    """Broadcast to `shape` (same rank or more): each input dim equals its target or is 1."""

    name: ClassVar[str] = "expand"
    onnx_name: ClassVar[str] = "Expand"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (0, 1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(shape=expand_target(ctx, first))

    @classmethod
    def sample_symbolic(cls, ctx: SymbolicSampleContext, first: TensorType
                        ) -> dict[str, Any] | None:
        """Symbolic dims kept, a dim of 1 grown to a symbol or a number, maybe a leading dim
        (a symbol or a number); None when nothing can grow (rank 4, no dim of 1)."""
        rng, syms, hint = ctx.rng, ctx.symbols, ctx.dim_hint
        dims = list(first.shape)
        extra = rng.randint(0, 1) if first.rank < 4 else 0
        target: list = []
        grows = False
        for d in dims:
            if is_symbolic(d) or d != 1:
                target.append(d)
            elif syms and rng.random() < 0.3:
                target.append(rng.choice(syms))
            else:
                v = rng.randint(1, hint)
                grows |= v > 1
                target.append(v)
        lead = []
        if extra:
            lead = [rng.choice(syms) if syms and rng.random() < 0.3 else rng.randint(2, hint)]
        if not grows and not lead:
            ones = [i for i, d in enumerate(dims) if not is_symbolic(d) and d == 1]
            if ones:
                target[rng.choice(ones)] = rng.randint(2, hint)
            elif first.rank < 4:
                lead = [rng.randint(2, hint)]
            else:
                return None
        return {"shape": tuple(lead + target)}

    def requires(self, ins: Sequence[TensorType]) -> list:
        s = ins[0].shape
        cons = expands_to(s, self.shape)
        if cons == [False]:
            return cons
        # something must actually grow, else expand is a no-op
        # zip strict=False: broadcast: trailing dims paired, ranks may differ
        grows = [And(eq(d, 1), t > 1) for t, d in zip(reversed(self.shape), reversed(s), strict=False)]
        cons.append(Or(len(self.shape) > len(s), *grows))
        return cons

    def torch(self, x: Tensor) -> Tensor:
        return x.expand(self.shape)


@dataclass(frozen=True)
class Transpose(Movement):
    name: ClassVar[str] = "transpose"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view
    perm: tuple[int, ...]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        perm = list(range(first.rank))
        while perm == sorted(perm):
            ctx.rng.shuffle(perm)
        return cls(perm=tuple(perm))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [sorted(self.perm) == list(range(ins[0].rank))]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(tuple(ins[0].shape[p] for p in self.perm), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.permute(self.perm)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Transpose", ins, outs, perm=list(self.perm))


@dataclass(frozen=True)
class Tile(Movement):
    """Repeat the whole tensor `repeats[i]` times along each axis i."""

    name: ClassVar[str] = "tile"
    repeats: tuple[int, ...]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(repeats=tuple(ctx.rng.choice((1, 1, 2, 3)) for _ in range(first.rank)))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [len(self.repeats) == ins[0].rank, all(r >= 1 for r in self.repeats)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(tuple(d * r for d, r in zip(ins[0].shape, self.repeats, strict=True)), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.repeat(self.repeats)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Tile", [ins[0], b.const_i64(list(self.repeats))], outs)


@dataclass(frozen=True)
class Concat(Movement, AxisOp):
    name: ClassVar[str] = "concat"
    arity: ClassVar[tuple[int, int]] = (2, 3)

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        dims = list(first.shape)
        dims[self.axis] = ctx.dim(first.rank)
        return TensorType(tuple(dims), dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        first = ins[0]
        if not self.axis_ok(first) or any(t.rank != first.rank for t in ins):
            return [False]
        return [eq(t.shape[i], first.shape[i]) for t in ins[1:] for i in range(first.rank) if i != self.axis]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        first = ins[0]
        total = sum((t.shape[self.axis] for t in ins[1:]), first.shape[self.axis])
        shape = first.shape[: self.axis] + (total,) + first.shape[self.axis + 1 :]
        return [TensorType(shape, first.dtype)]

    def torch(self, *xs: Tensor) -> Tensor:
        import torch

        return torch.cat(xs, dim=self.axis)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Concat", ins, outs, axis=self.axis)


@dataclass(frozen=True)
class Slice(Movement, AxisOp):
    """x[..., start:end:step, ...] on one axis, 0 <= start < end <= size."""

    name: ClassVar[str] = "slice"
    torch_may_alias: ClassVar[bool] = True  # torch returns a view
    start: int
    end: int
    step: int

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        r = ctx.rng
        return cls(axis=r.randrange(first.rank), start=ctx.sym("start"), end=ctx.sym("end"),
                   step=r.choice((1, 1, 2)))

    @classmethod
    def sample_symbolic(cls, ctx: SymbolicSampleContext, first: TensorType
                        ) -> dict[str, Any] | None:
        """A slice of a symbolic axis: a small start, an end near the axis's end (`L + -1`) or
        a few past the start; None when the axis drawn is concrete."""
        rng = ctx.rng
        dims = list(first.shape)
        axis = rng.randrange(first.rank) if first.rank else 0
        if not first.rank or not is_symbolic(dims[axis]):
            return None
        start = rng.choice((0, 0, 1, 2))
        if rng.random() < 0.7:
            end = dims[axis] - rng.choice((0, 0, 1, 2))
        else:
            end = start + rng.randint(1, 3)
        return {"axis": axis, "start": start, "end": end, "step": rng.choice((1, 1, 2))}

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self.axis_ok(ins[0]):
            return [False]
        size = ins[0].shape[self.axis]
        return [self.start >= 0, self.start < self.end, self.end <= size, self.step >= 1]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        n = floordiv(self.end - self.start - 1, self.step) + 1
        return [TensorType(s[: self.axis] + (n,) + s[self.axis + 1 :], ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        index = (slice(None),) * self.axis + (slice(self.start, self.end, self.step),)
        return x[index]

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        args = [b.const_i64([v]) for v in (self.start, self.end, self.axis, self.step)]
        b.node("Slice", [ins[0], *args], outs)


@dataclass(frozen=True)
class Split(Movement, AxisOp):
    """Split along `axis` into `len(sizes)` parts of the given (>= 1) sizes, bound in place as
    several results. One op per part count (`num_results` is a class constant)."""

    #: the part count (each subclass sets it)
    num_results: ClassVar[int]
    torch_may_alias: ClassVar[bool] = True  # torch returns views
    sizes: tuple[int, ...]

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randrange(first.rank), sizes=tuple(ctx.sym("sp") for _ in range(cls.num_results)))

    @classmethod
    def sample_symbolic(cls, ctx: SymbolicSampleContext, first: TensorType
                        ) -> dict[str, Any] | None:
        """Split a symbolic axis: small parts and, at a random place, the rest (`L + -2`);
        None when the axis drawn is concrete."""
        rng = ctx.rng
        if not first.rank:
            return None
        axis = rng.randrange(first.rank)
        if not is_symbolic(first.shape[axis]):
            return None
        n = cls.num_results
        sizes: list = [rng.randint(1, 3) for _ in range(n - 1)]
        sizes.insert(rng.randrange(n), first.shape[axis] - sum(sizes))
        return {"axis": axis, "sizes": tuple(sizes)}

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self.axis_ok(ins[0]) or len(self.sizes) != self.num_results:
            return [False]
        return [s >= 1 for s in self.sizes] + [eq(sum(self.sizes[1:], self.sizes[0]), ins[0].shape[self.axis])]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType(s[: self.axis] + (n,) + s[self.axis + 1:], ins[0].dtype) for n in self.sizes]

    def torch(self, x: Tensor) -> tuple[Tensor, ...]:
        return tuple(x.split(list(self.sizes), dim=self.axis))

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Split", [ins[0], b.const_i64(list(self.sizes))], outs, axis=self.axis)


@dataclass(frozen=True)
class Split2(Split):
    name: ClassVar[str] = "split2"
    num_results: ClassVar[int] = 2


@dataclass(frozen=True)
class Split3(Split):
    name: ClassVar[str] = "split3"
    num_results: ClassVar[int] = 3
