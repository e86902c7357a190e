"""What the ops' ONNX lowerings write into: `OnnxBuilder` (nodes, constants, fresh names for
one ONNX graph), the opset and IR version every model uses, and a GraphIR value's ONNX type.

It sits in the core because every op's `onnx()` method takes one; the graph -> model driver is
`ir.materialize.to_onnx` (materialization).
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ir.core.types import TensorType

OPSET = 18
IR_VERSION = 10  # the newest IR version every backend under test loads


class OnnxBuilder:
    """Collects nodes and constants for one ONNX graph; names it invents never clash with values."""

    def __init__(self, prefix: str = "_c", constants_as_nodes: bool = False):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._ids = itertools.count()
        self._prefix = prefix
        self._consts: dict[tuple, str] = {}
        self._constants_as_nodes = constants_as_nodes
        #: GraphIR types of the values being emitted (ops whose ONNX form depends on shapes)
        self.types: dict[str, TensorType] = {}
        #: model-local functions by name (custom ops' bodies), shared with nested builders
        self.functions: dict[str, onnx.FunctionProto] = {}

    def shape_of(self, name: str) -> tuple:
        return tuple(self.types[name].shape)

    def fresh(self, hint: str = "t") -> str:
        return f"{self._prefix}{hint}{next(self._ids)}"

    def node(self, op_type: str, inputs: list[str], outputs: list[str], **attrs: Any) -> None:
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=self.fresh("n"), **attrs))

    def const(self, array: np.ndarray) -> str:
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            name = self.fresh("k")
            tensor = numpy_helper.from_array(array, name)
            if self._constants_as_nodes:
                self.nodes.append(helper.make_node("Constant", [], [name], name=self.fresh("n"), value=tensor))
            else:
                self.initializers.append(tensor)
            self._consts[key] = name
        return self._consts[key]

    def const_i64(self, values: int | Sequence[int]) -> str:
        """An int64 constant: a scalar for an int, else a vector."""
        return self.const(np.asarray(values, dtype=np.int64))
