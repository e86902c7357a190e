"""Step `bucket`: every row into its bucket, and each bucket's representative.

A reduced row joins the bucket its reduction decided (`decisions`). Of a crash-like failure,
every other row joins the bucket of the most specific reduced (or known) configuration its
own holds (`config_covers`), else a bucket of its configuration as drawn. A mismatch row not
reduced joins the reduced bucket of its backend whose pattern's ops all occur in the row's
ops and whose configuration its own holds (`buckets.pattern_fit`), else the backend's
`unreduced` bucket of its configuration. Without configurations (every `backend_config` '')
this is: one bucket per failure.

A bucket is represented by its smallest reduction, else by a reduction an earlier triage of
this output made of one of its findings, else by its oldest finding as it is (`not reduced`:
the confirm step re-runs it).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from campaign.triage.pipeline.buckets import (
    UNREDUCED,
    BucketKey,
    crash_failures,
    crash_key,
    pattern_fit,
)
from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import TriageState


class Bucketing:
    name: ClassVar[str] = "bucket"
    needs: ClassVar[tuple[str, ...]] = ("rows", "known", "decisions")
    gives: ClassVar[tuple[str, ...]] = ("buckets", "best")
    share: ClassVar[float] = 0.0

    def run(self, state: TriageState, clock: StepClock) -> None:
        self._mismatches(state, [r for r in state.rows if r["verdict"] == "mismatch"])
        for base, rows in crash_failures(state.rows).items():
            if base.kind != "bug":  # ours or a known gap: the first finding folder says enough
                for row in rows:
                    state.add(crash_key(row), row)
                continue
            self._failure(state, base, rows)

    def _mismatches(self, state: TriageState, rows: list[dict[str, Any]]) -> None:
        rest = []
        for row in rows:
            decision = state.decisions.get(row.get("finding_dir") or "")
            if decision is None:
                rest.append(row)
                continue
            b = state.add(decision.key, row)
            red = decision.red
            if red is None:
                continue
            if red.status not in ("reduced", "cached"):
                b.note = f"mismatch {red.status}: {red.note}"[:500]
            state.offer(decision.key, red)
        for row in rest:
            config = row.get("backend_config") or ""
            key = pattern_fit(row, list(state.buckets)) or BucketKey(
                row["backend"], row.get("target") or "", "mismatch", "compare", None,
                UNREDUCED, config)
            state.add(key, row)
            if row.get("finding_dir") and key.pattern == UNREDUCED:
                represent(state, key, [row["finding_dir"]])

    def _failure(self, state: TriageState, base: BucketKey, rows: list[dict[str, Any]]) -> None:
        known = [k for k in state.known_keys if k.base() == base]
        chosen = {d: dec for r in rows if (d := r.get("finding_dir"))
                  and (dec := state.decisions.get(d)) is not None}
        reduced = [replace(base, config=dec.red.backend_config) for dec in chosen.values()
                   if dec.red is not None and dec.red.status in ("reduced", "cached")]
        for dec in chosen.values():
            if dec.red is not None:
                state.offer(dec.key, dec.red)
        keys: list[BucketKey] = []
        for row in rows:
            d = row.get("finding_dir")
            dec = chosen.get(d) if d else None
            key = (dec.key if dec else None) or state.explained(row, reduced + known) \
                or crash_key(row)
            state.add(key, row)
            keys.append(key)
        for key in dict.fromkeys(keys):
            b = state.buckets[key]
            dirs = [d for _, _, d in sorted(b.members, key=lambda m: (m[0] is None, m[0] or 0))
                    if d]
            if dirs:
                represent(state, key, dirs)


def represent(state: TriageState, key: BucketKey, dirs: list[str]) -> None:
    """Give bucket `key` a representative if no reduction does (module doc)."""
    from campaign.triage.pipeline.reduction import Reduction, load_finding

    if key in state.best:
        return
    for d in dirs:  # a known bucket's is not reduced again, nor its bug folder overwritten
        if (state.index.get(d) or {}).get("bucket") == key.id:
            red = state.cached(d)
            if red is not None:
                state.offer(key, red)
                return
    case = load_finding(state.out / dirs[0])
    if case is not None:
        state.best[key] = Reduction(case, "not reduced", case.graph, case.values,
                                    case.extra_sets)
