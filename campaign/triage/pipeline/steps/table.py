"""Step `table`: `bugs/reduced.json` (every finding folder reduced so far -> its bucket, for
the next triage), each bug whose repro.py was run and did not reproduce, none of its buckets'
having reproduced, marked `unconfirmed` (`buckets.unconfirmed`: a harness or environment
failure is never a compiler bug), and the `bugs` table (`buckets.write_bugs_table`)."""
from __future__ import annotations

import json
from typing import ClassVar

from campaign.triage.pipeline.buckets import BUGS_FILE, rows_by_bug, unconfirmed, write_bugs_table
from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import INDEX, TriageState


class Table:
    name: ClassVar[str] = "table"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "index", "bugs")
    gives: ClassVar[tuple[str, ...]] = ("table",)
    share: ClassVar[float] = 0.0

    def run(self, state: TriageState, clock: StepClock) -> None:
        state.bugs_dir.mkdir(parents=True, exist_ok=True)
        (state.bugs_dir / INDEX).write_text(json.dumps(state.index, indent=2) + "\n")
        bugs = rows_by_bug([{"bucket": b.key.id, "bug": b.bug, "b": b}
                            for b in state.buckets.values() if b.kind == "bug"])
        for members in bugs.values():
            if unconfirmed(m["b"].repro_status for m in members):
                for m in members:
                    m["b"].unconfirmed = True
        state.table = write_bugs_table(state.out / BUGS_FILE, list(state.buckets.values()))
