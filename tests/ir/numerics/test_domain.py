"""Numerical validity (`ir.numerics.domain`): discontinuous ops keep a margin from their jumps, an exact 0
included, since a 0 the reference computes by cancellation is +-tiny in another correct
implementation (the `hardswish -> cumsum -> sign` false alarm of docs/triage.md)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ir import parse, verify
from ir.numerics.domain import evaluate_checked
from ir.numerics.input_search import make_valid
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


# ---- integer wraparound: reduce_prod, matmul, linear -------------------------------------------
# The result check (|x| < 2**31 for int64) bounds a product of two values and any sum, not a
# product of many values or a sum of products: torch wraps around silently, and a wrapped result
# can land back in range. The cpu_ort false alarm: reduce_prod of 63 int64 values in {3, 4} is
# 0 mod 2**64 in torch, ORT's ReduceProd (computed in float64) saturates to 2**63 - 1, and
# `sign(prod + 1)` reads 1 vs -1.

PROD = """graph main(%x0: i64[{N}]) {
  %v1 = reduce_prod[axis=0, keepdim=true](%x0) : i64[1]
  %v2 = sign(%v1) : i64[1]
  return %v2
}
"""


def _prod(values: list[int]):
    g = verify(parse(PROD.replace("{N}", str(len(values)))))
    return evaluate_checked(g, {"x0": torch.tensor(values, dtype=torch.int64)})


def test_a_product_that_wraps_back_into_range_is_invalid():
    x = [3] * 31 + [4] * 32  # 4**32 = 2**64: the product is 0 mod 2**64
    assert torch.tensor(x).prod(dtype=torch.int64).item() == 0
    values, violation = _prod(x)
    assert violation is not None
    assert violation.message == "inst 0 (reduce_prod): inputs outside the op's safe domain"
    assert violation.index == 0 and violation.path == (0,)
    assert "v1" not in values


def test_a_product_in_range_is_valid():
    values, violation = _prod([-3] * 19 + [1] * 44)  # -3**19 = -1162261467 > -2**31
    assert violation is None
    assert values["v1"].tolist() == [-1162261467]


def test_a_product_with_a_zero_is_exactly_zero_and_valid():
    values, violation = _prod([2**30] * 30 + [0] + [2**30] * 32)
    assert violation is None
    assert values["v1"].tolist() == [0]


def test_a_product_over_the_result_limit_is_still_caught_by_the_result_check():
    values, violation = _prod([2**16] * 2 + [1] * 61)  # 2**32, exact: no wraparound
    assert violation is not None
    assert violation.message == ("inst 0 (reduce_prod): value %v1 reaches 4294967296 "
                                 "(>= 2147483648: integer overflow risk)")


LINEAR = """graph main(%x0: i64[16], %w1: param i64[1,16], %w2: param i64[1]) {
  %v1 = linear(%x0, %w1, %w2) : i64[1]
  return %v1
}
"""

MATMUL = """graph main(%x0: i64[1,16], %w1: param i64[16,1]) {
  %v1 = matmul(%x0, %w1) : i64[1,1]
  return %v1
}
"""


def test_a_sum_of_products_that_wraps_back_into_range_is_invalid():
    """16 products of 2**30 * 2**30 sum to 2**64: torch's linear gives the bias, 5."""
    big = torch.full((16,), 2**30, dtype=torch.int64)
    assert torch.nn.functional.linear(big, big[None], torch.tensor([5])).tolist() == [5]
    g = verify(parse(LINEAR))
    _, violation = evaluate_checked(g, {"x0": big, "w1": big[None], "w2": torch.tensor([5])})
    assert violation is not None
    assert violation.message == "inst 0 (linear): inputs outside the op's safe domain"
    g = verify(parse(MATMUL))
    _, violation = evaluate_checked(g, {"x0": big[None], "w1": big[:, None]})
    assert violation is not None
    assert violation.message == "inst 0 (matmul): inputs outside the op's safe domain"


def test_a_small_integer_linear_is_valid():
    x = torch.arange(-8, 8, dtype=torch.int64)
    values, violation = evaluate_checked(verify(parse(LINEAR)),
                                         {"x0": x, "w1": x[None], "w2": torch.tensor([5])})
    assert violation is None
    assert values["v1"].tolist() == [int((x * x).sum()) + 5] == [349]
