"""The oracle's rounding spread: a float32 target off the float64 truth no farther than float32
evaluations that differ from the reference only in rounding is ill-conditioned, not a finding.

`tests/data/ort_ill_conditioned_scan/` is a `cpu_ort` finding (test 20261203-080045-4829-003563,
a transformer-block mutant) the oracle used to confirm as a mismatch: a scan of 8 trips iterates
softmax(2 * (q @ carry^T) * s_t) @ v with logits up to |400| and near-ties in row 4, so every
trip multiplies the carry's rounding error by ~10 (3e-7 -> 4e-3). At output element (4, 3) the
torch reference happened to land 0.9 x tolerance from the truth, ORT (any optimization level)
1.5 x: numpy's float32 matmul lands 1.1 x, a sequential-sum matmul 0.01 x, the reference run
on x moved by one ulp up to 2.2 x. Its files: the graph, both input sets, the reference's
outputs and ORT's (`out0`, `out1`: set 0's outputs, `out2`, `out3`: set 1's).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from campaign.artifacts import Materialized
from campaign.oracle import Truths, judge_sets, judge_with_truth
from campaign.reference import rounding_spread, run_shadow
from campaign.testcase import TestCase
from campaign.verdict import Verdict
from ir.analysis.precision import Tolerance, output_precisions, output_tolerances
from ir.core.text import parse

DATA = Path(__file__).parents[1] / "data" / "ort_ill_conditioned_scan"
F32 = Tolerance(1e-3, 1e-4)


def _npz(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / name) as z:
        return {k: z[k] for k in z.files}


def _finding():
    g = parse((DATA / "graph.gir").read_text())
    m = Materialized(TestCase("ill", 0, g, _npz("inputs.npz"), [], [_npz("inputs_set1.npz")]))
    expected, actual = _npz("expected.npz"), _npz("actual.npz")
    order = [f"out{i}" for i in range(4)]
    return (m, [expected[k] for k in order], [actual[k] for k in order],
            output_tolerances(g), output_precisions(g))


def test_ort_rounding_amplified_by_a_scan_is_ill_conditioned_not_a_mismatch():
    m, expected, actual, tols, precs = _finding()
    truths = run_shadow(m)
    # the case as found: ORT off the truth beyond tolerance at (4, 3), the reference not
    t, tol = truths[0][4, 3], tols[0].atol + tols[0].rtol * abs(truths[0][4, 3])
    assert abs(expected[0][4, 3] - t) < tol < abs(actual[0][4, 3] - t)
    j = judge_sets(expected, actual, 2, tols, precs, lambda: truths)
    assert (j.verdict, j.input_set, j.comparison.output) == (Verdict.INVALID, 0, 0)
    assert "ill-conditioned, float32 evaluations differing only in rounding" in j.note
    # float32 evaluations that differ only in rounding land farther off at (4, 3), while the
    # rows the scan does not amplify stay within a few ulps
    assert truths.spread[0][4, 3] > abs(actual[0][4, 3] - t)
    assert truths.spread[0][:4].max() < 1e-4


def test_the_spread_does_not_hide_a_wrong_value_in_the_same_test():
    m, expected, actual, tols, precs = _finding()
    truths = run_shadow(m)
    # two times the tolerance where the computation is well-conditioned (row 0) ...
    wrong = [a.copy() for a in expected]
    wrong[0][0, 0] += 2 * (tols[0].atol + tols[0].rtol * abs(wrong[0][0, 0]))
    j = judge_sets(expected, wrong, 2, tols, precs, lambda: truths)
    assert (j.verdict, j.input_set, j.comparison.output) == (Verdict.MISMATCH, 0, 0)
    assert "1 elements off the truth beyond the float32 rounding spread" in j.note
    # ... or far beyond the spread where it is not (row 4), or in set 1's other output
    for k, where, by in ((0, (4, 3), 0.05), (3, (5, 2, 1), 0.05)):
        wrong = [a.copy() for a in actual]
        wrong[k][where] += by
        j = judge_sets(expected, wrong, 2, tols, precs, lambda: truths)
        assert (j.verdict, j.input_set, j.comparison.output) == (Verdict.MISMATCH, k // 2, k % 2)


def test_rounding_spread_follows_the_conditioning():
    g = parse("""graph main(%x0: f32[4], %w1: param f32[]) {
  %v2 = add(%x0, %w1) : f32[4]
  %v3 = sub(%v2, %w1) : f32[4]
  %v4 = mul(%x0, %x0) : f32[4]
  return %v3, %v4
}""")
    x = np.array([1e-3, 2e-3, -3e-3, 4e-3], np.float32)
    values = {"x0": x, "w1": np.array(3e4, np.float32)}
    x64 = x.astype(np.float64)
    cancel, square = rounding_spread(g, values, [x64, x64 * x64])
    # (x + 3e4) - 3e4 loses x to the ulp of 3e4 (0.002); x * x keeps float32's precision
    assert cancel.min() > 1e-3
    assert (square <= 3 * np.spacing(np.float32(x * x)).astype(np.float64)).all()


@pytest.mark.parametrize("spread, outcome", [
    (None, "confirmed"),                    # not measured: the reference alone decides
    ([0.0, 1e-6], "confirmed"),             # well-conditioned: a few ulps explain nothing
    ([0.0, 2e-3], "ill_conditioned"),       # rounding carries float32 this far at element 1
    ([0.0, np.nan], "ill_conditioned"),     # a perturbed evaluation went non-finite there
    ([2e-3, 0.0], "confirmed"),             # the spread is elsewhere
])
def test_judge_with_truth_allows_the_rounding_spread(spread, outcome):
    ref, target = np.array([1.0, 2.0005], np.float32), np.array([1.0, 2.003], np.float32)
    truth = np.array([1.0, 2.0])  # tolerance 2.1e-3 at 2: the reference in, the target out
    s = None if spread is None else np.array(spread)
    assert judge_with_truth(ref, target, truth, F32, s).outcome == outcome


def test_truths_keep_their_spreads_when_sliced_per_input_set():
    a, b = np.zeros(2), np.ones(3)
    t = Truths([a, b, a, b], [np.full(2, 0.5), None, np.full(2, 0.25), None])
    part = t[2:4]
    assert isinstance(part, Truths) and part[1] is b
    assert part.spread[0][0] == 0.25 and part.spread[1] is None
    assert Truths([a]).spread == [None] and list(t) == [a, b, a, b]
