"""Softmax and log-softmax over one axis."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
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
