"""Helpers for the backend tests (imported by name: this directory is on sys.path under
pytest): fixed graphs, and test cases built from ONNX by hand."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from campaign.artifacts import Materialized
from campaign.sandbox import Job, JobMaterialized
from campaign.testcase import TestCase
from ir.core.graph import Graph
from ir.core.text import parse
from ir.numerics.values import random_values

#: a small graph every backend supports: weights, broadcasting, a reduction, two outputs
GRAPH = """graph main(%x0: f32[2,3,4], %x1: f32[4], %w2: param f32[4,5]) {
  %v3 = add(%x0, %x1) : f32[2,3,4]
  %v4 = matmul(%v3, %w2) : f32[2,3,5]
  %v5 = relu(%v4) : f32[2,3,5]
  %v6 = reduce_sum[axis=1, keepdim=false](%v5) : f32[2,5]
  return %v6, %v3
}"""


#: data-dependent control flow: sin or cos of x depending on sum(x) > w
IF_GRAPH = """graph main(%x0: f32[3], %w1: param f32[]) {
  %v2 = reduce_sum[axis=0, keepdim=false](%x0) : f32[]
  %v3 = gt(%v2, %w1) : b8[]
  %v7 = if(%v3, %x0) : f32[3] {
    graph then(%b4: f32[3]) {
      %v5 = sin(%b4) : f32[3]
      return %v5
    }
    graph else(%b6: f32[3]) {
      %v8 = cos(%b6) : f32[3]
      return %v8
    }
  }
  return %v7
}"""


def case(text: str = GRAPH, seed: int = 0) -> Materialized:
    g = parse(text)
    return Materialized(TestCase(f"t{seed}", seed, g, random_values(g, seed)))


def onnx_case(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> Materialized:
    """A test case whose ONNX model is given (for features our IR cannot express yet); its
    graph is an empty placeholder that ONNX-only backends never look at."""
    onnx.checker.check_model(model, full_check=True)
    return JobMaterialized(Job("onnx", 0, Graph("onnx", (), (), ()), values, list(values),
                               model.SerializeToString(), []))


def loop_model() -> onnx.ModelProto:
    """y = x + 1, three times, in an ONNX Loop."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["x_in", "one"], ["x_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.ones(2, np.float32), "one")])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body)], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array(3, np.int64), "n"),
                     numpy_helper.from_array(np.array(True), "c")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def elu_f64_model() -> onnx.ModelProto:
    g = helper.make_graph(
        [helper.make_node("Elu", ["x"], ["y"], alpha=0.5)], "m",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)

