"""View ops: results that share their operand's storage, exactly as torch's views do, and the
pure *scatter* ops that write a view's elements back into its base (functionalization's
inverses of the views). See docs/inplace.md for the semantics.

  - view_slice[axis, start, end, step]   x[..., start:end:step]      (scatter: slice_scatter)
  - view_select[axis, index]             x.select(axis, index)       (scatter: select_scatter)
  - view_reshape[shape]                  x.view(shape)               (scatter: reshape back)
    only where torch can view (the in-place analysis checks the strides; torch's reshape
    would silently copy instead, so GraphIR has no "reshape, maybe a view")
  - view_permute[perm]                   x.permute(perm)             (scatter: the inverse permute)
  - view_diagonal[offset, dim1, dim2]    x.diagonal(offset, d1, d2)  (scatter: diagonal_scatter)
  - view_expand[shape]                   x.expand(shape)             (read-only when it repeats
    elements: a write through it is rejected; else scatter: reshape back)
  - view_unfold[dim, size, step]         x.unfold(dim, size, step)   (scatter: unfold_scatter,
    windows that do not overlap only)

A view op without any write in its graph is just a pure movement op (it reads); the analysis
(`ir.analysis.inplace`) gives it meaning only when something writes into its storage. The scatter ops
are ordinary pure ops: `base` with the view's elements replaced by `src` (of the view's type).

The flat element positions a view selects (`positions`) come from torch itself: the view is
taken of a contiguous meta tensor of the base's shape and its strides and storage offset are
read off, so the analysis and the ONNX forms (constant-index Gather / ScatterElements) use
torch's own view semantics, never a re-implementation of them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ir.core.op import Effect, Op, Signature
from ir.core.shapes import Dim, Or, eq, floordiv
from ir.core.types import TensorType
from ir.ops.common import ALL, AxisOp, FunctionalEmitter, same_dtype
from ir.ops.shape import Expand, Reshape, Slice, Transpose, expand_target, expands_to

if TYPE_CHECKING:
    from torch import SymInt, Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext, SymbolicSampleContext

VIEW = Effect(view_of=0)


def strided_positions(shape: Sequence[int], strides: Sequence[int], offset: int | SymInt) -> np.ndarray:
    """Flat indices into a storage of each element of a strided tensor (int64, of `shape`)."""
    idx = np.full(tuple(shape), offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, strides, strict=True)):
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(
            [-1 if j == k else 1 for j in range(len(shape))])
    return idx


@lru_cache(maxsize=4096)
def _positions_cached(op: ViewOp, shape: tuple[int, ...]) -> np.ndarray:
    import torch

    view = op.torch(torch.empty(shape, device="meta"))
    out = strided_positions(tuple(view.shape), view.stride(), view.storage_offset())
    out.setflags(write=False)
    return out


def positions(op: ViewOp, shape: Iterable[Dim]) -> np.ndarray:
    """For each element of `op`'s view of a contiguous tensor of `shape`, its flat row-major
    index in that tensor (torch's view semantics, read off a meta tensor)."""
    return _positions_cached(op, tuple(int(d) for d in shape))


def onnx_flat_gather(b: OnnxBuilder, x: str, pos: np.ndarray, out: str) -> None:
    """out = x.flatten()[pos] (a constant-index Gather: any view, read)."""
    flat = b.fresh("flat")
    b.node("Reshape", [x, b.const_i64([-1])], [flat])
    b.node("Gather", [flat, b.const(np.ascontiguousarray(pos, dtype=np.int64))], [out], axis=0)


def onnx_flat_scatter(b: OnnxBuilder, base: str, src: str, pos: np.ndarray, base_shape: Iterable[Dim],
                      out: str) -> None:
    """out = base with base.flatten()[pos] = src (positions distinct)."""
    flat, upd, res = b.fresh("flat"), b.fresh("upd"), b.fresh("sc")
    b.node("Reshape", [base, b.const_i64([-1])], [flat])
    b.node("Reshape", [src, b.const_i64([-1])], [upd])
    b.node("ScatterElements", [flat, b.const(np.ascontiguousarray(pos.reshape(-1), dtype=np.int64)),
                                upd], [res], axis=0)
    b.node("Reshape", [res, b.const_i64([int(d) for d in base_shape])], [out])


@dataclass(frozen=True)
class ViewOp(Op):
    """A view: result 0 shares operand 0's storage. Subclasses say how to write a view's new
    contents back into the operand (`scatter`), with pure ops."""

    family: ClassVar[str] = "view"
    effect: ClassVar[Effect] = VIEW
    generic: ClassVar[bool] = False
    saves_for_backward: ClassVar[bool] = False
    exact: ClassVar[bool] = True
    #: the pure movement op, with the same attributes, that this view is the view form of
    #: (view_slice: slice): registered as its `view_twin` when the view is defined. Default
    #: None: none
    movement: ClassVar[type[Op] | None] = None
    #: a view has no view twin of its own (one that is a movement op's subclass does not
    #: inherit the movement's)
    view_twin: ClassVar[type[Op] | None] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        movement = cls.__dict__.get("movement")
        if movement is not None:
            movement.view_twin = cls

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL, n_inputs)

    @classmethod
    def sample_symbolic(cls, ctx: SymbolicSampleContext, first: TensorType
                        ) -> dict[str, Any] | None:
        """Concrete attributes (a view does not take its movement op's symbolic ones)."""
        return None

    def onnx_inferred_attrs(self, attrs: Mapping[str, Any], in_dims: tuple,
                            offset: Callable[[Any, Any], int | None]) -> Op | None:
        """None: a view has no symbolic attributes (`sample_symbolic`)."""
        return None

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        """Emit pure ops (through `f`, an `ir.analysis.inplace.Emitter`) computing `base` with this
        view's elements replaced by `src`; returns the new base's name."""
        raise NotImplementedError

    def pure_read(self, x: TensorType) -> Op | None:
        """The op that reads this view in a functionalized graph (no writes left, so any
        movement op with the same result will do; strides no longer matter): self by
        default, a pure movement op where one exists, None when the view is `x` itself."""
        return self

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        onnx_flat_gather(b, ins[0], positions(self, b.shape_of(ins[0])), outs[0])


# ---- the views ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewSlice(ViewOp, Slice):
    """x[..., start:end:step, ...] on one axis, as a view."""

    name: ClassVar[str] = "view_slice"
    movement: ClassVar[type[Op] | None] = Slice

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        return f.emit(SliceScatter(axis=self.axis, start=self.start, end=self.end, step=self.step),
                      [base, src], hint)

    def pure_read(self, x: TensorType) -> Op | None:
        return Slice(axis=self.axis, start=self.start, end=self.end, step=self.step)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        Slice.onnx(self, b, ins, outs)


@dataclass(frozen=True)
class ViewSelect(ViewOp, AxisOp):
    """x.select(axis, index): the axis goes away."""

    name: ClassVar[str] = "view_select"
    index: int

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randrange(first.rank), index=ctx.sym("sel"))

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self.axis_ok(ins[0]):
            return [False]
        return [self.index >= 0, self.index < ins[0].shape[self.axis]]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType(s[: self.axis] + s[self.axis + 1:], ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.select(self.axis, self.index)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Gather", [ins[0], b.const(np.asarray(self.index, dtype=np.int64))], outs, axis=self.axis)

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        return f.emit(SelectScatter(axis=self.axis, index=self.index), [base, src], hint)


@dataclass(frozen=True)
class ViewReshape(ViewOp, Reshape):
    """x.view(shape): only where torch can view the operand's strides (`ir.analysis.inplace` checks)."""

    name: ClassVar[str] = "view_reshape"
    movement: ClassVar[type[Op] | None] = Reshape

    def torch(self, x: Tensor) -> Tensor:
        return x.view(self.shape)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        Reshape.onnx(self, b, ins, outs)

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        return f.emit(Reshape(shape=tuple(f.type(base).shape)), [src], hint)

    def pure_read(self, x: TensorType) -> Op | None:
        return None if tuple(self.shape) == tuple(x.shape) else Reshape(shape=self.shape)


@dataclass(frozen=True)
class ViewPermute(ViewOp, Transpose):
    """x.permute(perm)."""

    name: ClassVar[str] = "view_permute"
    movement: ClassVar[type[Op] | None] = Transpose

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        Transpose.onnx(self, b, ins, outs)

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        inverse = [0] * len(self.perm)
        for i, p in enumerate(self.perm):
            inverse[p] = i
        return f.emit(Transpose(perm=tuple(inverse)), [src], hint)

    def pure_read(self, x: TensorType) -> Op | None:
        return None if list(self.perm) == sorted(self.perm) else Transpose(perm=self.perm)


def _diag_len(s1: Dim, s2: Dim, offset: int) -> Dim:
    """Length of the diagonal `offset` of an (s1, s2) matrix (may be <= 0: no diagonal)."""
    return _min(s1, s2 - offset) if offset >= 0 else _min(s1 + offset, s2)


def _min(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    import z3

    return z3.If(a <= b, a, b)


@dataclass(frozen=True)
class ViewDiagonal(ViewOp):
    """x.diagonal(offset, dim1, dim2): dims dim1 and dim2 go, the diagonal (length >= 1) is
    appended (numpy's and torch's convention: offset > 0 above the main diagonal)."""

    name: ClassVar[str] = "view_diagonal"
    offset: int
    dim1: int
    dim2: int

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        d1, d2 = ctx.rng.sample(range(first.rank), 2)
        return cls(offset=ctx.rng.choice((0, 0, 1, -1, 2)), dim1=d1, dim2=d2)

    def _dims_ok(self, t: TensorType) -> bool:
        return 0 <= self.dim1 < t.rank and 0 <= self.dim2 < t.rank and self.dim1 != self.dim2

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self._dims_ok(ins[0]):
            return [False]
        s = ins[0].shape
        return [_diag_len(s[self.dim1], s[self.dim2], self.offset) >= 1]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        if not self._dims_ok(ins[0]):
            return [ins[0]]
        rest = tuple(d for k, d in enumerate(s) if k not in (self.dim1, self.dim2))
        return [TensorType(rest + (_diag_len(s[self.dim1], s[self.dim2], self.offset),), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.diagonal(self.offset, self.dim1, self.dim2)

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        return f.emit(DiagonalScatter(offset=self.offset, dim1=self.dim1, dim2=self.dim2),
                      [base, src], hint)


@dataclass(frozen=True)
class ViewExpand(ViewOp):
    """x.expand(shape): size-1 dims repeated (stride 0), new leading dims. A write through a
    view that repeats elements is rejected; one that does not (only new size-1 dims) writes
    back as a reshape."""

    name: ClassVar[str] = "view_expand"
    movement: ClassVar[type[Op] | None] = Expand
    shape: tuple[int, ...]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return Expand.first_ranks()

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(shape=expand_target(ctx, first))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return expands_to(ins[0].shape, self.shape)  # Expand's, a view that repeats nothing too

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(tuple(self.shape), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.expand(self.shape)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Expand", [ins[0], b.const_i64(list(self.shape))], outs)

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        # reached only for expands that repeat nothing (the analysis rejects the others)
        return f.emit(Reshape(shape=tuple(f.type(base).shape)), [src], hint)

    def pure_read(self, x: TensorType) -> Op | None:
        if tuple(self.shape) == tuple(x.shape):
            return None
        return Expand(shape=self.shape)


@dataclass(frozen=True)
class ViewUnfold(ViewOp):
    """x.unfold(dim, size, step): windows of `size` every `step` along `dim` (which becomes
    the window count), the window appended as a new last dim. Windows overlap when
    step < size: such a view is read-only (a write through it is rejected)."""

    name: ClassVar[str] = "view_unfold"
    dim: int
    size: int
    step: int

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(dim=ctx.rng.randrange(first.rank), size=ctx.sym("win"),
                   step=ctx.rng.choice((1, 2, 2, 3)))

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not 0 <= self.dim < ins[0].rank:
            return [False]
        return [self.size >= 1, self.size <= ins[0].shape[self.dim], self.step >= 1]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        if not 0 <= self.dim < ins[0].rank:
            return [ins[0]]
        n = floordiv(s[self.dim] - self.size, self.step) + 1
        return [TensorType(s[: self.dim] + (n,) + s[self.dim + 1:] + (self.size,), ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.unfold(self.dim, self.size, self.step)

    def scatter(self, f: FunctionalEmitter, base: str, src: str, hint: str) -> str:
        return f.emit(UnfoldScatter(dim=self.dim, size=self.size, step=self.step), [base, src], hint)


# ---- scatters: pure inverses of the views -----------------------------------------------------


@dataclass(frozen=True)
class Scatter(Op):
    """scatter(base, src): `base` with the elements of `view()` of it replaced by `src`, which
    has the view's type. Pure; the functionalization's write-back of a view."""

    family: ClassVar[str] = "view"
    arity: ClassVar[int] = 2
    generic: ClassVar[bool] = False
    saves_for_backward: ClassVar[bool] = False
    exact: ClassVar[bool] = True  # data movement

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL, n_inputs)

    def view(self) -> ViewOp:
        raise NotImplementedError

    def requires(self, ins: Sequence[TensorType]) -> list:
        base, src = ins
        cons = list(self.view().requires([base]))
        if not all(c is True for c in cons):
            return cons
        want = self.view().infer([base])[0]
        # zip strict=False: ranks may differ: the first constraint is then False
        return [src.rank == want.rank] + [eq(a, b) for a, b in zip(src.shape, want.shape, strict=False)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def torch(self, base: Tensor, src: Tensor) -> Tensor:
        out = base.clone()
        self.view().torch(out).copy_(src)
        return out

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        shape = b.shape_of(ins[0])
        onnx_flat_scatter(b, ins[0], ins[1], positions(self.view(), shape), shape, outs[0])


@dataclass(frozen=True)
class SliceScatter(Scatter):
    name: ClassVar[str] = "slice_scatter"
    axis: int
    start: int
    end: int
    step: int

    def view(self) -> ViewOp:
        return ViewSlice(axis=self.axis, start=self.start, end=self.end, step=self.step)

    def torch(self, base: Tensor, src: Tensor) -> Tensor:
        import torch

        return torch.slice_scatter(base, src, self.axis, self.start, self.end, self.step)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        base, src = ins
        src_shape = list(b.shape_of(src))
        along = self.start + self.step * np.arange(src_shape[self.axis], dtype=np.int64)
        idx = np.broadcast_to(along.reshape([-1 if k == self.axis else 1 for k in range(len(src_shape))]),
                              src_shape)
        b.node("ScatterElements", [base, b.const(np.ascontiguousarray(idx)), src], outs, axis=self.axis)


@dataclass(frozen=True)
class SelectScatter(Scatter):
    name: ClassVar[str] = "select_scatter"
    axis: int
    index: int

    def view(self) -> ViewOp:
        return ViewSelect(axis=self.axis, index=self.index)

    def torch(self, base: Tensor, src: Tensor) -> Tensor:
        import torch

        return torch.select_scatter(base, src, self.axis, self.index)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        base, src = ins
        shape = list(b.shape_of(base))
        shape[self.axis] = 1
        up = b.fresh("up")
        b.node("Unsqueeze", [src, b.const_i64([self.axis])], [up])
        idx = np.full(shape, self.index, dtype=np.int64)
        b.node("ScatterElements", [base, b.const(idx), up], outs, axis=self.axis)


@dataclass(frozen=True)
class DiagonalScatter(Scatter):
    name: ClassVar[str] = "diagonal_scatter"
    offset: int
    dim1: int
    dim2: int

    def view(self) -> ViewOp:
        return ViewDiagonal(offset=self.offset, dim1=self.dim1, dim2=self.dim2)

    def torch(self, base: Tensor, src: Tensor) -> Tensor:
        import torch

        return torch.diagonal_scatter(base, src, self.offset, self.dim1, self.dim2)


@dataclass(frozen=True)
class UnfoldScatter(Scatter):
    """Windows must not overlap (step >= size, or a single window): each base element is
    written at most once."""

    name: ClassVar[str] = "unfold_scatter"
    dim: int
    size: int
    step: int

    def view(self) -> ViewOp:
        return ViewUnfold(dim=self.dim, size=self.size, step=self.step)

    def requires(self, ins: Sequence[TensorType]) -> list:
        length = ins[0].shape[self.dim] if 0 <= self.dim < ins[0].rank else 0
        return super().requires(ins) + [Or(self.step >= self.size, length - self.size < self.step)]


@dataclass(frozen=True)
class Clone(Op):
    """A copy (torch `clone`, ONNX Identity): a new value with the operand's contents."""

    name: ClassVar[str] = "clone"
    family: ClassVar[str] = "shape"
    exact: ClassVar[bool] = True
    generic: ClassVar[bool] = False
    saves_for_backward: ClassVar[bool] = False

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL, n_inputs)

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def torch(self, x: Tensor) -> Tensor:
        return x.clone()

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Identity", ins, outs)

