"""The triage's time: one budget (soft, or a hard deadline after a campaign), shared out
among the pipeline's steps.

A `TriageClock` is the whole budget. The driver gives each step a `StepClock`: the step may
use its share of the time left when it starts, normalized over itself and the steps after it
that take a share (`Step.share`), so time a step leaves unused goes to the later ones. Under
a hard deadline no step runs past it, and a piece of work that does not fit is counted as
skipped (the report's "continue with" line); under a soft budget a step's pieces start while
its share has time left.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

#: a piece of work that runs a fresh process (a repro.py, a re-run of a test: a fresh Python
#: importing torch takes a few seconds) starts only with this many seconds left
MIN_RUN_S = 10.0


@dataclass
class TriageClock:
    """The triage's budget: `deadline` (monotonic), `hard` when nothing may run past it."""

    deadline: float
    hard: bool = False
    #: a progress bar of the seconds used (tqdm), or None
    bar: Any = None
    #: pieces of work left undone for lack of time (hard deadline), over every step
    skipped: int = 0

    @classmethod
    def of(cls, seconds: float, deadline: float | None = None) -> TriageClock:
        """A soft budget of `seconds` from now, or the hard `deadline` if given."""
        if deadline is not None:
            return cls(deadline, hard=True)
        return cls(time.monotonic() + seconds)

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str, share: float, later_shares: float) -> StepClock:
        """The clock of step `name`, which takes `share` of what is left, normalized over
        `share + later_shares`; a step of no share gets no time for runs."""
        left = max(self.time_left(), 0.0)
        total = share + later_shares
        part = left * share / total if total > 0 else 0.0
        return StepClock(self, name, time.monotonic() + part)

    def tick(self, what: str) -> None:
        """Advance the progress bar (seconds of the budget used) and say what is running."""
        if self.bar is not None:
            used = max(0.0, self.bar.total - max(self.time_left(), 0.0))
            self.bar.update(round(used - self.bar.n, 1))
            self.bar.set_postfix_str(what[:40], refresh=True)


@dataclass
class StepClock:
    """One step's share of a `TriageClock`: it ends at `deadline` (never after the clock's)."""

    clock: TriageClock
    name: str
    deadline: float
    #: this step's pieces of work left undone for lack of time
    skipped: int = field(default=0)

    @property
    def hard(self) -> bool:
        return self.clock.hard

    def time_left(self) -> float:
        return min(self.deadline, self.clock.deadline) - time.monotonic()

    def fits(self, seconds: float) -> bool:
        """Whether a piece of work that may take `seconds` can still start: any of the step's
        time left, or under a hard deadline that much (one that does not fit is skipped)."""
        left = self.time_left()
        ok = left > 0 and (not self.hard or left >= seconds)
        if not ok and self.hard:
            self.skipped += 1
            self.clock.skipped += 1
        return ok

    def tick(self, what: str) -> None:
        self.clock.tick(what)
