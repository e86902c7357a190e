"""Which pass runs next: the reducer's adaptive schedule, in the manner of Hypothesis's shrinker
(`Shrinker.fixate_shrink_passes`).

The passes run in rounds. In a round each pass runs on the current graph until it is exhausted
(no candidate left: the candidates of a pass are regenerated after every accepted one) or
until it fails `max_failures` times in a row (a failure: a candidate that cost a validity check
or a predicate call and was refused), when it is suspended and the next pass runs. Then:
  - passes are reordered by success (Hypothesis's rule): those that removed instructions
    first, then those that shrank the graph otherwise, then those that did nothing (stable);
  - a round that shrank nothing but suspended a pass is a stall: the order is shuffled (a
    `random.Random(seed)`: the schedule is deterministic given the seed) and the next round
    resumes each suspended pass where it stopped (the graph has not changed);
  - a round that shrank nothing and suspended nothing is the fixed point: every pass was
    exhausted on the final graph, as when they ran in a fixed order to exhaustion.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class PassStats:
    """What one pass did over a reduction (the reduction summary's `passes`)."""

    candidates: int = 0  #: proposed
    seen: int = 0  #: skipped: canonical form already tried
    not_smaller: int = 0
    invalid: int = 0  #: refused by the verifier
    no_inputs: int = 0  #: no valid inputs found
    tests: int = 0  #: predicate calls
    accepted: int = 0
    suspended: int = 0  #: runs stopped at the failure cap


@dataclass(frozen=True)
class Outcome:
    """How one run of a pass went."""

    progress: bool  #: accepted a candidate
    fewer_insts: bool  #: ... and the graph has fewer instructions than when the run started
    suspended: bool  #: stopped at its failure cap, candidates left


#: `run_pass(name, max_failures) -> Outcome`: the reducer's side
RunPass = Callable[[str, int], Outcome]


class Schedule:
    """The order of the passes and the rounds (module doc)."""

    def __init__(self, names: Sequence[str], seed: int = 0, max_failures: int = 50):
        self.order = list(names)
        self.rng = random.Random(seed)
        self.max_failures = max_failures
        self.rounds = 0
        self.stalls = 0

    def run(self, run_pass: RunPass) -> None:
        """Run rounds until the fixed point (or until `run_pass` raises: the budget)."""
        while True:
            self.rounds += 1
            outcomes = {name: run_pass(name, self.max_failures) for name in list(self.order)}
            progress = any(o.progress for o in outcomes.values())
            if not progress and not any(o.suspended for o in outcomes.values()):
                return
            self.order.sort(key=lambda n: _rank(outcomes[n]))
            if not progress:
                self.stalls += 1
                self.rng.shuffle(self.order)


def _rank(o: Outcome) -> int:
    return 0 if o.fewer_insts else 1 if o.progress else 2
