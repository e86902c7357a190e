"""The campaign's units of work: a test on its way through the stages, and its place in one
pool's queue. Plain data (no Ray), shared by the pools, the blame policy and the recorder."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from campaign.row import ResultRow


@dataclass(eq=False)
class PipelineTest:
    """One test of the campaign, from its generation until every backend it was given has
    reported (or it was cut off)."""

    index: int
    test_id: str
    seed: int
    backends: list[str]  #: the backends it was sampled for
    case: bytes | None = None  #: the packed test, kept while some backend has not reported
    base: ResultRow | None = None  #: the row its rows copy (valid tests)
    pending: set[str] = field(default_factory=set)  #: backends it was given, not yet reported
    rows: int = 0
    #: ops its graph must not hold: made for a backend that lacks them (capability routing)
    avoid: frozenset[str] = frozenset()
    #: the backend it was made for (capability routing), if any
    made_for: str | None = None


@dataclass(eq=False)
class Item:
    """A test on its way through one pool."""

    test: PipelineTest
    suspect: bool = False  #: in flight when an actor died with others: runs alone
    queued: float = field(default_factory=time.monotonic)  #: when it joined its pool's queue
