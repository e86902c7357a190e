"""Step `name`: a new bucket that is a note's bug in another form is named by the note and
is no longer new, before any repro check or localization spends time on it as a new bug.

- by its core: its reduced graph has a note trigger's core (compiler, verdict and stage too:
  `NoteForms.by_core`), e.g. a consumer no message ties to the note (F21's Slice);
- by its cause: its failure goes away with a note's cause taken out, the note's bug still
  failing here (`cause_probe`): up to three runs of its test and one of a trigger per note.

A cause or core two notes share names neither.
"""
from __future__ import annotations

from typing import Any, ClassVar

from campaign.triage.pipeline.buckets import Bucket, BucketKey
from campaign.triage.pipeline.clock import MIN_RUN_S, StepClock
from campaign.triage.pipeline.state import TriageState


class Name:
    name: ClassVar[str] = "name"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "best")
    gives: ClassVar[tuple[str, ...]] = ("buckets",)
    share: ClassVar[float] = 0.1

    def run(self, state: TriageState, clock: StepClock) -> None:
        for key, red in state.best.items():
            name_by_core(state, key, state.buckets[key], red)
            if state.note_probes:
                name_by_cause(state, clock, key, state.buckets[key], red)


def name_by_core(state: TriageState, key: BucketKey, b: Bucket, red: Any) -> None:
    """Name a new bucket whose reduced graph has a note trigger's core by the note."""
    if not b.new or b.finding is not None or red.status not in ("reduced", "cached"):
        return
    note = state.note_forms.by_core(key, red.graph)
    if note is not None:
        b.new, b.finding = False, note
        state.log(f"triage: {key.id} is {note} in another form (its reduced graph's core)")


def name_by_cause(state: TriageState, clock: StepClock, key: BucketKey, b: Bucket,
                  red: Any) -> None:
    """Name a new bucket whose failure goes away with a note's cause taken out by the note."""
    from campaign.triage.pipeline.cause_probe import probe, trigger_live

    if (not b.new or b.finding is not None or key.kind != "bug" or red.graph is None
            or red.status not in ("reduced", "cached", "confirmed", "not reduced")
            or not clock.fits(3 * min(state.limit(red.case.info), MIN_RUN_S))):
        return

    def runner_for(spec: str) -> Any:
        return state.runner(spec, state.limit(red.case.info))

    def live(note: Any) -> str | None:
        if note.finding not in state.live_triggers:
            state.live_triggers[note.finding] = trigger_live(note, runner_for)
        return state.live_triggers[note.finding]

    clock.tick(f"probing {key.id}")
    try:
        match = probe(red, red.spec, key.verdict, state.note_probes, runner_for, live)
    except Exception as e:  # a triage bug must not lose the campaign's results
        state.log(f"triage: probing {key.id} failed: {type(e).__name__}: {e}")
        return
    if match is not None:
        b.new, b.finding = False, match.finding
        b.note = match.why[:500]
        state.log(f"triage: {key.id} is {match.finding} in another form ({match.why})")
