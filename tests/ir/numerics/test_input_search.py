"""The input search (`ir.numerics.input_search`): when it stops, and the result check it relies on."""
from __future__ import annotations

import numpy as np
import torch

from ir import parse, print_graph, verify
from ir.numerics.domain import evaluate_checked, result_problem
from ir.numerics.input_search import SearchConfig, drop_instruction, search_inputs

#: topk over sign(exp(x)): six ones always tie, and sign has no gradient
TIES = """graph main(%x0: f32[6]) {
  %v0 = exp(%x0) : f32[6]
  %v1 = sign(%v0) : f32[6]
  %v2, %v3 = topk[axis=0, k=1, largest=false](%v1) : f32[1], i64[1]
  return %v2
}
"""

#: log over every row of a scan: the violation stays at one instruction (the body's log)
#: while the search fixes the rows one after another, each row's measure starting higher
ROWS = """graph main(%x0: f32[6,3], %x1: f32[3]) {
  %v3, %v4 = scan[num_carries=1, reverse=false](%x1, %x0) : f32[3], f32[6,3] {
    graph body(%b5: f32[3], %b6: f32[3]) {
      %v7 = log(%b6) : f32[3]
      %v8 = add(%b5, %v7) : f32[3]
      return %v8, %v7
    }
  }
  return %v3, %v4
}
"""


def test_a_structural_violation_stops_the_search_after_its_patience():
    g = verify(parse(TIES))
    cfg = SearchConfig()
    res = search_inputs(g, 0, cfg=cfg)
    assert not res.ok
    assert res.violation == "inst 2 (topk): inputs outside the op's safe domain"
    # the first iteration sets the mark; `patience` more without progress end it
    assert res.iters == cfg.patience < cfg.max_iters


def test_a_search_making_progress_row_by_row_runs_on():
    g = verify(parse(ROWS))
    values = {"x0": -np.ones((6, 3), np.float32), "x1": np.zeros(3, np.float32)}
    res = search_inputs(g, 0, start=values)
    assert res.ok and res.iters > SearchConfig().patience
    with torch.no_grad():
        assert evaluate_checked(g, {k: torch.from_numpy(v) for k, v in res.values.items()})[1] is None


def test_the_result_check_reads_the_extremes_of_an_int64_without_wrapping():
    t = torch.tensor([0, -2**63], dtype=torch.int64)  # abs() would wrap to -2**63 itself
    assert result_problem("v", t) == ("value %v reaches 9223372036854775808 "
                                      "(>= 2147483648: integer overflow risk)")
    assert result_problem("v", torch.tensor([2**31 - 1, -(2**31 - 1)])) is None


def test_the_result_check_flags_non_finite_floats_of_every_width():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        assert result_problem("v", torch.tensor([1.0, float("nan")], dtype=dtype)) == \
            "value %v is not finite"
        assert result_problem("v", torch.tensor([1.0, -2.0], dtype=dtype)) is None


def test_dropping_the_last_instruction_leaves_no_test():
    # the result has an operand of its type, which would take its place: the graph would only
    # return its input, which tests no compiler
    g = verify(parse("""graph main(%x0: f32[3]) {
      %v1 = log(%x0) : f32[3]
      return %v1
    }"""))
    assert drop_instruction(g, 0) is None
    two = verify(parse("""graph main(%x0: f32[3]) {
      %v1 = log(%x0) : f32[3]
      %v2 = exp(%v1) : f32[3]
      return %v2
    }"""))
    kept = drop_instruction(two, 0)
    assert kept is not None and [i.op.name for i in kept.insts] == ["exp"]
    assert "exp(%x0)" in print_graph(kept)
