"""In-place ops: instructions that overwrite an operand's storage (operand 0, the destination)
and return it, as torch's `x.add_(y)` returns `x`; and the pure ops functionalization rewrites
them into (`fill`, `masked_fill`, `index_put`; the view scatters are in `ir.ops.views`).

    %r = add_(%x, %y) : f32[2,3]

writes x + y into %x's storage. %r and %x then name the same tensor: a later reader of either,
or of any other view of that storage, sees the new contents (torch eager's semantics; see
docs/inplace.md and `ir.analysis.inplace`, the analysis that judges aliasing and functionalizes).

  - add_, sub_, mul_, div_ (x, y): y broadcasts to x's shape exactly; the result dtype is
    torch's (`torch.result_type`, true division for div_) and must be castable to x's
    (`torch.can_cast`): an int destination of a float result is refused, as torch does.
  - clamp_[lo, hi], relu_, sigmoid_ (x): sigmoid_ on ints is refused (a float result);
    clamp_ on ints needs integral bounds (passed to torch as ints).
  - copy_(x, y): y broadcast and cast to x (any cast the `cast` op allows);
  - fill_[value](x), masked_fill_[value](x, mask): value cast to x's dtype as torch does;
  - index_put_[depth, indices, accumulate](x, v): x[i0, .., i(depth-1)] = v (or += v) for
    the `indices` points (flattened, `depth` coordinates each); without accumulate the points
    must be distinct (torch leaves duplicates undefined);
  - setitem[starts, ends, steps](x, y): `x[a:b:c, i, ...] = y` on the leading axes: step 0
    means the integer index `starts[k]` (the axis goes away), else a slice. y is broadcast and
    cast to the indexed region, which is the written memory (a view of x).

Local type rules that torch enforces at run time are `problem`s with a message of their own
(the verifier reports them); the aliasing rules (overlaps, writes to inputs of bodies, ...)
are the analysis's. None of these ops reaches ONNX: ONNX is built from the functionalized
graph. Their numerical validity is likewise judged on the functionalized graph.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ir.core.dtypes import DType
from ir.core.importing import Imported, SourceNode
from ir.core.op import Effect, Op, OpError, Signature, Slot
from ir.core.shapes import And, Cond, Dim, Or, eq
from ir.core.types import TensorType
from ir.ops.binary import Add, Div, Mul, Sub, broadcast_operand, broadcast_requires, broadcast_shape
from ir.ops.cast import CASTS, Cast
from ir.ops.common import ALL, NUMERIC, FunctionalEmitter, const_like, ordered, same_dtype
from ir.ops.elementwise import Clip, Relu, Sigmoid
from ir.ops.shape import Expand
from ir.ops.views import ViewOp, ViewSelect, ViewSlice

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

WRITES = Effect(writes=0)


def _shape(t: TensorType) -> str:
    return "[" + ",".join(str(d) for d in t.shape) + "]"


def _meta(t: TensorType) -> Tensor:
    import torch

    return torch.empty(tuple(t.shape), dtype=t.dtype.torch, device="meta")


def broadcast_into(dest: TensorType, src: TensorType, what: str = "operand",
                   into: str = "destination") -> str | None:
    """Why `src` cannot be broadcast to exactly `dest`'s shape (None: it can)."""
    if not all(c is True for c in broadcast_requires(dest, src)):
        return f"{what} shape {_shape(src)} does not broadcast with the {into}'s {_shape(dest)}"
    out = TensorType(broadcast_shape(dest, src), dest.dtype)
    if out.shape != dest.shape:
        return f"result shape {_shape(out)} (broadcast) differs from the {into}'s {_shape(dest)}"
    return None


def cast_problem(result: DType, dest: DType) -> str | None:
    import torch

    if not torch.can_cast(result.torch, dest.torch):
        return f"result dtype {result.short} cannot be written into a destination of dtype {dest.short}"
    return None


def _dtype_of(t: torch.dtype) -> DType:
    return next(d for d in DType if d.torch == t)


def castable(src: DType, dest: DType) -> bool:
    """`copy_`/`setitem` casts: those the `cast` op allows (no float -> int/bool)."""
    return src == dest or dest in CASTS[src]


@dataclass(frozen=True)
class InPlace(Op):
    """Writes operand 0 (the destination) and returns it."""

    family: ClassVar[str] = "inplace"
    effect: ClassVar[Effect] = WRITES
    generic: ClassVar[bool] = False
    #: the results are the destination, written with the pure op's results (exact or not,
    #: the numerical checks see the pure op: they run on the functionalized graph)
    exact: ClassVar[bool] = True
    #: an operand that is exactly the written tensor (the same elements in the same layout) is
    #: fine: every element is read before it is written (`x.add_(x)`); otherwise any overlap
    #: between a read operand and the written memory is rejected
    elementwise: ClassVar[bool] = True

    def __init_subclass__(cls, **kw: Any) -> None:
        """A subclass that names its `pure` op (add_: add) is registered as that op's
        `inplace_twin`, and imports the in-place forms of the ATen ops the pure one imports
        (`aten.add_.Tensor` for `aten.add.Tensor`), with the pure op's rule: the same operands
        and attributes."""
        super().__init_subclass__(**kw)
        pure = cls.__dict__.get("pure")
        if pure is None:
            return
        pure.inplace_twin = cls
        if "aten_imports" not in cls.__dict__:
            base = f"aten.{cls.name.removesuffix('_')}."
            cls.aten_imports = tuple(f"aten.{cls.name}.{s[len(base):]}"
                                     for s in pure.aten_imports if s.startswith(base))
            if cls.aten_imports and "from_aten" not in cls.__dict__:
                cls.from_aten = classmethod(pure.from_aten.__func__)  # type: ignore[assignment]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def written_region(self, dest: TensorType) -> list[ViewOp]:
        """The views of the destination (applied in order) whose memory the op writes; [] for
        all of it."""
        return []

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        """Emit pure ops (through `f`, an `ir.analysis.inplace.Emitter`) computing the new contents of
        the written region from its current contents (`region`) and the current values of the
        operands (`args`, the destination first); returns their name."""
        raise NotImplementedError

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        raise OpError(f"{self.name} writes in place: ONNX is built from the functionalized graph "
                      "(ir.analysis.inplace.functionalize)")


def _fit(f: FunctionalEmitter, src: str, dest: TensorType, hint: str) -> str:
    """`src` cast to `dest`'s dtype and broadcast to its shape (copy_ semantics)."""
    t = f.type(src)
    if t.dtype != dest.dtype:
        src = f.emit(Cast(to=dest.dtype), [src], hint)
    if tuple(t.shape) != tuple(dest.shape):
        src = f.emit(Expand(shape=tuple(dest.shape)), [src], hint)
    return src


# ---- arithmetic -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BinaryInPlace(InPlace):
    arity: ClassVar[int] = 2
    #: the pure op whose result this op writes into operand 0 (its `inplace_twin`)
    pure: ClassVar[type[Op]]
    #: torch refuses a bool operand (subtraction)
    no_bool: ClassVar[bool] = False
    true_division: ClassVar[bool] = False

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, e), (d,)) for d in ordered(NUMERIC) for e in ordered(ALL)]

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        from ir.core.op import Slot

        return [Slot(tuple(range(first.rank + 1)), param=None)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return broadcast_operand(first, dtype, ctx)

    def requires(self, ins: Sequence[TensorType]) -> list:
        return broadcast_requires(ins[0], ins[1])

    def common(self, dest: TensorType, src: TensorType) -> DType:
        import torch

        d = torch.result_type(_meta(dest), _meta(src))
        if self.true_division and not d.is_floating_point:
            d = torch.get_default_dtype()
        return _dtype_of(d)

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        dest, src = ins
        if self.no_bool and DType.bool in (dest.dtype, src.dtype):
            return f"{self.name} of a bool operand: torch refuses subtraction with bool"
        return broadcast_into(dest, src) or cast_problem(self.common(dest, src), dest.dtype)

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        dest, src = f.type(region), f.type(args[1])
        common = self.common(dest, src)
        a = region if dest.dtype == common else f.emit(Cast(to=common), [region], hint)
        b = args[1] if src.dtype == common else f.emit(Cast(to=common), [args[1]], hint)
        out = f.emit(self.pure(), [a, b], hint)
        return out if common == dest.dtype else f.emit(Cast(to=dest.dtype), [out], hint)

    def torch(self, x: Tensor, y: Tensor) -> Tensor:
        getattr(x, self.name)(y)
        return x


@dataclass(frozen=True)
class AddInPlace(BinaryInPlace):
    name: ClassVar[str] = "add_"
    pure: ClassVar[type[Op]] = Add
    saves_for_backward: ClassVar[bool] = False


@dataclass(frozen=True)
class SubInPlace(BinaryInPlace):
    name: ClassVar[str] = "sub_"
    pure: ClassVar[type[Op]] = Sub
    no_bool: ClassVar[bool] = True
    saves_for_backward: ClassVar[bool] = False


@dataclass(frozen=True)
class MulInPlace(BinaryInPlace):
    name: ClassVar[str] = "mul_"
    pure: ClassVar[type[Op]] = Mul


@dataclass(frozen=True)
class DivInPlace(BinaryInPlace):
    """True division (an int destination is refused: the result is float)."""

    name: ClassVar[str] = "div_"
    pure: ClassVar[type[Op]] = Div
    true_division: ClassVar[bool] = True


@dataclass(frozen=True)
class UnaryInPlace(InPlace):
    #: the pure op whose result this op writes into operand 0, with the same attributes (its
    #: `inplace_twin`)
    pure: ClassVar[type[Op]]
    #: the result is float whatever the input (sigmoid)
    float_result: ClassVar[bool] = False

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(NUMERIC)

    def pure_op(self) -> Op:
        return self.pure()

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        if self.float_result and not ins[0].dtype.is_float:
            return cast_problem(DType.float32, ins[0].dtype)
        return None

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        return f.emit(self.pure_op(), [region], hint)

    def kinks(self, x: Tensor) -> list[Tensor]:
        """The pure op's (relu_ bends where relu does, clamp_ where clip does). The checks see
        the pure op anyway: they run on the functionalized graph."""
        return self.pure_op().kinks(x)

    def torch(self, x: Tensor) -> Tensor:
        getattr(x, self.name)()
        return x


@dataclass(frozen=True)
class ReluInPlace(UnaryInPlace):
    name: ClassVar[str] = "relu_"
    pure: ClassVar[type[Op]] = Relu


@dataclass(frozen=True)
class SigmoidInPlace(UnaryInPlace):
    name: ClassVar[str] = "sigmoid_"
    pure: ClassVar[type[Op]] = Sigmoid
    float_result: ClassVar[bool] = True


@dataclass(frozen=True)
class ClampInPlace(UnaryInPlace):
    """x.clamp_(lo, hi), lo <= hi; bounds are passed to torch as ints when integral and the
    destination is an int (torch refuses float bounds on an int destination)."""

    name: ClassVar[str] = "clamp_"
    pure: ClassVar[type[Op]] = Clip
    lo: float
    hi: float

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        clip = Clip.sample(ctx, first)  # the same bounds (see Clip: off integers and halves)
        return cls(lo=clip.lo, hi=clip.hi)

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [self.lo <= self.hi]

    def _integral(self) -> bool:
        return self.lo == int(self.lo) and self.hi == int(self.hi)

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        if ins[0].dtype.is_int and not self._integral():
            return cast_problem(DType.float32, ins[0].dtype)
        return None

    def pure_op(self) -> Op:
        return Clip(lo=self.lo, hi=self.hi)

    def torch(self, x: Tensor) -> Tensor:
        if not x.dtype.is_floating_point and self._integral():
            return x.clamp_(int(self.lo), int(self.hi))
        return x.clamp_(self.lo, self.hi)


# ---- copies and fills -------------------------------------------------------------------------


@dataclass(frozen=True)
class CopyInPlace(InPlace):
    """x.copy_(y): y broadcast to x's shape and cast to its dtype."""

    name: ClassVar[str] = "copy_"
    arity: ClassVar[int] = 2
    saves_for_backward: ClassVar[bool] = False

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, e), (d,)) for d in ordered(ALL) for e in ordered(ALL) if castable(e, d)]

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        from ir.core.op import Slot

        return [Slot(tuple(range(first.rank + 1)), param=None)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return broadcast_operand(first, dtype, ctx)

    def requires(self, ins: Sequence[TensorType]) -> list:
        return broadcast_requires(ins[0], ins[1])

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        return broadcast_into(ins[0], ins[1], "source")

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        return _fit(f, args[1], f.type(region), hint)

    def torch(self, x: Tensor, y: Tensor) -> Tensor:
        return x.copy_(y)


@dataclass(frozen=True)
class FillInPlace(InPlace):
    """x.fill_(value): value cast to x's dtype (truncated for ints, nonzero for bool)."""

    name: ClassVar[str] = "fill_"
    saves_for_backward: ClassVar[bool] = False
    value: float

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(value=_sample_value(ctx, first.dtype))

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        return f.emit(Fill(value=self.value), [region], hint)

    def torch(self, x: Tensor) -> Tensor:
        return x.fill_(self.value)


def _sample_value(ctx: SampleContext, dtype: DType) -> float:
    if dtype is DType.bool:
        return float(ctx.rng.randint(0, 1))
    if dtype.is_int:
        return float(ctx.rng.randint(-3, 3))
    return ctx.rng.choice((-1.5, -0.25, 0.0, 0.75, 2.0))


@dataclass(frozen=True)
class MaskedFillInPlace(InPlace):
    """x.masked_fill_(mask, value): the mask broadcasts to x's shape exactly."""

    name: ClassVar[str] = "masked_fill_"
    arity: ClassVar[int] = 2
    value: float

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, DType.bool), (d,)) for d in ordered(ALL)]

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        from ir.core.op import Slot

        return [Slot(tuple(range(first.rank + 1)), param=False)]

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(value=_sample_value(ctx, first.dtype))

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return broadcast_operand(first, dtype, ctx)

    def requires(self, ins: Sequence[TensorType]) -> list:
        return broadcast_requires(ins[0], ins[1])

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        return broadcast_into(ins[0], ins[1], "mask")

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        return f.emit(MaskedFill(value=self.value), [region, args[1]], hint)

    def torch(self, x: Tensor, mask: Tensor) -> Tensor:
        return x.masked_fill_(mask, self.value)


# ---- indexed writes ---------------------------------------------------------------------------


def _ne(a: Dim, b: Dim) -> Cond:
    return a != b  # a Python bool for ints, a z3 term for symbols


@dataclass(frozen=True)
class IndexPutBase(Op):
    """Shared by index_put_ and index_put: `indices` holds n points of `depth` coordinates
    (flattened), indexing x's leading `depth` axes; v broadcasts to [n, *x.shape[depth:]]."""

    arity: ClassVar[int] = 2
    # torch saves the indices only, a constant of its own (the points are distinct or accumulated,
    # so the gradient is well-defined: no kinks)
    saves_for_backward: ClassVar[bool] = False
    depth: int
    indices: tuple[int, ...]
    accumulate: bool

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL, 2)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        from ir.core.op import Slot

        return [Slot(tuple(range(first.rank)), param=None)]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        depth = ctx.rng.randint(1, min(2, first.rank))
        n = ctx.rng.randint(1, 4)
        accumulate = ctx.rng.random() < 0.5 and first.dtype is not DType.bool
        return cls(depth=depth, indices=tuple(ctx.sym("ip") for _ in range(n * depth)),
                   accumulate=accumulate)

    def points(self) -> list[tuple[int, ...]]:
        d = self.depth
        return [tuple(self.indices[k:k + d]) for k in range(0, len(self.indices), d)]

    def values_type(self, x: TensorType) -> TensorType:
        return TensorType((len(self.indices) // self.depth, *x.shape[self.depth:]), x.dtype)

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return broadcast_operand(self.values_type(first), dtype, ctx)

    def requires(self, ins: Sequence[TensorType]) -> list:
        x = ins[0]
        if not 1 <= self.depth <= x.rank or not self.indices or len(self.indices) % self.depth:
            return [False]
        # zip strict=False: a point indexes the first `depth` dims only
        cons = [c for p in self.points() for i, d in zip(p, x.shape, strict=False) for c in (i >= 0, i < d)]
        cons += broadcast_requires(self.values_type(x), ins[1])
        if not self.accumulate:  # distinct points (the generator solves for them)
            pts = self.points()
            cons += [Or(*(_ne(a, b) for a, b in zip(p, q, strict=True)))
                     for k, p in enumerate(pts) for q in pts[k + 1:]]
        else:
            cons.append(x.dtype is not DType.bool)
        return cons

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        x, v = ins
        if not 1 <= self.depth <= x.rank or not self.indices or len(self.indices) % self.depth:
            return None  # `requires` reports it
        for p in self.points():
            # zip strict=False: a point indexes the first `depth` dims only
            if any(not 0 <= i < d for i, d in zip(p, x.shape, strict=False)):
                return f"index {list(p)} is out of range for the destination's shape {_shape(x)}"
        if self.accumulate and x.dtype is DType.bool:
            return "accumulate into a bool destination is not supported"
        want = self.values_type(x)
        if not all(c is True for c in broadcast_requires(want, v)) or \
                TensorType(broadcast_shape(want, v), v.dtype).shape != want.shape:
            return f"values shape {_shape(v)} does not broadcast to the indexed shape {_shape(want)}"
        if not self.accumulate:
            seen = set()
            for p in self.points():
                if p in seen:
                    return (f"index {list(p)} is written twice without accumulate: torch leaves "
                            f"the result undefined")
                seen.add(p)
        return None

    def _torch_indices(self) -> tuple[Tensor, ...]:
        import torch

        pts = self.points()
        return tuple(torch.tensor([p[k] for p in pts], dtype=torch.int64) for k in range(self.depth))


@dataclass(frozen=True)
class IndexPutInPlace(IndexPutBase, InPlace):
    name: ClassVar[str] = "index_put_"
    elementwise: ClassVar[bool] = False

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        return f.emit(IndexPut(depth=self.depth, indices=self.indices, accumulate=self.accumulate),
                      [region, args[1]], hint)

    def torch(self, x: Tensor, v: Tensor) -> Tensor:
        return x.index_put_(self._torch_indices(), v, accumulate=self.accumulate)


@dataclass(frozen=True)
class SetItem(InPlace):
    """`x[idx] = y` on the leading len(starts) axes: per axis k, step 0 is the integer index
    starts[k] (ends[k] = starts[k] + 1), else the slice starts[k]:ends[k]:steps[k]."""

    name: ClassVar[str] = "setitem"
    arity: ClassVar[int] = 2
    saves_for_backward: ClassVar[bool] = False
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    steps: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, e), (d,)) for d in ordered(ALL) for e in ordered(ALL) if castable(e, d)]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        from ir.core.op import Slot

        return [Slot(tuple(range(first.rank + 1)), param=None)]

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        m = ctx.rng.randint(1, first.rank)
        steps = tuple(ctx.rng.choice((0, 1, 1, 2)) for _ in range(m))
        starts = tuple(ctx.sym("st") for _ in range(m))
        ends = tuple(s + 1 if k == 0 else ctx.sym("en") for s, k in zip(starts, steps, strict=True))
        return cls(starts=starts, ends=ends, steps=steps)

    def _ok(self, x: TensorType) -> bool:
        m = len(self.starts)
        return 1 <= m <= x.rank and len(self.ends) == m and len(self.steps) == m and \
            all(isinstance(s, int) and s >= 0 for s in self.steps)

    def requires(self, ins: Sequence[TensorType]) -> list:
        x = ins[0]
        if not self._ok(x):
            return [False]
        cons: list = []
        # zip strict=False: the slices cover the first len(starts) dims only
        for a, b, s, d in zip(self.starts, self.ends, self.steps, x.shape, strict=False):
            cons += [a >= 0, a < b, b <= d] if s else [a >= 0, a < d, eq(b, a + 1)]
        return cons

    def region_views(self) -> list[ViewOp]:
        out: list[ViewOp] = []
        for k in reversed(range(len(self.starts))):  # last axis first: earlier axes keep their number
            a, b, s = self.starts[k], self.ends[k], self.steps[k]
            out.append(ViewSelect(axis=k, index=a) if s == 0 else ViewSlice(axis=k, start=a, end=b, step=s))
        return out

    def region_type(self, x: TensorType) -> TensorType:
        t = x
        for v in self.region_views():
            t = v.infer([t])[0]
        return t

    def written_region(self, dest: TensorType) -> list[ViewOp]:
        return self.region_views()

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return broadcast_operand(self.region_type(first), dtype, ctx)

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        x, y = ins
        if not self._ok(x) or not all(c is True for c in self.requires(ins)):
            return None  # `requires` reports it
        return broadcast_into(self.region_type(x), y, "source", "indexed region")

    def functional(self, f: FunctionalEmitter, region: str, args: list[str], hint: str) -> str:
        return _fit(f, args[1], f.type(region), hint)

    def torch(self, x: Tensor, y: Tensor) -> Tensor:
        x[tuple(a if s == 0 else slice(a, b, s)
                for a, b, s in zip(self.starts, self.ends, self.steps, strict=True))] = y
        return x


# ---- pure counterparts -------------------------------------------------------------------------


@dataclass(frozen=True)
class Fill(Op):
    """A tensor like x filled with value (cast to x's dtype as torch's fill_ casts)."""

    name: ClassVar[str] = "fill"
    family: ClassVar[str] = "shape"
    exact: ClassVar[bool] = True
    generic: ClassVar[bool] = False
    saves_for_backward: ClassVar[bool] = False
    value: float

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL)

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def torch(self, x: Tensor) -> Tensor:
        import torch

        return torch.full_like(x, self.value)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        shape = b.fresh("shape")
        b.node("Shape", ins, [shape])
        b.node("Expand", [const_like(b, self.value, ins[0]), shape], outs)


@dataclass(frozen=True)
class MaskedFill(Op):
    """where(mask, value, x); the mask broadcasts to x's shape exactly."""

    name: ClassVar[str] = "masked_fill"
    family: ClassVar[str] = "binary"
    exact: ClassVar[bool] = True  # a selection
    arity: ClassVar[int] = 2
    generic: ClassVar[bool] = False
    value: float

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, DType.bool), (d,)) for d in ordered(ALL)]

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, m = ins
        cons = broadcast_requires(x, m)
        # zip strict=False: ranks may differ: the rank constraint after it is then False
        return cons + [And(*(eq(a, b) for a, b in zip(broadcast_shape(x, m), x.shape, strict=False))),
                       len(broadcast_shape(x, m)) == x.rank]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def torch(self, x: Tensor, mask: Tensor) -> Tensor:
        return x.masked_fill(mask, self.value)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        x, mask = ins
        if b.types[x].dtype is DType.bool:  # ORT has no bool Where: mask | x, or ~mask & x
            if self.value:
                b.node("Or", [mask, x], outs)
            else:
                keep = b.fresh("keep")
                b.node("Not", [mask], [keep])
                b.node("And", [keep, x], outs)
            return
        b.node("Where", [mask, const_like(b, self.value, x), x], outs)


@dataclass(frozen=True)
class IndexPut(IndexPutBase):
    """x with x[points] = v (or += v with accumulate): torch index_put, ONNX ScatterND."""

    name: ClassVar[str] = "index_put"
    family: ClassVar[str] = "index"
    #: a selection (the sums of `accumulate` round, but the reference does not perturb them)
    exact: ClassVar[bool] = True
    generic: ClassVar[bool] = False

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def torch(self, x: Tensor, v: Tensor) -> Tensor:
        return x.index_put(self._torch_indices(), v, accumulate=self.accumulate)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        x, v = ins
        want = self.values_type(TensorType(tuple(b.shape_of(x)), DType.float32))
        upd = v
        if tuple(b.shape_of(v)) != tuple(want.shape):
            upd = b.fresh("upd")
            b.node("Expand", [v, b.const_i64(list(want.shape))], [upd])
        idx = np.asarray(self.points(), dtype=np.int64).reshape(-1, self.depth)
        attrs = {"reduction": "add"} if self.accumulate else {}
        b.node("ScatterND", [x, b.const(idx), upd], outs, **attrs)


INPLACE_OPS: tuple[type[InPlace], ...] = (
    AddInPlace, SubInPlace, MulInPlace, DivInPlace, ClampInPlace, ReluInPlace, SigmoidInPlace,
    CopyInPlace, FillInPlace, MaskedFillInPlace, IndexPutInPlace, SetItem,
)


# ---- import rules (`Op.from_aten`; ir.core.importing) -----------------------------------------
def _masked_fill_aten(cls: type[MaskedFill], node: SourceNode) -> Imported | None:
    """masked_fill.Scalar(x, mask, value) (attention masks)."""
    value = node.arg(2)
    if not isinstance(value, (int, float)):
        return None
    return Imported.one(cls(value=float(value)), node.tensor(0), node.tensor(1))


MaskedFill.aten_imports = ("aten.masked_fill.Scalar",)
MaskedFill.from_aten = classmethod(_masked_fill_aten)  # type: ignore[method-assign,assignment]
