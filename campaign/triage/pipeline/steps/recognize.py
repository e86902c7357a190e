"""Step `recognize`: what is known before anything runs. The rows of an environment fault
the campaign named are bucketed apart (their bucket's `env_fault`, kind `env`: never reduced
nor taken for a compiler bug) and leave `rows`; a crash-like failure that no note trigger
keys exactly but that one of them keys as another release raises it (`NoteForms.by_key`:
F56's RuntimeError of torch 2.13 is a NotImplementedError on 2.14.1), or whose cause one of
them has (`NoteForms.by_cause`), is that note's bug in another form: its buckets become known,
named by the note (unless `reduce_known`)."""
from __future__ import annotations

from typing import Any, ClassVar

from campaign.triage.pipeline.buckets import crash_key
from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import TriageState


class Recognize:
    name: ClassVar[str] = "recognize"
    needs: ClassVar[tuple[str, ...]] = ("rows", "known")
    gives: ClassVar[tuple[str, ...]] = ("rows", "known", "buckets")
    share: ClassVar[float] = 0.0

    def run(self, state: TriageState, clock: StepClock) -> None:
        state.rows = sorted(state.rows, key=lambda r: (r.get("ts") is None, r.get("ts") or 0,
                                                       r["test_id"]))
        if state.env_faults:
            state.rows = [r for r in state.rows if not self._environment(state, r)]
        if state.cfg.reduce_known:
            return
        for row in state.rows:
            if row["verdict"] == "mismatch":
                continue
            key = crash_key(row)
            if key.kind != "bug":
                continue
            note = state.note_forms.by_key(key) or state.note_forms.by_cause(key.base())
            if note is not None and key.id not in state.known:
                state.known.add(key.id)
                state.findings[key.id] = note

    @staticmethod
    def _environment(state: TriageState, row: dict[str, Any]) -> bool:
        fault = next((f for f in state.env_faults if f.holds(row["backend"], row)), None)
        if fault is None:
            return False
        state.add(crash_key(row), row).env_fault = fault.line()
        return True
