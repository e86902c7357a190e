"""Softmax and log-softmax over one axis."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, SourceNode, norm_axis
from ir.ops.common import FLOATS
from ir.ops.reduce import AlongAxis

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder


@dataclass(frozen=True)
class Softmax(AlongAxis):
    name: ClassVar[str] = "softmax"
    family: ClassVar[str] = "softmax"
    tolerance_factor: ClassVar[float] = 2.0  # a sum along the axis: summation order
    dtypes: ClassVar[frozenset[DType]] = FLOATS
    onnx_name: ClassVar[str] = "Softmax"

    def torch(self, x: Tensor) -> Tensor:
        import torch

        return torch.softmax(x, dim=self.axis)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node(self.onnx_name, ins, outs, axis=self.axis)


@dataclass(frozen=True)
class LogSoftmax(Softmax):
    name: ClassVar[str] = "log_softmax"
    onnx_name: ClassVar[str] = "LogSoftmax"

    def torch(self, x: Tensor) -> Tensor:
        import torch

        return torch.log_softmax(x, dim=self.axis)


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _softmax_aten(cls: type[Softmax], node: SourceNode) -> Imported | None:
    """softmax.int(x, dim, dtype=None) / _softmax(x, dim, half_to_float=False)."""
    if node.attrs_given - {"dtype"} or node.arg(2) not in (None, False):
        return None
    return Imported.one(cls(axis=norm_axis(node.arg(1), node.type(0).rank)), node.tensor(0))


def _softmax_onnx(cls: type[Softmax], node: SourceNode) -> Imported | None:
    return Imported.one(cls(axis=norm_axis(node.attr("axis", -1), node.type(0).rank)),
                        node.tensor(0))


for _cls, _aten in ((Softmax, "softmax"), (LogSoftmax, "log_softmax")):
    _cls.aten_imports = (f"aten.{_aten}.int", f"aten._{_aten}.default")
    _cls.onnx_imports = (_cls.onnx_name,)
    _cls.from_aten = classmethod(_softmax_aten)  # type: ignore[method-assign,assignment]
    _cls.from_onnx = classmethod(_softmax_onnx)  # type: ignore[method-assign,assignment]
