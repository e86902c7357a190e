"""Reductions over one axis with keepdim (sum, mean, max, min, prod), argmax/argmin (-> int64)
and the cumulative sum.

  - torch promotes integer sum/prod/cumsum to int64; the result keeps the input dtype (as ONNX
    does) by passing `dtype=`.
  - argmax/argmin return the first extreme index (torch; ONNX select_last_index=0). On floats a
    near-tie flips with rounding, so the top two values along the axis must differ by the margin.
  - cumsum: ONNX CumSum with exclusive=0, reverse=0 and the axis as a constant input.
  - reduce_max/reduce_min in gradient tests (`kinks`): at a tie for the extreme value torch
    splits the gradient among the tied elements, other implementations give it to one of them,
    so (as for argmax) the top two values along the axis must differ by the margin.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, NotImportable, Prev, SourceNode, Step, norm_axis
from ir.core.op import Op, Signature
from ir.core.types import TensorType
from ir.ops.common import (
    FLOATS,
    NUMERIC,
    AxisOp,
    distinct_sorted,
    float_only,
    is_float,
    no_wraparound,
    nonempty,
    same_dtype,
)

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class AlongAxis(AxisOp):
    """A same-dtype op along one axis (the result has the input's type unless said otherwise)."""

    family: ClassVar[str] = "reduce"
    tolerance_factor: ClassVar[float] = 2.0  # long accumulations: summation order
    dtypes: ClassVar[frozenset[DType]] = NUMERIC

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes)

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]


@dataclass(frozen=True)
class Reduce(AlongAxis):
    onnx_name: ClassVar[str]
    keepdim: bool

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randrange(first.rank), keepdim=ctx.rng.random() < 0.5)

    def result_dtype(self, x: TensorType) -> DType:
        return x.dtype

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        out = s[: self.axis] + ((1,) if self.keepdim else ()) + s[self.axis + 1 :]
        return [TensorType(out, self.result_dtype(ins[0]))]

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node(self.onnx_name, [ins[0], b.const_i64([self.axis])], outs, keepdims=int(self.keepdim))


@dataclass(frozen=True)
class ReduceSum(Reduce):
    name: ClassVar[str] = "reduce_sum"
    onnx_name: ClassVar[str] = "ReduceSum"
    saves_for_backward: ClassVar[bool] = False

    def torch(self, x: Tensor) -> Tensor:
        return x.sum(dim=self.axis, keepdim=self.keepdim, dtype=x.dtype)


@dataclass(frozen=True)
class ReduceMean(Reduce):
    name: ClassVar[str] = "reduce_mean"
    onnx_name: ClassVar[str] = "ReduceMean"
    dtypes: ClassVar[frozenset[DType]] = FLOATS
    saves_for_backward: ClassVar[bool] = False

    def torch(self, x: Tensor) -> Tensor:
        return x.mean(dim=self.axis, keepdim=self.keepdim)


@dataclass(frozen=True)
class ReduceProd(Reduce):
    name: ClassVar[str] = "reduce_prod"
    onnx_name: ClassVar[str] = "ReduceProd"

    def domain(self, x: Tensor) -> list[Tensor]:
        """Integers: the product does not wrap around (`no_wraparound`): without a 0 along the
        axis every partial product is at most the product in magnitude; with one the product
        is exactly 0 (log2 |0| = -inf), whatever wrapped or saturated before it. Floats: none
        (the result check sees an overflow as inf)."""
        import torch

        if is_float(x) or not x.numel():
            return []
        return [no_wraparound(torch.log2(x.to(torch.float64).abs()).sum(dim=self.axis), x.dtype)]

    def torch(self, x: Tensor) -> Tensor:
        return x.prod(dim=self.axis, keepdim=self.keepdim, dtype=x.dtype)


@dataclass(frozen=True)
class Extreme(Reduce):
    """The largest (or smallest) value along the axis: continuous in the input (no domain),
    differentiable where it is attained by one element with a margin to the next."""

    largest: ClassVar[bool]
    exact: ClassVar[bool] = True  # a selection

    @float_only
    def kinks(self, x: Tensor) -> list[Tensor]:
        return nonempty([distinct_sorted(x, self.axis, 1, self.largest, zero_ties=True)])

    def torch(self, x: Tensor) -> Tensor:
        fn = x.amax if self.largest else x.amin
        return fn(dim=self.axis, keepdim=self.keepdim)


@dataclass(frozen=True)
class ReduceMax(Extreme):
    name: ClassVar[str] = "reduce_max"
    onnx_name: ClassVar[str] = "ReduceMax"
    largest: ClassVar[bool] = True


@dataclass(frozen=True)
class ReduceMin(Extreme):
    name: ClassVar[str] = "reduce_min"
    onnx_name: ClassVar[str] = "ReduceMin"
    largest: ClassVar[bool] = False


@dataclass(frozen=True)
class ArgReduce(Reduce):
    """Index of the first extreme value along the axis, as int64 (not differentiable)."""

    largest: ClassVar[bool]
    fragile_when_iterated: ClassVar[bool] = True  # ties
    saves_for_backward: ClassVar[bool] = False

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, 1, DType.int64)

    def result_dtype(self, x: TensorType) -> DType:
        return DType.int64

    @float_only
    def domain(self, x: Tensor) -> list[Tensor]:
        return nonempty([distinct_sorted(x, self.axis, 1, self.largest, zero_ties=True)])

    def torch(self, x: Tensor) -> Tensor:
        import torch

        fn = torch.argmax if self.largest else torch.argmin
        return fn(x, dim=self.axis, keepdim=self.keepdim)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node(self.onnx_name, ins, outs, axis=self.axis, keepdims=int(self.keepdim), select_last_index=0)


@dataclass(frozen=True)
class ArgMax(ArgReduce):
    name: ClassVar[str] = "argmax"
    onnx_name: ClassVar[str] = "ArgMax"
    largest: ClassVar[bool] = True


@dataclass(frozen=True)
class ArgMin(ArgReduce):
    name: ClassVar[str] = "argmin"
    onnx_name: ClassVar[str] = "ArgMin"
    largest: ClassVar[bool] = False


@dataclass(frozen=True)
class CumSum(AlongAxis):
    """Inclusive forward cumulative sum along the axis."""

    name: ClassVar[str] = "cumsum"
    saves_for_backward: ClassVar[bool] = False

    def torch(self, x: Tensor) -> Tensor:
        return x.cumsum(dim=self.axis, dtype=x.dtype)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("CumSum", [ins[0], b.const_i64(self.axis)], outs, exclusive=0, reverse=0)


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _over_axes(cls: type[Reduce], x: object, axes: list[int], keepdim: bool) -> Imported:
    """One reduction per axis, the highest first (so the others keep their places)."""
    steps: list = []
    for k, a in enumerate(sorted(set(axes), reverse=True)):
        steps.append((cls(axis=a, keepdim=keepdim), [x if k == 0 else Prev(k - 1)]))
    if not steps:
        raise NotImportable("no axes")
    return Imported.chain(steps)


def _reduce_aten(cls: type[Reduce], node: SourceNode) -> Imported | None:
    """sum.dim_IntList / mean.dim / amax / amin (x, dims, keepdim=False, dtype=None),
    prod.dim_int (x, dim, keepdim, dtype), sum.default (x): over every axis;
    adaptive_avg_pool2d/1d to size 1 (mean over the spatial axes, kept)."""
    x = node.type(0)
    if node.target.startswith("aten.adaptive_avg_pool"):
        size = node.arg(1)
        if not isinstance(size, (list, tuple)) or any(s != 1 for s in size):
            return None
        return _over_axes(cls, node.tensor(0), list(range(x.rank - len(size), x.rank)), True)
    if node.target == "aten.linalg_vector_norm.default":  # ord 2: sqrt(sum(x * x)), ord 1
        return _vector_norm(cls, node)
    if node.target in ("aten.max.dim", "aten.min.dim"):  # (values, indices)
        axis, keep = norm_axis(node.arg(1), x.rank), bool(node.arg(2, False))
        arg = ArgMax if node.target == "aten.max.dim" else ArgMin
        return Imported((Step(cls(axis=axis, keepdim=keep), (node.tensor(0),)),
                         Step(arg(axis=axis, keepdim=keep), (node.tensor(0),))),
                        outputs=(Prev(0), Prev(1)))
    if node.target in ("aten.sum.default", "aten.mean.default", "aten.max.default",
                       "aten.min.default", "aten.prod.default"):
        dims = list(range(x.rank))
        keep = False
    else:
        d = node.arg(1)
        dims = [d] if isinstance(d, int) else list(d or range(x.rank))
        keep = bool(node.arg(2, False))
    dtype = node.arg("dtype")
    if dtype is not None and dtype != x.dtype:
        return None
    return _over_axes(cls, node.tensor(0), [norm_axis(a, x.rank) for a in dims], keep)


def _vector_norm(cls: type[Reduce], node: SourceNode) -> Imported | None:
    """linalg_vector_norm(x, ord, dim, keepdim, dtype) for ord 2 (sqrt of the sum of squares)
    and 1 (the sum of magnitudes)."""
    from ir.ops.binary import Mul
    from ir.ops.elementwise import Abs, Sqrt

    x = node.type(0)
    order, dims, keep = node.arg(1, 2), node.arg(2), bool(node.arg(3, False))
    if order not in (1, 2, 1.0, 2.0) or node.arg(4) is not None:
        return None
    axes = list(range(x.rank)) if dims is None else [dims] if isinstance(dims, int) else list(dims)
    first = (Mul(), [node.tensor(0), node.tensor(0)]) if order == 2 else (Abs(), [node.tensor(0)])
    steps: list = [first]
    for a in sorted({norm_axis(a, x.rank) for a in axes}, reverse=True):
        steps.append((cls(axis=a, keepdim=keep), [Prev(len(steps) - 1)]))
    if order == 2:
        steps.append((Sqrt(), [Prev(len(steps) - 1)]))
    return Imported.chain(steps)


def _reduce_onnx(cls: type[Reduce], node: SourceNode) -> Imported | None:
    """Reduce*(x, axes) with keepdims (default 1); GlobalAveragePool: mean over the spatial axes."""
    x = node.type(0)
    if node.target == "GlobalAveragePool":
        return _over_axes(cls, node.tensor(0), list(range(2, x.rank)), True)
    axes = node.arg(1)
    if axes is None:
        axes = node.attr("axes")
    if axes is None:
        if node.attr("noop_with_empty_axes", 0):
            return None
        axes = list(range(x.rank))
    axes = [axes] if isinstance(axes, int) else list(axes)
    return _over_axes(cls, node.tensor(0), [norm_axis(a, x.rank) for a in axes],
                      bool(node.attr("keepdims", 1)))


for _cls, _aten in ((ReduceSum, ("aten.sum.dim_IntList", "aten.sum.default",
                                 "aten.linalg_vector_norm.default")),
                    (ReduceMean, ("aten.mean.dim", "aten.mean.default",
                                  "aten.adaptive_avg_pool2d.default",
                                  "aten.adaptive_avg_pool1d.default")),
                    (ReduceProd, ("aten.prod.dim_int", "aten.prod.default")),
                    (ReduceMax, ("aten.amax.default", "aten.max.dim", "aten.max.default")),
                    (ReduceMin, ("aten.amin.default", "aten.min.dim", "aten.min.default"))):
    _cls.aten_imports = _aten
    _cls.onnx_imports = (_cls.onnx_name,) + (("GlobalAveragePool",) if _cls is ReduceMean else ())
    _cls.from_aten = classmethod(_reduce_aten)  # type: ignore[method-assign,assignment]
    _cls.from_onnx = classmethod(_reduce_onnx)  # type: ignore[method-assign,assignment]


def _arg_aten(cls: type[ArgReduce], node: SourceNode) -> Imported | None:
    dim = node.arg(1)
    if dim is None or node.attrs_given - {"keepdim"}:
        return None
    return Imported.one(cls(axis=norm_axis(dim, node.type(0).rank),
                            keepdim=bool(node.arg(2, False))), node.tensor(0))


def _arg_onnx(cls: type[ArgReduce], node: SourceNode) -> Imported | None:
    if node.attr("select_last_index", 0):
        return None
    return Imported.one(cls(axis=norm_axis(node.attr("axis", 0), node.type(0).rank),
                            keepdim=bool(node.attr("keepdims", 1))), node.tensor(0))


for _acls in (ArgMax, ArgMin):
    _acls.aten_imports = (f"aten.{_acls.name}.default",)
    _acls.onnx_imports = (_acls.onnx_name,)
    _acls.from_aten = classmethod(_arg_aten)  # type: ignore[method-assign,assignment]
    _acls.from_onnx = classmethod(_arg_onnx)  # type: ignore[method-assign,assignment]


def _cumsum_aten(cls: type[CumSum], node: SourceNode) -> Imported | None:
    x = node.type(0)
    dtype = node.arg("dtype")
    if dtype is not None and dtype != x.dtype:
        return None
    return Imported.one(cls(axis=norm_axis(node.arg(1), x.rank)), node.tensor(0))


def _cumsum_onnx(cls: type[CumSum], node: SourceNode) -> Imported | None:
    axis = node.arg(1)
    if axis is None or node.attr("exclusive", 0) or node.attr("reverse", 0):
        return None
    return Imported.one(cls(axis=norm_axis(int(axis), node.type(0).rank)), node.tensor(0))


CumSum.aten_imports = ("aten.cumsum.default",)
CumSum.onnx_imports = ("CumSum",)
CumSum.from_aten = classmethod(_cumsum_aten)  # type: ignore[method-assign,assignment]
CumSum.from_onnx = classmethod(_cumsum_onnx)  # type: ignore[method-assign,assignment]
