"""Numerical validity (`ir.domain`): discontinuous ops keep a margin from their jumps, an exact 0
included, since a 0 the reference computes by cancellation is +-tiny in another correct
implementation (the `hardswish -> cumsum -> sign` false alarm of docs/triage.md)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ir import parse, verify
from ir.domain import evaluate_checked
from ir.input_search import make_valid
from ir.ops.common import margin

CHAIN = """graph main(%x0: f32[2]) {
  %v1 = hardswish(%x0) : f32[2]
  %v2 = cumsum[axis=0](%v1) : f32[2]
  %v3 = {OP}(%v2) : f32[2]
  return %v3
}
"""

#: hardswish(0.62132037) = 0.375 = -hardswish(-1.5) in float32: the cumsum cancels exactly
CANCELS = np.array([0.62132037, -1.5], dtype=np.float32)


def _chain(op: str):
    return verify(parse(CHAIN.replace("{OP}", op)))


def test_the_reference_cumsum_cancels_to_an_exact_zero():
    h = torch.nn.functional.hardswish(torch.from_numpy(CANCELS))
    assert h.tolist() == [0.375, -0.375]
    assert torch.cumsum(h, 0).tolist() == [0.375, 0.0]


@pytest.mark.parametrize("op", ["sign", "floor", "ceil", "sqrt"])
def test_an_exact_zero_from_a_cancellation_is_outside_the_domain(op: str):
    """sign(0) = 0 in the reference, +-1 where the cumsum comes out +-tiny; floor(-tiny) = -1,
    ceil(tiny) = 1, sqrt(-tiny) = NaN."""
    values, violation = evaluate_checked(_chain(op), {"x0": torch.from_numpy(CANCELS)})
    assert values["v2"].tolist() == [0.375, 0.0]
    assert violation is not None
    assert violation.message == f"inst 2 ({op}): inputs outside the op's safe domain"
    assert violation.index == 2 and violation.path == (2,)


def test_inputs_away_from_the_jump_are_valid():
    env = {"x0": torch.tensor([0.5, 1.0])}
    assert evaluate_checked(_chain("sign"), env)[1] is None


def test_a_comparison_of_a_value_with_itself_stays_exact():
    g = verify(parse("""graph main(%x0: f32[2]) {
  %v1 = cumsum[axis=0](%x0) : f32[2]
  %v2 = ge(%v1, %v1) : b8[2]
  return %v2
}
"""))
    assert evaluate_checked(g, {"x0": torch.tensor([1.0, -1.0])})[1] is None


def test_the_input_search_keeps_the_chain_away_from_zero():
    g = _chain("sign")
    valid = make_valid(g, 0)
    assert valid is not None and valid.graph == g and valid.dropped == []
    x = torch.from_numpy(valid.search.values["x0"])
    cumsum = torch.cumsum(torch.nn.functional.hardswish(x), 0)
    assert bool((cumsum.abs() >= margin(torch.float32, 0.0)).all())
