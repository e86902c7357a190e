"""Data-movement ops that accept every dtype: reshape, flatten, squeeze, unsqueeze, expand,
transpose, tile, concat, slice, split. They move values without arithmetic, so they are exact
and have no numerical domain.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, NotImportable, Prev, SourceNode, Step, ints, norm_axis
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

    def onnx_inferred_attrs(self, attrs: Mapping[str, Any], in_dims: tuple,
                            offset: Callable[[Any, Any], int | None]) -> Op | None:
        """0 where a target dim is the input's dim at that position (Reshape, allowzero=0,
        copies it) and one -1 (inferred) for the rest; None when more than one is left."""
        out, minus = [], 0
        for i, d in enumerate(attrs["shape"]):
            if isinstance(d, int):
                out.append(d)
            elif i < len(in_dims) and not isinstance(in_dims[i], int) and \
                    offset(d, in_dims[i]) == 0:
                out.append(0)
            else:
                out.append(-1)
                minus += 1
        return replace(self, shape=tuple(out)) if minus <= 1 else None

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

    def onnx_inferred_attrs(self, attrs: Mapping[str, Any], in_dims: tuple,
                            offset: Callable[[Any, Any], int | None]) -> Op | None:
        """1 where the target is the input's own dim (Expand broadcasts both ways); None when
        a symbolic target dim is not."""
        shape = list(attrs["shape"])
        lead = len(shape) - len(in_dims)
        for i, d in enumerate(shape):
            if isinstance(d, int):
                continue
            j = i - lead
            if j < 0 or isinstance(in_dims[j], int) or offset(d, in_dims[j]) != 0:
                return None
            shape[i] = 1
        return replace(self, shape=tuple(shape))

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

    def onnx_inferred_attrs(self, attrs: Mapping[str, Any], in_dims: tuple,
                            offset: Callable[[Any, Any], int | None]) -> Op | None:
        """A symbolic end `k` before the axis's end as end `-k` (or "to the end"); None for
        any other symbolic attribute."""
        if set(attrs) != {"end"} or self.axis >= len(in_dims):
            return None
        k = offset(attrs["end"], in_dims[self.axis])  # end = dim + k
        if k is None or k > 0:
            return None
        return replace(self, end=k if k < 0 else 2 ** 63 - 1)

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


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _out_shape(node: SourceNode) -> tuple[int, ...]:
    out = node.out_types[0]
    if out is None:
        raise NotImportable("no result type")
    return tuple(int(d) for d in out.shape)


def _to_shape(cls: type[ToShape], node: SourceNode) -> Imported | None:
    """reshape / view / flatten / unflatten (torch), Reshape / Expand (ONNX): the target is the
    result's shape (-1 and 0 resolved); an expand to the same shape is no op."""
    shape = _out_shape(node)
    if cls is Expand and shape == tuple(node.type(0).shape):
        return Imported.same(node.tensor(0))
    return Imported.one(cls(shape=shape), node.tensor(0))


Reshape.aten_imports = ("aten.reshape.default", "aten.view.default", "aten._unsafe_view.default",
                        "aten.flatten.using_ints", "aten.unflatten.int")
Reshape.onnx_imports = ("Reshape",)
Expand.aten_imports = ("aten.expand.default", "aten.expand_as.default")
Expand.onnx_imports = ("Expand",)
for _cls in (Reshape, Expand):
    _cls.from_aten = classmethod(_to_shape)  # type: ignore[method-assign,assignment]
    _cls.from_onnx = classmethod(_to_shape)  # type: ignore[method-assign,assignment]


def _flatten_onnx(cls: type[Flatten], node: SourceNode) -> Imported | None:
    rank = node.type(0).rank
    axis = node.attr("axis", 1)
    return Imported.one(cls(axis=axis + rank if axis < 0 else axis), node.tensor(0))


Flatten.onnx_imports = ("Flatten",)
Flatten.from_onnx = classmethod(_flatten_onnx)  # type: ignore[method-assign,assignment]


def _one_axis(node: SourceNode, i: int, rank: int) -> int:
    a = node.arg(i)
    if a is None:
        a = node.attr("axes")
    if isinstance(a, (list, tuple)):
        if len(a) != 1:
            raise NotImportable("several axes")
        a = a[0]
    if not isinstance(a, int):
        raise NotImportable("no axis")
    return norm_axis(a, rank)


def _squeeze(cls: type[Squeeze], node: SourceNode) -> Imported | None:
    x = node.type(0)
    if node.target == "aten.squeeze.default" or (node.target == "Squeeze" and node.n_given < 2
                                                 and node.attr("axes") is None):
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        if len(ones) != 1:
            return None
        return Imported.one(cls(axis=ones[0]), node.tensor(0))
    axis = _one_axis(node, 1, x.rank)
    if x.shape[axis] != 1:  # torch: squeezing a dim > 1 is no op
        return Imported.same(node.tensor(0))
    return Imported.one(cls(axis=axis), node.tensor(0))


Squeeze.aten_imports = ("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
Squeeze.onnx_imports = ("Squeeze",)
Squeeze.from_aten = classmethod(_squeeze)  # type: ignore[method-assign,assignment]
Squeeze.from_onnx = classmethod(_squeeze)  # type: ignore[method-assign,assignment]


def _unsqueeze(cls: type[Unsqueeze], node: SourceNode) -> Imported | None:
    return Imported.one(cls(axis=_one_axis(node, 1, node.type(0).rank + 1)), node.tensor(0))


Unsqueeze.aten_imports = ("aten.unsqueeze.default",)
Unsqueeze.onnx_imports = ("Unsqueeze",)
Unsqueeze.from_aten = classmethod(_unsqueeze)  # type: ignore[method-assign,assignment]
Unsqueeze.from_onnx = classmethod(_unsqueeze)  # type: ignore[method-assign,assignment]


def _transpose_aten(cls: type[Transpose], node: SourceNode) -> Imported | None:
    rank = node.type(0).rank
    if node.target == "aten.permute.default":
        perm = [norm_axis(a, rank) for a in ints(node.arg(1))]
    elif node.target in ("aten.t.default", "aten.numpy_T.default"):
        perm = list(reversed(range(rank)))
    else:  # transpose.int(x, d0, d1)
        perm = list(range(rank))
        a, b = norm_axis(node.arg(1), rank), norm_axis(node.arg(2), rank)
        perm[a], perm[b] = perm[b], perm[a]
    if rank < 2 and node.target != "aten.permute.default":
        return Imported.same(node.tensor(0))
    return Imported.one(cls(perm=tuple(perm)), node.tensor(0))


def _transpose_onnx(cls: type[Transpose], node: SourceNode) -> Imported | None:
    rank = node.type(0).rank
    perm = node.attr("perm") or list(reversed(range(rank)))
    return Imported.one(cls(perm=tuple(int(p) for p in perm)), node.tensor(0))


Transpose.aten_imports = ("aten.permute.default", "aten.transpose.int", "aten.t.default",
                          "aten.numpy_T.default")
Transpose.onnx_imports = ("Transpose",)
Transpose.from_aten = classmethod(_transpose_aten)  # type: ignore[method-assign,assignment]
Transpose.from_onnx = classmethod(_transpose_onnx)  # type: ignore[method-assign,assignment]


def _tile(cls: type[Tile], node: SourceNode) -> Imported | None:
    reps = node.arg(1)
    if reps is None:
        return None
    return Imported.one(cls(repeats=ints(list(reps) if not isinstance(reps, int) else reps)),
                        node.tensor(0))


Tile.aten_imports = ("aten.repeat.default",)
Tile.onnx_imports = ("Tile",)
Tile.from_aten = classmethod(_tile)  # type: ignore[method-assign,assignment]
Tile.from_onnx = classmethod(_tile)  # type: ignore[method-assign,assignment]


def _concat_chain(cls: type[Concat], axis: int, xs: list, steps: list) -> Imported:
    """Concatenate `xs` (refs or earlier steps' results) after `steps`: concat takes 2 or 3
    operands, so more are joined by a chain of them."""
    last = cls.arities()[-1]
    while len(xs) > 1:
        take = min(len(xs), last)
        steps.append((cls(axis=axis), xs[:take]))
        xs = [Prev(len(steps) - 1), *xs[take:]]
    return Imported.chain(steps)


def _concat_aten(cls: type[Concat], node: SourceNode) -> Imported | None:
    """cat(tensors, dim); stack(tensors, dim): each unsqueezed, then concatenated."""
    xs: list = node.tensors(0)
    rank = node.out_types[0].rank if node.out_types[0] is not None else 0
    axis = norm_axis(node.arg(1, 0), rank)
    if node.target == "aten.stack.default":
        steps: list = [(Unsqueeze(axis=axis), [x]) for x in xs]
        return _concat_chain(cls, axis, [Prev(k) for k in range(len(xs))], steps)
    if len(xs) == 1:
        return Imported.same(xs[0])
    return _concat_chain(cls, axis, xs, [])


def _concat_onnx(cls: type[Concat], node: SourceNode) -> Imported | None:
    xs: list = node.tensors(0)
    if len(xs) == 1:
        return Imported.same(xs[0])
    return _concat_chain(cls, norm_axis(node.attr("axis", 0), node.type(0).rank), xs, [])


Concat.aten_imports = ("aten.cat.default", "aten.concat.default", "aten.stack.default")
Concat.onnx_imports = ("Concat",)
Concat.from_aten = classmethod(_concat_aten)  # type: ignore[method-assign,assignment]
Concat.from_onnx = classmethod(_concat_onnx)  # type: ignore[method-assign,assignment]


def _slice_bounds(size: int, start: int | None, end: int | None, step: int) -> tuple[int, int]:
    start = 0 if start is None else start
    end = size if end is None else end
    start = max(0, start + size if start < 0 else start)
    end = min(size, end + size if end < 0 else end)
    return min(start, size), end


def _slice_aten(cls: type[Slice], node: SourceNode) -> Imported | None:
    x = node.type(0)
    if node.target == "aten.select.int":  # x[..., i, ...]: a slice of 1, squeezed
        axis = norm_axis(node.arg(1), x.rank)
        i = node.arg(2)
        i = i + x.shape[axis] if i < 0 else i
        return Imported.chain([(cls(axis=axis, start=i, end=i + 1, step=1), [node.tensor(0)]),
                               (Squeeze(axis=axis), [Prev(0)])])
    if node.target == "aten.unbind.int":  # every select along the axis, in order
        axis = norm_axis(node.arg(1, 0), x.rank)
        steps: list = []
        for i in range(int(x.shape[axis])):
            steps += [(cls(axis=axis, start=i, end=i + 1, step=1), [node.tensor(0)]),
                      (Squeeze(axis=axis), [Prev(len(steps))])]
        return Imported(tuple(Step(op, tuple(ops)) for op, ops in steps),
                        outputs=tuple(Prev(k) for k in range(1, len(steps), 2)))
    axis = norm_axis(node.arg(1, 0), x.rank)
    step = node.arg(4, 1)
    start, end = _slice_bounds(int(x.shape[axis]), node.arg(2), node.arg(3), step)
    return Imported.one(cls(axis=axis, start=start, end=end, step=step), node.tensor(0))


def _slice_onnx(cls: type[Slice], node: SourceNode) -> Imported | None:
    x = node.type(0)
    starts, ends = node.arg(1), node.arg(2)
    axes = node.arg(3) if node.n_given > 3 else list(range(len(starts or [])))
    steps = node.arg(4) if node.n_given > 4 else [1] * len(axes or [])
    if starts is None or ends is None or axes is None or steps is None:
        return None
    starts, ends, axes, steps = (ints(v) for v in (starts, ends, axes, steps))
    steps_: list = []
    for k, (a, s, e, st) in enumerate(zip(axes, starts, ends, steps, strict=True)):
        if st < 1:
            return None
        axis = norm_axis(a, x.rank)
        s, e = _slice_bounds(int(x.shape[axis]), s, e, st)
        steps_.append((cls(axis=axis, start=s, end=e, step=st),
                       [node.tensor(0) if k == 0 else Prev(k - 1)]))
    return Imported.chain(steps_) if steps_ else None


Slice.aten_imports = ("aten.slice.Tensor", "aten.select.int", "aten.unbind.int")
Slice.onnx_imports = ("Slice",)
Slice.from_aten = classmethod(_slice_aten)  # type: ignore[method-assign,assignment]
Slice.from_onnx = classmethod(_slice_onnx)  # type: ignore[method-assign,assignment]


def _split(cls: type[Split], node: SourceNode) -> Imported | None:
    """split_with_sizes / split / chunk (torch), Split (ONNX): the sizes are the results'."""
    x = node.type(0)
    if node.target.startswith("aten."):
        axis = norm_axis(node.arg(2, 0), x.rank)
    else:
        axis = norm_axis(node.attr("axis", 0), x.rank)
    outs = node.out_types
    split = None if node.target.startswith("aten.") else node.arg(1)
    if len(outs) != cls.num_results:
        return None
    if split is not None:  # ONNX's sizes (shape inference may leave a result untyped)
        sizes = ints(split)
    elif all(t is not None for t in outs):
        sizes = tuple(int(t.shape[axis]) for t in outs if t is not None)
    else:
        return None
    return Imported.one(cls(axis=axis, sizes=sizes), node.tensor(0))


for _scls in (Split2, Split3):
    _scls.aten_imports = ("aten.split_with_sizes.default", "aten.split.Tensor",
                          "aten.chunk.default")
    _scls.onnx_imports = ("Split",)
    _scls.from_aten = classmethod(_split)  # type: ignore[method-assign,assignment]
    _scls.from_onnx = classmethod(_split)  # type: ignore[method-assign,assignment]
