"""Indexing ops: gather (indices as an attribute), topk (values and indices) and triu/tril.

  - gather's indices are an attribute of symbols constrained to [0, size), materialized as an
    int64 constant in both forms, so they can never be out of range.
  - topk is sorted; which index a tie yields differs between implementations, so (on floats) the
    k largest values and the next one must differ pairwise by the margin. Integer inputs tie
    exactly and often, so topk is declared for floats only. The margin also keeps its gradient
    well-defined (it goes to the selected elements), so topk has no `kinks` of its own.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, SourceNode, norm_axis
from ir.core.op import Op, Signature
from ir.core.types import TensorType
from ir.ops.common import ALL, FLOATS, AxisOp, distinct_sorted, float_only, nonempty, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class Gather(AxisOp):
    """x.index_select(axis, indices) == ONNX Gather with 1-D indices (repeats allowed)."""

    name: ClassVar[str] = "gather"
    family: ClassVar[str] = "index"
    exact: ClassVar[bool] = True  # a selection
    saves_for_backward: ClassVar[bool] = False  # torch saves the indices, a constant of its own
    indices: tuple[int, ...]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        n = ctx.rng.randint(1, 4)
        return cls(axis=ctx.rng.randrange(first.rank), indices=tuple(ctx.sym("ix") for _ in range(n)))

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self.axis_ok(ins[0]):
            return [False]
        size = ins[0].shape[self.axis]
        return [c for i in self.indices for c in (i >= 0, i < size)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s = ins[0].shape
        return [TensorType(s[: self.axis] + (len(self.indices),) + s[self.axis + 1:], ins[0].dtype)]

    def torch(self, x: Tensor) -> Tensor:
        import torch

        return x.index_select(self.axis, torch.tensor(self.indices, dtype=torch.int64))

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Gather", [ins[0], b.const_i64(list(self.indices))], outs, axis=self.axis)


@dataclass(frozen=True)
class TopK(AxisOp):
    """(values, indices) of the k largest (or smallest) along `axis`, sorted; indices int64."""

    name: ClassVar[str] = "topk"
    family: ClassVar[str] = "index"
    exact: ClassVar[bool] = True  # a selection
    fragile_when_iterated: ClassVar[bool] = True  # ties
    num_results: ClassVar[int] = 2
    k: int
    largest: bool

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d,), (d, DType.int64)) for d in sorted(FLOATS, key=lambda d: d.value)]

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randrange(first.rank), k=ctx.sym("k"), largest=ctx.rng.random() < 0.7)

    def requires(self, ins: Sequence[TensorType]) -> list:
        if not self.axis_ok(ins[0]):
            return [False]
        return [self.k >= 1, self.k <= ins[0].shape[self.axis]]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        s, d = ins[0].shape, ins[0].dtype
        shape = s[: self.axis] + (self.k,) + s[self.axis + 1:]
        return [TensorType(shape, d), TensorType(shape, DType.int64)]

    @float_only
    def domain(self, x: Tensor) -> list[Tensor]:
        return nonempty([distinct_sorted(x, self.axis, self.k, self.largest)])

    def torch(self, x: Tensor) -> tuple[Tensor, Tensor]:
        import torch

        values, indices = torch.topk(x, self.k, dim=self.axis, largest=self.largest, sorted=True)
        return values, indices

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("TopK", [ins[0], b.const_i64([self.k])], outs, axis=self.axis, largest=int(self.largest),
               sorted=1)


@dataclass(frozen=True)
class Trilu(Op):
    """Keep the upper (triu) or lower (tril) triangle of the last two dims from diagonal k."""

    family: ClassVar[str] = "index"
    upper: ClassVar[bool]
    exact: ClassVar[bool] = True  # a selection
    saves_for_backward: ClassVar[bool] = False
    k: int

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(ALL)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(k=ctx.rng.randint(-2, 2))

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [ins[0].rank >= 2]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def torch(self, x: Tensor) -> Tensor:
        import torch

        return (torch.triu if self.upper else torch.tril)(x, self.k)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Trilu", [ins[0], b.const_i64(self.k)], outs, upper=int(self.upper))


@dataclass(frozen=True)
class Triu(Trilu):
    name: ClassVar[str] = "triu"
    upper: ClassVar[bool] = True


@dataclass(frozen=True)
class Tril(Trilu):
    name: ClassVar[str] = "tril"
    upper: ClassVar[bool] = False


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _gather(cls: type[Gather], node: SourceNode) -> Imported | None:
    """index_select(x, dim, index) / Gather(x, index) with a constant 1-D index."""
    x = node.type(0)
    if node.target.startswith("aten."):
        axis, idx = norm_axis(node.arg(1), x.rank), node.const(2)
    else:
        axis, idx = norm_axis(node.attr("axis", 0), x.rank), node.const(1)
    if idx is None or idx.ndim != 1:
        return None
    size = int(x.shape[axis])
    indices = tuple(int(i) + size if i < 0 else int(i) for i in idx)
    return Imported.one(cls(axis=axis, indices=indices), node.tensor(0))


Gather.aten_imports = ("aten.index_select.default",)
Gather.onnx_imports = ("Gather",)
Gather.from_aten = classmethod(_gather)  # type: ignore[method-assign,assignment]
Gather.from_onnx = classmethod(_gather)  # type: ignore[method-assign,assignment]


def _topk_aten(cls: type[TopK], node: SourceNode) -> Imported | None:
    if not node.arg(4, True):
        return None
    return Imported.one(cls(axis=norm_axis(node.arg(2, -1), node.type(0).rank), k=node.arg(1),
                            largest=bool(node.arg(3, True))), node.tensor(0))


def _topk_onnx(cls: type[TopK], node: SourceNode) -> Imported | None:
    k = node.arg(1)
    if k is None or not node.attr("sorted", 1):
        return None
    k = int(k[0]) if isinstance(k, (list, tuple)) else int(k)
    return Imported.one(cls(axis=norm_axis(node.attr("axis", -1), node.type(0).rank), k=k,
                            largest=bool(node.attr("largest", 1))), node.tensor(0))


TopK.aten_imports = ("aten.topk.default",)
TopK.onnx_imports = ("TopK",)
TopK.from_aten = classmethod(_topk_aten)  # type: ignore[method-assign,assignment]
TopK.from_onnx = classmethod(_topk_onnx)  # type: ignore[method-assign,assignment]


def _trilu_aten(cls: type[Trilu], node: SourceNode) -> Imported | None:
    return Imported.one(cls(k=int(node.arg(1, 0))), node.tensor(0))


def _trilu_onnx(cls: type[Trilu], node: SourceNode) -> Imported | None:
    if bool(node.attr("upper", 1)) != cls.upper:
        return None
    k = node.arg(1, 0) if node.n_given > 1 else 0
    if k is None:
        return None
    return Imported.one(cls(k=int(k)), node.tensor(0))


for _tcls in (Triu, Tril):
    _tcls.aten_imports = (f"aten.{_tcls.name}.default",)
    _tcls.onnx_imports = ("Trilu",)
    _tcls.from_aten = classmethod(_trilu_aten)  # type: ignore[method-assign,assignment]
    _tcls.from_onnx = classmethod(_trilu_onnx)  # type: ignore[method-assign,assignment]
