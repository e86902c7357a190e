"""`CoreScheduler`: which stage of a campaign gets the next free core.

A campaign's stages (generation and each backend) are pools of actors, each actor one CPU-bound
process at a time (a generation actor, or an evaluation actor waiting on its sandbox process,
which does the work). Left to the OS, six such processes on two cores each get a third of a
core: Inductor's 4 s compile takes 20 s and ORT's queue decides how the cores are spent. The
scheduler makes the campaign decide instead:

- **Cores are tokens.** At most `cores` actor calls run at once across all stages; a call holds
  one core from the moment it is sent until its result is back. An actor runs one call at a
  time under the scheduler (no calls queued behind it), so the driver can re-decide at every
  call boundary.
- **Shares by weighted fair queueing.** Each stage has a share (`campaign.backend_options.<b>
  .share`, `campaign.generation.share`). Every stage carries a virtual time: the core-seconds
  its calls held, divided by its share. A free core goes to the stage with the smallest
  virtual time among those with work ready (an idle actor and a due batch). A call is charged
  its expected cost when it is sent and corrected to what it took when it returns, so two
  cores freeing at once are not both given to the same stage.
- **No hoarding.** A call holds its core until it returns, so a slow stage (calls of seconds,
  `SLOW_CALL_S`) holds more cores than its share of them (rounded up) only while no other
  stage has work ready; a fast one frees its cores too often to need the rule.
- **No banking.** A stage that had no work does not save up credit: when it becomes ready again
  its virtual time is raised to the smallest of the stages that are running or ready (the
  system's virtual clock). Stage shares are therefore shares of what is contended; an idle
  stage's share goes to the others (work-conserving).
- **Accounting.** `core_s` per stage: the wall time of its calls, each holding one core
  (the figure the summary reports as CPU-seconds; a sandbox that spawns threads is not seen).

Plain Python, no Ray: the driver calls `ready`, `pick`, `start` and `finish`; tests drive it
with stand-in costs.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

#: a stage whose calls take longer than this (seconds, on average) is slow: while another stage
#: has work ready it holds no more than its share of the cores, rounded up (`fair_cores`)
SLOW_CALL_S = 2.0


@dataclass
class StageAccount:
    """One stage's standing: its share, virtual time, cores held and core-seconds used."""

    share: float
    vtime: float = 0.0
    running: int = 0  #: calls holding a core now
    core_s: float = 0.0  #: core-seconds of calls that came back
    calls: int = 0
    active: bool = False  #: ready or running at the last decision (for the no-banking rule)
    call_s: float | None = None  #: moving average of its calls' durations

    @property
    def slow(self) -> bool:
        """Its calls hold a core for long (SLOW_CALL_S): the no-hoarding rule applies."""
        return self.call_s is not None and self.call_s > SLOW_CALL_S


@dataclass
class CoreScheduler:
    """Weighted fair sharing of `cores` among stages (module doc). `cores` <= 0: no limit (every
    ready stage gets a core at once: the OS decides, as without a scheduler)."""

    cores: int
    shares: dict[str, float]
    stages: dict[str, StageAccount] = field(init=False)

    def __post_init__(self) -> None:
        bad = {s: v for s, v in self.shares.items() if not v > 0}
        if bad:
            name, v = next(iter(bad.items()))
            raise ValueError(f"share of {name!r} must be > 0, got {v}")
        self.stages = {s: StageAccount(v) for s, v in self.shares.items()}

    # ---- state -----------------------------------------------------------------------------
    @property
    def running(self) -> int:
        return sum(a.running for a in self.stages.values())

    def free(self) -> int:
        """Cores not held by a call (a large number when there is no limit)."""
        return (1 << 30) if self.cores <= 0 else self.cores - self.running

    def clock(self) -> float | None:
        """The virtual clock: the smallest virtual time of the active stages (None: none)."""
        times = [a.vtime for a in self.stages.values() if a.active or a.running]
        return min(times) if times else None

    # ---- decisions -------------------------------------------------------------------------
    def ready(self, stages: Iterable[str]) -> None:
        """Tell the scheduler which stages have work ready now; a stage that was idle starts
        at the virtual clock (it banked no credit while it had nothing to do)."""
        ready = set(stages)
        now = self.clock()
        for name, a in self.stages.items():
            if name in ready and not a.active and not a.running and now is not None:
                a.vtime = max(a.vtime, now)
            a.active = name in ready

    def fair_cores(self, stage: str) -> int:
        """The most cores a slow `stage` holds at once while another stage has work ready: its
        share of the cores, rounded up (at least one). A call holds its core until it returns, so
        two of a slow stage's compiles of 30 s each would otherwise hold both cores of a
        2-core machine for 30 s, whatever the shares say."""
        if self.cores <= 0:
            return 1 << 30
        share = self.normalized_shares()[stage]
        return max(1, math.ceil(share * self.cores - 1e-9))

    def pick(self, candidates: Iterable[str]) -> str | None:
        """The stage that gets the next free core among `candidates` (stages with work ready):
        the smallest virtual time, ties by name, among those below their `fair_cores` (any of
        them when all are at it: no core idles while there is work); None when no core is
        free or none is ready."""
        cands = [c for c in candidates if c in self.stages]
        if not cands or self.free() <= 0:
            return None
        below = [c for c in cands
                 if not self.stages[c].slow or self.stages[c].running < self.fair_cores(c)]
        return min(below or cands, key=lambda c: (self.stages[c].vtime, c))

    def start(self, stage: str, expected_s: float) -> None:
        """A call of `stage` was sent: it holds a core; charge its expected cost now."""
        a = self.stages[stage]
        a.running += 1
        a.calls += 1
        a.vtime += max(expected_s, 0.0) / a.share

    def finish(self, stage: str, expected_s: float, took_s: float) -> None:
        """A call of `stage` came back after `took_s` seconds: free its core and correct the
        charge made at `start` to what it took."""
        a = self.stages[stage]
        a.running = max(0, a.running - 1)
        a.core_s += max(took_s, 0.0)
        a.call_s = took_s if a.call_s is None else 0.7 * a.call_s + 0.3 * took_s
        a.vtime += (max(took_s, 0.0) - max(expected_s, 0.0)) / a.share

    def release(self, stage: str) -> None:
        """A call of `stage` will never come back (its actor was killed): free its core."""
        a = self.stages[stage]
        a.running = max(0, a.running - 1)

    # ---- reporting ---------------------------------------------------------------------------
    def normalized_shares(self) -> dict[str, float]:
        total = sum(a.share for a in self.stages.values())
        return {s: a.share / total for s, a in self.stages.items()}

    def report(self) -> dict[str, dict[str, float]]:
        """Per stage: its share (normalized), core-seconds used and the fraction of all used."""
        used = sum(a.core_s for a in self.stages.values()) or 1.0
        shares = self.normalized_shares()
        return {s: {"share": round(shares[s], 4), "core_s": round(a.core_s, 2),
                    "core_frac": round(a.core_s / used, 4), "calls": a.calls}
                for s, a in self.stages.items()}
