"""Capability routing and known bugs: which backend gets a test, and which tests are made for
a backend that would otherwise idle. A backend is never given a test whose graph holds an op it
lacks (`Backend.LACKS`), and mostly not one that matches a known bug of its own; a backend that
lacks ops and has fewer tests waiting than actors gets tests made without them. A known bug
whose trigger matches more than a tenth of a backend's tests is too general to hold any back
(`GENERAL_SHARE`). A backend held back for an environment fault (`campaign.env_fault`) gets no
test at all. Plain Python: the campaign asks, the router counts (for the summary)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from campaign.driver.work import PipelineTest
from campaign.ids import sampled
from campaign.modes import MODES

if TYPE_CHECKING:
    from campaign.driver.actor_pool import Pool


#: a known bug's trigger stops holding tests back from its backend once that backend has been
#: offered `GENERAL_AFTER` tests and more than `GENERAL_SHARE` of them, and at least
#: `GENERAL_MATCHES`, matched it (a few matches early are no rate): a skeleton
#: most tests hold (a lone `scan`, an `if` and a `neg`) says little about the bug (which needs
#: what the skeleton leaves out: an attribute, a carry returned twice) and would starve the
#: backend of the very programs it should be fuzzed with
GENERAL_AFTER, GENERAL_SHARE, GENERAL_MATCHES = 20, 0.1, 5


@dataclass(frozen=True)
class Lacks:
    """What one backend cannot take, per test mode (`campaign.modes`, by name): the ops of
    each mode's tests it lacks (`TestMode.lacks`), and the modes it refuses whole
    (`TestMode.refusal`)."""

    by_mode: dict[str, frozenset[str]]
    refused: frozenset[str] = frozenset()

    @classmethod
    def of(cls, backend: Any) -> Lacks:
        return cls({name: frozenset(m.lacks(backend)) for name, m in MODES.items()},
                   frozenset(name for name, m in MODES.items() if m.refusal(backend)))

    def ops(self, mode: str | None = None) -> frozenset[str]:
        """The ops a test of `mode` may not hold (None or unknown: an inference test's)."""
        return self.by_mode.get(mode or "infer", self.by_mode.get("infer", frozenset()))


class Router:
    """Routing decisions and their counts, per backend."""

    def __init__(self, backends: list[str], lacks: Mapping[str, Lacks | frozenset[str]],
                 known_rate: float) -> None:
        """`lacks`: per backend, what it cannot take (`Lacks`; a set of ops: those, in every
        mode; empty: capability routing off); `known_rate`: the share of tests matching a
        backend's known bug that still go to it."""
        self.caps = {b: v if isinstance(v, Lacks) else Lacks({m: v for m in MODES})
                     for b, v in lacks.items()}
        #: per backend, the ops an inference test may not hold: what a test made for it avoids
        self.lacks = {b: c.ops() for b, c in self.caps.items() if c.ops()}
        self.known_rate = known_rate
        #: per backend: tests offered to it (not lacking an op), and how many matched each
        #: known bug's trigger; triggers found too general (`GENERAL_SHARE`) hold nothing back
        self.offered: Counter[str] = Counter()
        self.matched: dict[str, Counter[str]] = {b: Counter() for b in backends}
        #: per backend: tests let through because the trigger they matched is too general
        self.too_general: dict[str, Counter[str]] = {b: Counter() for b in backends}
        #: per backend: tests not sent to it, by the op it lacks
        self.not_applicable: dict[str, Counter[str]] = {b: Counter() for b in backends}
        #: per backend: tests held back for matching a known bug's trigger, by bucket
        self.held_known: dict[str, Counter[str]] = {b: Counter() for b in backends}
        #: per backend: tests made without the ops it lacks, in generation now
        self.making_for: Counter[str] = Counter()
        #: per backend: tests made for it without the ops it lacks
        self.made_for: Counter[str] = Counter()
        #: backends held back for an environment fault (`hold_back`), and per backend the
        #: tests they were not given since (routed, or dropped from their queues)
        self.env_held: set[str] = set()
        self.held_env: Counter[str] = Counter()

    def hold_back(self, backend: str) -> None:
        """`backend` has an environment fault: it gets no more tests (`route`)."""
        self.env_held.add(backend)

    def make_for_starving(self, test: PipelineTest, evals: dict[str, Pool]) -> None:
        """Have `test` made for a backend of its own that would idle, if one does (`starving`)."""
        b = self.starving(test.backends, evals)
        if b is not None:  # made without the ops this backend lacks, so it has work
            test.avoid, test.made_for = self.lacks[b], b
            self.making_for[b] += 1
            self.made_for[b] += 1

    def starving(self, backends: list[str], evals: dict[str, Pool]) -> str | None:
        """A backend of `backends` that lacks some ops and would idle: fewer tests waiting for
        it (queued, or being made for it) than it has actors. Ties go to the fewest waiting."""
        best: tuple[int, str] | None = None
        for b in backends:
            if b not in self.lacks or b in self.env_held:
                continue
            pool = evals[b]
            waiting = len(pool.queue) + len(pool.retry) + self.making_for[b]
            if waiting < pool.n and (best is None or waiting < best[0]):
                best = (waiting, b)
        return best[1] if best else None

    def generated(self, test: PipelineTest) -> None:
        """`test` left generation (made, invalid or failed)."""
        if test.made_for is not None:
            self.making_for[test.made_for] -= 1
            test.made_for = None

    def lacking(self, backend: str, ops: list[str] | None, mode: str | None = None) -> list[str]:
        """What of a test (its rows' `ops` and `mode`) `backend` cannot take, sorted: the ops
        it lacks for that mode, or `<mode> test` for a mode it refuses whole."""
        caps = self.caps.get(backend)
        if caps is None:
            return []
        if mode in caps.refused:
            return [f"{mode} test"]
        return sorted(caps.ops(mode) & set(ops or ()))

    def route(self, test: PipelineTest, b: str, known: dict[str, str]) -> bool:
        """Whether backend `b` gets `test`: not when its graph holds an op `b` lacks (counted
        as not applicable, by that op), nor, mostly, when it matches a known bug of `b`
        (counted as held back; `campaign.known_rate` of such tests still go); never when `b`
        is held back for an environment fault (counted apart)."""
        if b in self.env_held:
            self.held_env[b] += 1
            return False
        base: Mapping[str, Any] = test.base or {}
        lacking = self.lacking(b, base.get("ops"), base.get("mode"))
        if lacking:
            self.not_applicable[b][lacking[0]] += 1
            return False
        self.offered[b] += 1
        bucket = known.get(b)
        if bucket is None:
            return True
        self.matched[b][bucket] += 1
        if self.general(b, bucket):
            self.too_general[b][bucket] += 1
            return True
        if not sampled(test.seed, f"known:{bucket}", self.known_rate):
            self.held_known[b][bucket] += 1
            return False
        return True

    def general(self, b: str, bucket: str) -> bool:
        """Whether known bug `bucket`'s trigger matched too many of the tests offered to `b`
        to be evidence of the bug (`GENERAL_AFTER`, `GENERAL_SHARE`)."""
        n = self.matched[b][bucket]
        return (self.offered[b] >= GENERAL_AFTER and n >= GENERAL_MATCHES
                and n > GENERAL_SHARE * self.offered[b])

    def applicable(self, report: Any) -> Any:
        """An invalid test's report without the rows of backends that lack one of its ops
        (they would not have been given it), unless that leaves none."""
        keep = [r for r in report.rows
                if not self.lacking(r["backend"], r.get("ops"), r.get("mode"))]
        if keep and len(keep) < len(report.rows):
            report.rows = keep
        return report
