"""Element type conversion.

Float -> int/bool casts are not generated: they are discontinuous (a last-bit difference between
two correct float results becomes an off-by-one integer), which would turn rounding into false
alarms. Int -> float, widening/narrowing within a kind, and int/bool -> bool or back are exact.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import FLOAT_DTYPES, INT_DTYPES, DType
from ir.core.importing import Imported, SourceNode
from ir.core.op import Op, Signature
from ir.core.types import TensorType

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

#: dtype -> the dtypes a cast converts it to (also what an in-place copy may convert)
CASTS: dict[DType, frozenset[DType]] = {
    **{f: FLOAT_DTYPES for f in FLOAT_DTYPES},
    **{i: INT_DTYPES | FLOAT_DTYPES | {DType.bool} for i in INT_DTYPES},
    DType.bool: frozenset(DType),
}


@dataclass(frozen=True)
class Cast(Op):
    name: ClassVar[str] = "cast"
    family: ClassVar[str] = "cast"
    exact: ClassVar[bool] = True  # correctly rounded
    saves_for_backward: ClassVar[bool] = False
    to: DType

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((src,), (dst,)) for src, dsts in CASTS.items() for dst in sorted(dsts, key=lambda d: d.value)
                if dst != src]

    def result_dtypes(self, in_dtypes: tuple[DType, ...]) -> tuple[DType, ...] | None:
        if len(in_dtypes) == 1 and self.to in CASTS[in_dtypes[0]] and self.to != in_dtypes[0]:
            return (self.to,)
        return None

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        options = sorted(CASTS[first.dtype] - {first.dtype}, key=lambda d: d.value)
        return cls(to=ctx.rng.choice(options))

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(ins[0].shape, self.to)]

    aten_imports: ClassVar[tuple[str, ...]] = ("aten.to.dtype", "aten._to_copy.default",
                                               "aten.to.dtype_layout")
    onnx_imports: ClassVar[tuple[str, ...]] = ("Cast",)

    @classmethod
    def from_aten(cls, node: SourceNode) -> Imported | None:
        out = node.out_types[0]
        return None if out is None else Imported.one(cls(to=out.dtype), node.tensor(0))

    @classmethod
    def from_onnx(cls, node: SourceNode) -> Imported | None:
        out = node.out_types[0]
        return None if out is None else Imported.one(cls(to=out.dtype), node.tensor(0))

    def torch(self, x: Tensor) -> Tensor:
        return x.to(self.to.torch)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Cast", ins, outs, to=self.to.onnx)
