"""The driver of the triage's steps (`campaign.triage.pipeline.steps`).

`Pipeline(steps, given)` checks once that each step's `needs` are pipeline inputs
(`INPUTS`, and `given`: what the caller filled in) or given by an earlier step, then runs the
steps in order, each on its share of the clock. A step that raises is logged and recorded as
failed; the steps that need what it gives are not run (their work stays for the next
triage), the others are. After each step the journal `bugs/steps.json` says which ran, how
long, and how many pieces of work each left for lack of time; a triage of the same output
resumes from what is on disk, each step doing only the work left (`steps.base`), and says
what the last one left.
"""
from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from campaign.triage.pipeline.clock import TriageClock
from campaign.triage.pipeline.state import TriageState
from campaign.triage.pipeline.steps.base import INPUTS, Step

JOURNAL = "steps.json"


@dataclass
class StepRecord:
    """One step's run, as the journal keeps it."""

    name: str
    #: "done", "partial" (pieces skipped for lack of time), "failed" (it raised: `error`),
    #: "not run" (a step it needs failed)
    status: str
    seconds: float = 0.0
    skipped: int = 0
    error: str | None = None


class Pipeline:
    """Steps run in order on one state and one clock (module doc)."""

    def __init__(self, steps: list[Step], given: set[str] | frozenset[str] = frozenset()):
        given = set(INPUTS) | set(given)
        for step in steps:
            missing = [n for n in step.needs if n not in given]
            if missing:
                raise ValueError(f"triage step {step.name!r} needs {', '.join(missing)}, "
                                 "which no earlier step gives")
            given |= set(step.gives)
        self.steps = list(steps)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def run(self, state: TriageState, clock: TriageClock,
            journal: Path | None = None) -> list[StepRecord]:
        """Run every step (module doc); the records, also written to `journal` as each step
        ends when given."""
        if journal is not None:
            self._resume_line(state, journal)
        records: list[StepRecord] = []
        lost: set[str] = set()
        for i, step in enumerate(self.steps):
            if lost & set(step.needs):
                records.append(StepRecord(step.name, "not run",
                                          error=f"needs {', '.join(sorted(lost & set(step.needs)))}"))
                lost |= set(step.gives)
                continue
            later = sum(s.share for s in self.steps[i + 1:])
            step_clock = clock.step(step.name, step.share, later)
            t0 = time.monotonic()
            try:
                step.run(state, step_clock)
            except Exception as e:  # a triage bug must not lose the campaign's results
                state.log(f"triage: step {step.name} failed: {type(e).__name__}: {e}\n"
                          f"{traceback.format_exc()}")
                records.append(StepRecord(step.name, "failed", time.monotonic() - t0,
                                          step_clock.skipped, f"{type(e).__name__}: {e}"))
                lost |= set(step.gives)
            else:
                records.append(StepRecord(step.name,
                                          "partial" if step_clock.skipped else "done",
                                          round(time.monotonic() - t0, 2), step_clock.skipped))
            if journal is not None:
                _write_journal(journal, records, self.names)
        return records

    @staticmethod
    def _resume_line(state: TriageState, journal: Path) -> None:
        """Say what the last triage of this output left, if it left anything."""
        last = read_journal(journal)
        left = [r["name"] for r in last.get("steps", [])
                if r.get("status") in ("partial", "failed", "not run")]
        unrun = [n for n in last.get("pipeline", [])
                 if n not in {r.get("name") for r in last.get("steps", [])}]
        if left or unrun:
            state.log(f"triage: resuming: the last triage of this output left work in "
                      f"{', '.join(left + unrun)}")


def read_journal(path: Path) -> dict[str, Any]:
    """The journal at `path` ({} when there is none or it cannot be read)."""
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _write_journal(path: Path, records: list[StepRecord], names: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"pipeline": names, "steps": [asdict(r) for r in records]},
                              indent=2) + "\n")
    tmp.replace(path)
