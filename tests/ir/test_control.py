"""Control flow: verifier rules for bodies (exact messages), text round-trip of nested graphs,
and agreement of torch (python and torch.cond/while_loop dialects) with ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from ir import GenConfig, VerifyError, generate, parse, print_graph, verify
from ir.input_search import make_valid
from ir.precision import output_tolerances
from ir.to_onnx import to_onnx
from ir.to_torch import GraphModule, torch_inputs

IF = """graph main(%x0: f32[2,3], %x8: f32[], %w1: param f32[3,4]) {
  %v2 = matmul(%x0, %w1) : f32[2,4]
  %v3 = reduce_sum[axis=0, keepdim=false](%v2) : f32[4]
  %v4 = reduce_sum[axis=0, keepdim=false](%v3) : f32[]
  %v5 = gt(%v4, %x8) : b8[]
  %v6, %v7 = if(%v5, %v2, %x0) : f32[2,4], f32[2,3] {
    graph then(%t0: f32[2,4], %t1: f32[2,3]) {
      %t2 = relu(%t0) : f32[2,4]
      return %t2, %t1
    }
    graph else(%e0: f32[2,4], %e1: f32[2,3]) {
      %e2 = neg(%e0) : f32[2,4]
      %e3 = abs(%e1) : f32[2,3]
      return %e2, %e3
    }
  }
  return %v6, %v7
}
"""

LOOP = """graph main(%x0: f32[2,3], %x1: i64[], %w2: param f32[3,3]) {
  %v3, %v4, %v11 = loop(%x1, %x0, %x1, %w2) : f32[2,3], i64[], f32[3,3] {
    graph body(%b5: i64[], %b6: f32[2,3], %b7: i64[], %b9: f32[3,3]) {
      %v8 = matmul(%b6, %b9) : f32[2,3]
      %v12 = tanh(%v8) : f32[2,3]
      %v10 = add(%b7, %b5) : i64[]
      return %v12, %v10, %b9
    }
  }
  return %v3, %v4
}
"""


def test_nested_text_round_trips_exactly():
    for text in (IF, LOOP):
        g = verify(parse(text))
        assert print_graph(g) == text


@pytest.mark.parametrize(
    "text, summary",
    [
        (IF.replace("%t2 = relu(%t0)", "%t2 = relu(%v2)"),
         "graph main, inst 4 (if) > block 0 graph then, inst 0 (relu): operand %v2 is not defined"),
        (IF.replace("graph else(%e0: f32[2,4]", "graph else(%e0: f32[2,5]")
           .replace("%e2 = neg(%e0) : f32[2,4]", "%e2 = neg(%e0) : f32[2,5]"),
         "graph main, inst 4 (if): body else takes (f32[2,5], f32[2,3]) but the operands are (f32[2,4], f32[2,3])"),
        (IF.replace("return %t2, %t1", "return %t2, %t2"),
         "graph main, inst 4 (if): bodies return (f32[2,4], f32[2,4]) and (f32[2,4], f32[2,3]): they must match"),
        (IF.replace("%v5 = gt(%v4, %x8) : b8[]", "%v5 = gt(%v3, %x8) : b8[4]"),
         "graph main, inst 4 (if): constraint violated: False"),
        (IF.replace("%t2 = relu(%t0)", "%v2 = relu(%t0)").replace("return %t2, %t1", "return %v2, %t1"),
         "graph main, inst 4 (if) > block 0 graph then, inst 0 (relu): value %v2 is defined twice"),
        (LOOP.replace("return %v12, %v10, %b9", "return %v12, %v10, %v12"),
         "graph main, inst 0 (loop): body returns (f32[2,3], i64[], f32[2,3]) but carries "
         "(f32[2,3], i64[], f32[3,3])"),
        (LOOP.replace("%b5: i64[], ", "").replace("add(%b7, %b5)", "add(%b7, %b7)"),
         "graph main, inst 0 (loop): body takes (f32[2,3], i64[], f32[3,3]) but must take the counter "
         "and the carried values (i64[], f32[2,3], i64[], f32[3,3])"),
        (LOOP.replace("%v3, %v4, %v11 = loop(%x1,", "%v3, %v4, %v11 = loop(%x0,"),
         "graph main, inst 0 (loop): does not accept input dtypes (f32, f32, i64, f32)"),
    ],
)
def test_body_rules(text: str, summary: str):
    with pytest.raises(VerifyError) as info:
        verify(parse(text))
    assert info.value.summary == summary


def _run_all(g, values):
    params = {p.name: values[p.name] for p in g.params}
    outs = {d: [t.numpy() for t in GraphModule(g, params, d)(*torch_inputs(g, values))]
            for d in ("python", "hop")}
    model = to_onnx(g, params)
    onnx.checker.check_model(model, full_check=True)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs["ort"] = sess.run(None, {v.name: values[v.name] for v in g.inputs})
    return outs


def _agree(expected, actual, tols) -> bool:
    return all(a.shape == np.asarray(b).shape and
               np.allclose(np.asarray(b, dtype=np.float64), a.astype(np.float64), t.rtol, t.atol)
               for a, b, t in zip(expected, actual, tols))


@pytest.mark.parametrize("trip", [0, 1, 3])
def test_loop_trip_counts_including_zero(trip: int):
    g = verify(parse(LOOP))
    rng = np.random.default_rng(trip)
    values = {"x0": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "x1": np.array(trip),
              "w2": rng.uniform(-1, 1, (3, 3)).astype(np.float32)}
    outs = _run_all(g, values)
    tols = output_tolerances(g)
    assert int(outs["python"][1]) == trip * (trip - 1) // 2 + trip
    assert _agree(outs["python"], outs["hop"], tols) and _agree(outs["python"], outs["ort"], tols)


def test_generated_control_flow_agrees_across_dialects_and_ort():
    torch._dynamo.reset()
    checked = 0
    for seed in range(24):
        g = generate(seed, GenConfig(p_if=0.15, p_loop=0.15))
        test = make_valid(g, seed)
        if test is None or not any(i.op.takes_blocks for i in test.graph.insts):
            continue
        g = test.graph
        assert parse(print_graph(g)) == g
        outs = _run_all(g, test.search.values)
        tols = output_tolerances(g)
        assert _agree(outs["python"], outs["hop"], tols), seed
        assert _agree(outs["python"], outs["ort"], tols), seed
        checked += 1
        torch._dynamo.reset()
    assert checked >= 8
