"""Softmax and log-softmax over one axis."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ir.core.dtypes import DType
from ir.ops.common import FLOATS
from ir.ops.reduce import AlongAxis


@dataclass(frozen=True)
class Softmax(AlongAxis):
    name: ClassVar[str] = "softmax"
    family: ClassVar[str] = "softmax"
    dtypes: ClassVar[frozenset[DType]] = FLOATS
    onnx_name: ClassVar[str] = "Softmax"

    def torch(self, x):
        import torch

        return torch.softmax(x, dim=self.axis)

    def onnx(self, b, ins, outs):
        b.node(self.onnx_name, ins, outs, axis=self.axis)


@dataclass(frozen=True)
class LogSoftmax(Softmax):
    name: ClassVar[str] = "log_softmax"
    onnx_name: ClassVar[str] = "LogSoftmax"

    def torch(self, x):
        import torch

        return torch.log_softmax(x, dim=self.axis)
