"""Step `record`: an upstream-ready report.md per bug (`pages.upstream_report`), then this
triage's buckets into the bug database, if there is one (`bugdb.sightings.record`: what it
got is the report's last lines)."""
from __future__ import annotations

from typing import ClassVar

from campaign.triage.pipeline.buckets import read_bugs_table
from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import TriageState


class Record:
    name: ClassVar[str] = "record"
    needs: ClassVar[tuple[str, ...]] = ("table",)
    gives: ClassVar[tuple[str, ...]] = ("recorded",)
    share: ClassVar[float] = 0.0

    def run(self, state: TriageState, clock: StepClock) -> None:
        from campaign.triage.pages.upstream_report import write_reports

        assert state.table is not None  # the table step gave it
        rows = read_bugs_table(state.table).to_pylist()
        reports = write_reports(state.out, rows, *state.seen_sources())
        if state.db is None:
            return
        from campaign.triage.bugdb.sightings import record

        state.recorded = record(state.db, state.out, rows, reports=reports)
