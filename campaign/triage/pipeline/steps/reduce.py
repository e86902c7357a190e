"""Step `reduce`: reduce the findings whose bucket a reduction decides, oldest first, and
record what each became (`TriageState.decisions`, and `bugs/reduced.json` for the next
triage).

Mismatches first (their bucket is only known once reduced): up to `reduce_mismatches` per
backend; a row a known mismatch bucket explains (`buckets.pattern_fit`) joins it unreduced,
and one an earlier triage reduced reuses that reduction. Then, of each crash-like failure
(`buckets.crash_failures`) of kind bug, `reduce_first` folders: the first the oldest, each
further one the oldest that no reduced configuration so far explains (whose options it does
not hold), else the next oldest. A failure a known bucket or note explains is not reduced
(unless `reduce_known`). Each reduction also reduces the compiler configuration
(`reduction`), and the bucket keys on the reduced one.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import replace
from typing import Any, ClassVar

from campaign.triage.pipeline.buckets import (
    BucketKey,
    crash_failures,
    crash_key,
    mismatch_key,
    pattern_fit,
)
from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import Decision, TriageState

#: a reduction starts only with this many seconds left
MIN_REDUCTION_S = 5.0
#: under a hard deadline a reduction takes at most 1/this of the time left
HARD_REDUCTION_SHARE = 3.0


class Reduce:
    name: ClassVar[str] = "reduce"
    needs: ClassVar[tuple[str, ...]] = ("rows", "known", "index")
    gives: ClassVar[tuple[str, ...]] = ("decisions", "index")
    share: ClassVar[float] = 0.6

    def run(self, state: TriageState, clock: StepClock) -> None:
        reducible = set(state.cfg.reduce_verdicts)
        if "mismatch" in reducible:
            self._mismatches(state, clock, [r for r in state.rows if r["verdict"] == "mismatch"])
        for base, rows in crash_failures(state.rows).items():
            if base.kind == "bug" and base.verdict in reducible:
                self._failure(state, clock, base, rows)

    def _mismatches(self, state: TriageState, clock: StepClock,
                    rows: list[dict[str, Any]]) -> None:
        per_backend: dict[str, int] = {}
        for row in rows:
            d = row.get("finding_dir")
            n = per_backend.get(row["backend"], 0)
            if not d or n >= state.cfg.reduce_mismatches:
                continue
            entry = state.index.get(d)
            known = None if state.cfg.reduce_known else pattern_fit(row, state.known_keys)
            if known is not None and entry is None:  # a known bug: not reduced again
                state.decisions[d] = Decision(known, None)
                continue
            if entry is not None and entry.get("key", [None] * 6)[5]:
                red = state.cached(d)
                if red is not None:
                    state.decisions[d] = Decision(BucketKey(*entry["key"]), red)
                    per_backend[row["backend"]] = n + 1
                    continue
            red = reduce_one(state, clock, d)
            if red is None or red.status == "error":
                continue
            per_backend[row["backend"]] = n + 1
            key = mismatch_key(row["backend"], row.get("target") or "", red.graph,
                               red.backend_config)
            if red.status == "reduced":
                state.index_entry(d, key, red)
            state.decisions[d] = Decision(key, red)

    def _failure(self, state: TriageState, clock: StepClock, base: BucketKey,
                 rows: list[dict[str, Any]]) -> None:
        known = [k for k in state.known_keys if k.base() == base]
        reduced: list[BucketKey] = []
        pending = [r for r in rows if r.get("finding_dir") and (state.cfg.reduce_known or (
            state.explained(r, known) is None and crash_key(r).id not in state.known))]
        for _ in range(max(state.cfg.reduce_first, 1)):
            pick = next((r for r in pending if state.explained(r, reduced) is None),
                        pending[0] if pending else None)
            if pick is None:
                break
            pending.remove(pick)
            d = pick["finding_dir"]
            red = state.cached(d) or reduce_one(state, clock, d)
            if red is None:
                continue
            if red.status in ("reduced", "cached"):
                key = replace(base, config=red.backend_config)
                reduced.append(key)
                if red.status == "reduced":
                    state.index_entry(d, key, red)
            else:
                key = crash_key(pick)
            state.decisions[d] = Decision(key, red)


def reduce_one(state: TriageState, clock: StepClock, finding_dir: str) -> Any:
    """Reduce the finding in `finding_dir` (relative to the output dir); None when it has no
    graph or the step's time is spent. A reduction that raises is an `error` reduction."""
    from campaign.triage.pipeline.reduction import Reduction, load_finding, reduce_finding

    case = load_finding(state.out / finding_dir)
    if case is None:
        return None
    left = clock.time_left()
    # under a hard deadline a timeout's reduction must fit a few of its candidate runs
    need = 3 * state.limit(case.info) if case.verdict == "timeout" else MIN_REDUCTION_S
    if not clock.fits(need):
        return None
    clock.tick(f"reducing {case.backend} {case.verdict}")
    state.log(f"triage: reducing {finding_dir} ({case.graph.num_insts()} insts) on {case.spec}")
    t0 = time.monotonic()
    try:
        # under a hard deadline one slow reduction (the exporter's: seconds a candidate) must
        # not take all the time the other buckets need
        share = max(MIN_REDUCTION_S, left / HARD_REDUCTION_SHARE) if clock.hard else left
        red = reduce_finding(case, state.runner(case.backend, state.limit(case.info)),
                             state.cfg.max_tests, min(state.cfg.max_seconds, share))
    except Exception as e:  # a triage bug must not lose the campaign's results
        state.log(f"triage: reducing {finding_dir} failed: {type(e).__name__}: {e}")
        red = Reduction(case, "error", case.graph, case.values, case.extra_sets,
                        note=f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    red.summary["total_seconds"] = round(time.monotonic() - t0, 2)  # confirmation included
    state.reductions += 1
    configured = (f", configuration {case.config!r} -> {red.backend_config!r}"
                  if case.config else "")
    state.log(f"triage:   {red.status}: {red.original_insts} -> {red.reduced_insts} insts"
              f"{configured} in {time.monotonic() - t0:.1f} s")
    return red
