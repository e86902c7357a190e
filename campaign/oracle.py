"""Comparison of a backend's outputs with the reference, with per-output tolerances, and the
float64-shadow judgement of a float mismatch.

|actual - expected| <= atol + rtol * |expected| elementwise. Each output's tolerance comes from
`ir.analysis.precision.output_tolerances`: the base tolerance of the least precise float dtype in its
dependency cone (a float64 output computed through float32 gets float32 tolerances), loosened by
the op families in the cone; outputs with no float in their cone must be exact. Shapes and dtypes
must match exactly. NaN positions must agree (the reference has none: it is rejected when
non-finite).

When a float output differs, `judge` asks the float64 shadow (`campaign.reference.run_shadow`, a
near-exact result, with the measured rounding scatter: `Truths`) who is off (`judge_with_truth`):
  - the target is within tolerance of the truth everywhere: the float32 reference was the
    inaccurate one -> pass;
  - somewhere the target is off the truth by more than tolerance + what rounding explains there
    -> a confirmed mismatch. Rounding explains `SHADOW_SLACK` x the reference's own error where
    the reference is off too, and the *rounding spread*: how far float32 evaluations that differ
    from the reference only in rounding (every rounding op's result moved one ulp, at random) land
    from the truth. Where the computation is well-conditioned the spread is a few ulps and
    changes nothing; where it amplifies rounding (an iterated softmax with large logits and
    near-ties) one reference that happens to land close to the truth no longer makes every
    other float32 result a finding;
  - otherwise the target is off only as far as rounding carries a float32 evaluation: the test
    is numerically ill-conditioned at this tolerance -> invalid (our generator's problem),
    never a finding.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from campaign.verdict import Verdict
from ir.analysis.precision import BASE_TOLERANCE, EXACT, Tolerance
from ir.core.dtypes import DType

#: how many times the reference's own error (vs the float64 truth) a target may be off by
#: where the reference is off too, before the mismatch is confirmed anyway
SHADOW_SLACK = 4.0

#: an output's tolerance, or the float dtype whose base tolerance applies (None: by its dtype)
TolSpec = Tolerance | DType | None


def tolerance(spec: TolSpec, dtype: np.dtype) -> Tolerance:
    """The tolerance for an output of numpy `dtype` given its spec."""
    if isinstance(spec, Tolerance):
        return spec
    if isinstance(spec, DType):
        return BASE_TOLERANCE.get(spec, EXACT)
    try:
        return BASE_TOLERANCE.get(DType.from_numpy(np.dtype(dtype)), EXACT)
    except ValueError:
        return EXACT


@dataclass
class Comparison:
    ok: bool
    output: int | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str = ""


def _errors(e: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, float, float]:
    ef, af = e.astype(np.float64), a.astype(np.float64)
    diff = np.abs(af - ef)
    max_abs = float(np.nanmax(diff)) if not np.all(np.isnan(diff)) else float("nan")
    rel = diff / np.maximum(np.abs(ef), np.finfo(np.float64).tiny)
    max_rel = float(np.nanmax(rel)) if not np.all(np.isnan(rel)) else float("nan")
    return diff, max_abs, max_rel


def compare(
    expected: Sequence[np.ndarray],
    actual: Sequence[np.ndarray],
    tolerances: Sequence[TolSpec] | None = None,
) -> Comparison:
    """First failing output wins; errors are reported for that output. `tolerances[i]` is
    output i's tolerance (default: the base tolerance of the output's own dtype)."""
    if len(expected) != len(actual):
        return Comparison(False, None, message=f"{len(actual)} outputs, expected {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        c = compare_one(i, e, np.asarray(a), tolerances[i] if tolerances else None)
        if not c.ok:
            return c
    return Comparison(True)


def compare_one(i: int, e: np.ndarray, a: np.ndarray, tol: TolSpec = None) -> Comparison:
    """Compare output `i` alone."""
    if a.shape != e.shape:
        return Comparison(False, i, message=f"output {i}: shape {a.shape}, expected {e.shape}")
    if a.dtype != e.dtype:
        return Comparison(False, i, message=f"output {i}: dtype {a.dtype}, expected {e.dtype}")
    if e.size == 0:
        return Comparison(True)
    if np.array_equal(a, e):
        return Comparison(True)  # identical (and NaN-free): within any tolerance
    t = tolerance(tol, e.dtype)
    rtol, atol = t.rtol, t.atol
    ef, af = e.astype(np.float64), a.astype(np.float64)
    diff = np.abs(af - ef)
    nan_e, nan_a = np.isnan(ef), np.isnan(af)
    bad = (nan_a != nan_e) | ~(diff <= atol + rtol * np.abs(ef))
    bad &= ~(nan_a & nan_e)
    if bad.any():  # the error figures only for a failing output
        _, max_abs, max_rel = _errors(e, a)
        n = int(bad.sum())
        return Comparison(False, i, max_abs, max_rel,
                          f"output {i}: {n}/{e.size} elements differ (max abs {max_abs:.3g}, "
                          f"max rel {max_rel:.3g}, rtol {rtol}, atol {atol})")
    return Comparison(True)


# ---- the float64 shadow ------------------------------------------------------------------------

class Truths(list):
    """The float64 truths of a test's outputs, laid out as `judge_sets` lays the outputs out
    (a plain list of arrays), with `spread[i]`: how far float32 evaluations that differ from the
    reference only in rounding land from truth `i`, elementwise (the max over the samples;
    inf where one went non-finite; None: not measured). Slicing keeps the spreads."""

    def __init__(self, truths: Sequence[np.ndarray] = (),
                 spread: Sequence[np.ndarray | None] | None = None):
        super().__init__(truths)
        self.spread: list[np.ndarray | None] = (list(spread) if spread is not None
                                                else [None] * len(self))
        assert len(self.spread) == len(self)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Truths(list.__getitem__(self, i), self.spread[i])
        return list.__getitem__(self, i)


@dataclass
class TruthJudgement:
    """Who is off the float64 truth, for one output. `outcome` is `confirmed`,
    `reference_off` or `ill_conditioned` (see the module doc)."""

    outcome: str
    target_err: float  #: max |target - truth|
    reference_err: float  #: max |reference - truth|
    message: str


def judge_with_truth(expected: np.ndarray, actual: np.ndarray, truth: np.ndarray,
                     tol: TolSpec = None, spread: np.ndarray | None = None) -> TruthJudgement:
    """Judge a float output that differs from the reference against the float64 truth;
    `spread`: the rounding spread of float32 evaluations around it (see `Truths`), if measured."""
    tt = tolerance(tol, expected.dtype)
    rtol, atol = tt.rtol, tt.atol
    t = truth.astype(np.float64)
    a = np.asarray(actual).astype(np.float64)
    e = expected.astype(np.float64)
    bound = atol + rtol * np.abs(t)
    a_err, r_err = np.abs(a - t), np.abs(e - t)
    a_off = ~(a_err <= bound)  # NaN counts as off
    r_off = ~(r_err <= bound)
    max_a = float(np.nanmax(a_err)) if a_err.size and not np.all(np.isnan(a_err)) else float("nan")
    max_r = float(np.nanmax(r_err)) if r_err.size else 0.0
    errs = f"target off the float64 truth by {max_a:.3g}, reference by {max_r:.3g}"
    if not a_off.any():
        return TruthJudgement("reference_off", max_a, max_r,
                              f"float64 shadow: the target is within tolerance of the truth, the "
                              f"float32 reference is not ({errs})")
    # what rounding explains, elementwise: a multiple of the reference's own error where it is
    # off too, and at least the measured spread of float32 evaluations
    explained = np.where(r_off, SHADOW_SLACK * r_err, 0.0)
    measured = spread is not None and np.shape(spread) == t.shape
    measured_spread = None
    if measured:
        measured_spread = np.nan_to_num(np.asarray(spread, np.float64), nan=np.inf)
        explained = np.maximum(explained, measured_spread)
    beyond = a_off & ~(a_err <= bound + explained)
    if measured_spread is not None:
        at = beyond if beyond.any() else a_off
        errs += (f", float32 evaluations differing only in rounding by up to "
                 f"{float(np.max(measured_spread[at])):.3g} there")
    if beyond.any():
        where = "beyond the float32 rounding spread" if measured else "where the reference is not"
        return TruthJudgement("confirmed", max_a, max_r,
                              f"float64 shadow confirms: {int(beyond.sum())} elements off the "
                              f"truth {where} ({errs})")
    why = ("float32 evaluations differing only in rounding land as far from the truth as the "
           "target" if measured else "the float32 reference is itself off the truth wherever "
           "the target is")
    return TruthJudgement("ill_conditioned", max_a, max_r,
                          f"float64 shadow: ill-conditioned, {why} ({errs})")


@dataclass
class Judgement:
    """The verdict on a finished backend run: pass, mismatch, or invalid (ill-conditioned);
    `comparison` describes the output that decided it; `note` tells what the shadow said."""

    verdict: Verdict
    comparison: Comparison
    note: str | None = None
    #: the input set whose outputs decided a non-pass (see `judge_sets`)
    input_set: int | None = None


def judge(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray],
          tolerances: Sequence[TolSpec], precisions: Sequence[DType | None],
          truth: Callable[[], Sequence[np.ndarray] | None] | None = None) -> Judgement:
    """Compare every output; an output out of tolerance whose cone's least precise float is
    float32 or float16 (`precisions[i]`), with the right shape and dtype, is judged against the
    float64 truth (`truth()` is called at most once, only then; None: no shadow).
    The first confirmed mismatch decides; else any ill-conditioned output makes the test
    invalid; else it passes (possibly with a note that the reference was the inaccurate one)."""
    first = compare(expected, actual, tolerances)
    if first.ok:
        return Judgement(Verdict.PASS, first)
    if first.output is None or truth is None:
        return Judgement(Verdict.MISMATCH, first)
    truths: Sequence[np.ndarray] | None = None
    ill: tuple[Comparison, str] | None = None
    notes: list[str] = []
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        a = np.asarray(a)
        c = compare_one(i, e, a, tolerances[i])
        if c.ok:
            continue
        float_case = (a.shape == e.shape and a.dtype == e.dtype and precisions[i] is not None
                      and precisions[i] is not DType.float64)
        if not float_case:
            return Judgement(Verdict.MISMATCH, c)
        if truths is None:
            try:
                truths = truth()
            except Exception as err:  # no shadow: keep the plain comparison
                return Judgement(Verdict.MISMATCH, c, f"float64 shadow failed: {err}")
            if truths is None:
                return Judgement(Verdict.MISMATCH, c)
        spread = truths.spread[i] if isinstance(truths, Truths) else None
        j = judge_with_truth(e, a, truths[i], tolerances[i], spread)
        if j.outcome == "confirmed":
            return Judgement(Verdict.MISMATCH, c, j.message)
        if j.outcome == "ill_conditioned" and ill is None:
            ill = (c, j.message)
        notes.append(f"output {i}: {j.message}")
    if ill is not None:
        return Judgement(Verdict.INVALID, ill[0], ill[1])
    return Judgement(Verdict.PASS, Comparison(True), "; ".join(notes) or None)


def judge_sets(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], n_outputs: int,
               tolerances: Sequence[TolSpec], precisions: Sequence[DType | None],
               truth: Callable[[], Sequence[np.ndarray] | None] | None = None) -> Judgement:
    """`judge` for a test run on several input sets: `expected`, `actual` (and what `truth()`
    returns) hold the `n_outputs` outputs of set 0, then of set 1, ...; `tolerances` and
    `precisions` are per graph output. The first set with a mismatch decides; else the first
    ill-conditioned set makes the test invalid; else it passes. Messages name the set when
    there are several."""
    if len(actual) != len(expected) or n_outputs <= 0 or len(expected) % n_outputs:
        return Judgement(Verdict.MISMATCH, compare(expected, actual))
    n_sets = len(expected) // n_outputs
    truths: list = []

    def truth_of(k: int) -> Sequence[np.ndarray] | None:
        if not truths:
            assert truth is not None  # asked only when there is one
            truths.append(truth())
        whole = truths[0]
        return None if whole is None else whole[k * n_outputs:(k + 1) * n_outputs]

    invalid: Judgement | None = None
    notes: list[str] = []
    for k in range(n_sets):
        part = slice(k * n_outputs, (k + 1) * n_outputs)
        j = judge(expected[part], actual[part], tolerances, precisions,
                  partial(truth_of, k) if truth is not None else None)
        where = f"input set {k}: " if n_sets > 1 else ""
        if j.verdict is not Verdict.PASS:
            j.comparison.message = where + j.comparison.message
            j.input_set = k
            if j.verdict is Verdict.MISMATCH:
                return j
            invalid = invalid or j
        elif j.note:
            notes.append(where + j.note)
    if invalid is not None:
        return invalid
    return Judgement(Verdict.PASS, Comparison(True), "; ".join(notes) or None)
