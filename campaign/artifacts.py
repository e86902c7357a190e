"""`Materialized`: the forms of one test case that backends consume, each built at most once."""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import onnx

from campaign.testcase import TestCase
from ir.materialize.to_onnx import to_onnx
from ir.materialize.to_torch import GraphModule

if TYPE_CHECKING:
    import torch


class Materialized:
    """Lazily built ONNX model (checked with the full checker) and torch module for a test."""

    def __init__(self, tc: TestCase):
        self.tc = tc

    @cached_property
    def onnx_model(self) -> onnx.ModelProto:
        if self.tc.dynshape is not None:  # one model with symbolic dims (docs/dynshape.md)
            from ir.materialize.dynshape import to_onnx_dyn

            model = to_onnx_dyn(self.tc.graph, self.tc.dynshape, self.tc.params())
        else:
            model = to_onnx(self.tc.graph, self.tc.params())
        onnx.checker.check_model(model, full_check=True)
        return model

    @cached_property
    def onnx_bytes(self) -> bytes:
        return self.onnx_model.SerializeToString()

    @cached_property
    def torch_module(self) -> torch.nn.Module:  # a GraphModule, or a DynGraphModule
        if self.tc.dynshape is not None:
            from ir.materialize.dynshape import torch_module

            return torch_module(self.tc.graph, self.tc.dynshape, self.tc.params())
        return GraphModule(self.tc.graph, self.tc.params())
