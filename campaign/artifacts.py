"""`Materialized`: the forms of one test case that backends consume, each built at most once."""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import onnx

from campaign.testcase import TestCase

if TYPE_CHECKING:
    import torch


class Materialized:
    """Lazily built ONNX model (checked with the full checker) and torch module for a test."""

    def __init__(self, tc: TestCase):
        self.tc = tc

    @cached_property
    def onnx_model(self) -> onnx.ModelProto:
        """One model for every input set (symbolic dims for a dynamic-shape test)."""
        model = self.tc.shapes.onnx_model(self.tc)
        onnx.checker.check_model(model, full_check=True)
        return model

    @cached_property
    def onnx_bytes(self) -> bytes:
        return self.onnx_model.SerializeToString()

    @cached_property
    def torch_module(self) -> torch.nn.Module:  # a GraphModule, or a DynGraphModule
        return self.tc.shapes.torch_module(self.tc)
