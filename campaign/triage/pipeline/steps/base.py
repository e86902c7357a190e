"""A step of the triage pipeline: a named piece of the triage with the state fields it reads
(`needs`), the ones it fills (`gives`) and its share of the time budget (`share`).

A step is idempotent over what earlier triages of the same output left on disk (reductions
in `bugs/reduced.json`, repro checks, ablations and localizations in each bug folder's
info.json): run again, it does only the work left. That is what lets the driver resume.
"""
from __future__ import annotations

from typing import ClassVar, Protocol

from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import TriageState

#: what the pipeline starts from: the rows, the known bugs and the earlier triages' reductions
INPUTS = frozenset({"rows", "known", "index"})


class Step(Protocol):
    """One step (module doc)."""

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]]
    gives: ClassVar[tuple[str, ...]]
    #: its share of the time left when it starts, normalized over itself and the later
    #: steps' shares (0: it runs nothing in a sandbox, or only what is left over)
    share: ClassVar[float]

    def run(self, state: TriageState, clock: StepClock) -> None: ...
