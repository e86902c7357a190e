"""The oracle's float64-shadow judgement and the shadow itself."""
from __future__ import annotations

import numpy as np
import pytest
from backend_cases import case

from campaign.oracle import judge, judge_sets, judge_with_truth
from campaign.reference import run_reference, run_shadow, widen_graph
from campaign.verdict import Verdict
from ir.analysis.precision import Tolerance
from ir.core.dtypes import DType

F32 = Tolerance(1e-3, 1e-4)


def test_widen_graph_makes_every_float_f64():
    m = case("""graph main(%x0: f64[3]) {
  %v1 = cast[to=f32](%x0) : f32[3]
  %v2 = add(%v1, %v1) : f32[3]
  return %v2
}""")
    wide = widen_graph(m.tc.graph)
    assert {v.type.dtype for v in wide.all_values()} == {DType.float64}
    assert wide.insts[0].op.to is DType.float64


def test_shadow_skips_float32_rounding():
    m = case("""graph main(%x0: f64[3]) {
  %v1 = cast[to=f32](%x0) : f32[3]
  %v2 = add(%v1, %v1) : f32[3]
  return %v2
}""")
    x = m.tc.values["x0"]
    (truth,) = run_shadow(m)
    assert truth.dtype == np.float64
    np.testing.assert_array_equal(truth, x + x)
    (ref,) = run_reference(m).outputs
    assert ref.dtype == np.float32 and not np.array_equal(ref.astype(np.float64), truth)


def _arrays(ref, target, truth):
    return (np.array(ref, np.float32), np.array(target, np.float32), np.array(truth, np.float64))


@pytest.mark.parametrize("ref, target, truth, outcome", [
    ([1.0, 2.0], [1.0, 2.5], [1.0, 2.0], "confirmed"),       # target off, reference right
    ([1.0, 2.5], [1.0, 2.0], [1.0, 2.0], "reference_off"),   # the f32 reference was off
    ([1.0, 2.2], [1.0, 2.3], [1.0, 2.0], "ill_conditioned"),  # both off by the same order
    ([1.0, 2.01], [1.0, 9.0], [1.0, 2.0], "confirmed"),      # target far worse than reference
    ([1.0, 2.0], [1.0, np.nan], [1.0, 2.0], "confirmed"),    # NaN is never close
])
def test_judge_with_truth(ref, target, truth, outcome):
    assert judge_with_truth(*_arrays(ref, target, truth), F32).outcome == outcome


def test_judge_consults_the_shadow_once_and_only_on_float_mismatch():
    calls = []

    def truth():
        calls.append(1)
        return [np.array([1.0, 2.0]), np.array([1.0, 2.0])]

    e = [np.array([1.0, 2.5], np.float32), np.array([1.0, 2.5], np.float32)]
    a = [np.array([1.0, 2.0], np.float32), np.array([1.0, 2.0], np.float32)]
    precisions = [DType.float32, DType.float32]
    assert judge(e, e, [F32, F32], precisions, truth).verdict is Verdict.PASS and not calls
    j = judge(e, a, [F32, F32], precisions, truth)
    assert j.verdict is Verdict.PASS and len(calls) == 1 and "reference" in j.note
    ints = [np.array([1, 2])]
    j = judge(ints, [np.array([1, 3])], [Tolerance(0, 0)], [None], truth)
    assert j.verdict is Verdict.MISMATCH and len(calls) == 1
    bad = [np.array([1.0, 2.3], np.float32), np.array([1.0, 2.5], np.float32)]
    ill = judge([np.array([1.0, 2.2], np.float32), e[1]], bad, [F32, F32], precisions,
                lambda: [np.array([1.0, 2.0]), np.array([1.0, 2.0])])
    assert ill.verdict is Verdict.INVALID and ill.comparison.output == 0
    assert judge(e, [e[0], np.zeros((3,), np.float32)], [F32, F32], precisions, truth).verdict \
        is Verdict.MISMATCH  # a shape difference needs no shadow


def test_judge_sets_names_the_input_set_that_differs_and_slices_the_truth():
    calls = []
    one, two = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
    ints = np.array([1, 2])

    def truth():
        calls.append(1)
        return [one.astype(np.float64), ints, two.astype(np.float64), ints]

    expected = [one, ints, two, ints]  # set 0: (float, int), set 1: (float, int)
    tols, precisions = [F32, Tolerance(0, 0)], [DType.float32, None]
    assert judge_sets(expected, expected, 2, tols, precisions, truth).verdict is Verdict.PASS
    j = judge_sets(expected, [one, ints, two, np.array([1, 3])], 2, tols, precisions, truth)
    assert (j.verdict, j.input_set, j.comparison.output) == (Verdict.MISMATCH, 1, 1)
    assert j.comparison.message.startswith("input set 1: output 1: 1/2 elements differ")
    # the reference is off in set 1 and the target is right: the shadow (set 1's slice) says so
    off = [one, ints, np.array([3.0, 4.5], np.float32), ints]
    j = judge_sets(off, expected, 2, tols, precisions, truth)
    assert j.verdict is Verdict.PASS and j.note.startswith("input set 1: output 0:") and calls == [1]
    j = judge_sets(expected, expected[:2], 2, tols, precisions, truth)
    assert j.verdict is Verdict.MISMATCH and j.comparison.message == "2 outputs, expected 4"
