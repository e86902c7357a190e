"""Who is to blame when an actor dies, hangs or raises, and when failures stop the campaign.

A policy, without Ray: the campaign tells it what it observed (which calls of a failed actor
did not come back, a node-memory kill, a test that failed inside an actor or one that came
back) and acts on the decisions it returns (rows for the blamed test, re-runs for the rest).

The rules (docs/architecture.md, "Actor failures"):
- a dead actor with exactly one test not back: that test is blamed; with several (a batch, or
  calls queued behind it) which one killed it is ambiguous, so each is re-run alone on a fresh
  actor (a suspect), and only one that kills its actor again is blamed;
- a hung actor: the running call's test is blamed when it ran alone, else the tests of its
  batch become suspects; the calls queued behind it are re-run as before (not suspected);
- an actor Ray killed for node memory (Ray picks by its policy, not by culprit): its tests
  become suspects, even a single one; only a suspect killed so again alone is blamed; past
  `max_node_oom` such kills the campaign stops;
- a whole call that raised: its test is blamed when it ran alone, else its tests are suspects;
- `max_consecutive_failures` tests in a row failing inside the actors (hangs aside) stop the
  campaign: a harness bug, not a compiler's.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from campaign.driver.work import Item

#: node-memory kills of actors by Ray (`OutOfMemoryError`) before the campaign stops
MAX_NODE_OOM = 20


class Failure(Enum):
    """How an actor failed its calls; the value is how the log says it."""

    DIED = "died"
    HUNG = "hung"
    NODE_OOM = "was killed for memory"
    RAISED = "raised"


@dataclass(frozen=True)
class Decision:
    """What to do with the tests a failure left without a result."""

    failure: Failure
    #: the test that failed the actor: it gets the driver's row
    blamed: Item | None = None
    #: tests to re-run each alone on a fresh actor, to find the one to blame
    suspects: tuple[Item, ...] = ()
    #: tests to re-run as they were (queued behind a hung call, so not suspected)
    retry: tuple[Item, ...] = ()

    @property
    def requeued(self) -> int:
        """Tests this decision runs again."""
        return len(self.suspects) + len(self.retry)


@dataclass
class BlamePolicy:
    """The blame rules, and the failure counts that stop a campaign (which it owns)."""

    max_consecutive_failures: int
    max_node_oom: int = MAX_NODE_OOM
    #: node-memory kills so far
    node_oom: int = 0
    #: tests in a row that failed inside the actors, hangs aside (reset by a result)
    consecutive_failures: int = 0

    def lost(self, failure: Failure, calls: Sequence[Sequence[Item]]) -> Decision:
        """A dead or hung actor's calls that did not come back, oldest first (`calls[0]` was
        running), each as its tests."""
        items = tuple(it for call in calls for it in call)
        if failure is Failure.HUNG and calls:
            running, queued = tuple(calls[0]), items[len(calls[0]):]
            if len(running) == 1:
                return Decision(failure, blamed=running[0], retry=queued)
            return Decision(failure, suspects=running, retry=queued)
        if failure is Failure.NODE_OOM:  # Ray chose the actor: only a suspect alone is blamed
            if len(items) == 1 and items[0].suspect:
                return Decision(failure, blamed=items[0])
            return Decision(failure, suspects=items)
        if len(items) == 1:
            return Decision(failure, blamed=items[0])
        return Decision(failure, suspects=items)

    def raised(self, items: Sequence[Item]) -> Decision:
        """A whole call raised (stages catch per test, so this is rare)."""
        if len(items) == 1:
            return Decision(Failure.RAISED, blamed=items[0])
        return Decision(Failure.RAISED, suspects=tuple(items))

    def node_killed(self) -> bool:
        """Ray killed an actor for node memory: whether the campaign must stop now."""
        self.node_oom += 1
        return self.node_oom > self.max_node_oom

    def test_failed(self, hung: bool) -> bool:
        """A test got a driver-made row (its actor died, hung or raised on it): whether the
        campaign must stop now. A hang does not count: a slow compiler is not our bug."""
        if hung:
            return False
        self.consecutive_failures += 1
        return self.consecutive_failures >= self.max_consecutive_failures

    def test_reported(self) -> None:
        """A stage gave back a result: the actors work."""
        self.consecutive_failures = 0
