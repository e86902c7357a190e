"""The actors of one stage (generation, or one backend) and the tests queued for them: how
tests are taken into calls (batch size, merge keys, bytes), when a call is due, how long one
may run. A pool is given its limits (`PoolLimits`) and what it needs from outside: the
campaign's calls by Ray reference, how many tests generation still holds, the core scheduler.

Invariants: an actor runs its calls in submission order, so a slot's `calls[0]` is the one
running; nothing is queued behind a suspect, so its death blames it alone; `in_flight` counts
the items of calls sent and not yet popped."""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from campaign.config import CampaignConfig
from campaign.driver.actors import kill_actor
from campaign.driver.stages import GEN
from campaign.driver.starts import ActorStart
from campaign.driver.work import Item
from campaign.scheduler import CoreScheduler

#: batches are sized so that one actor call takes about this long: a Ray call costs ~1.5 ms of
#: CPU (driver and actor together), 5% of a 10-node cpu_ort test when each call carried one
CALL_TARGET_S = 0.2
#: what a backend's test is taken to cost before its first result (queue sizing)
UNMEASURED_S = 1.0
#: a merging backend's queued test waits for a full batch at most this fraction of a call
MERGE_WAIT_FRACTION = 0.25
#: packed tests per evaluation call at most, in bytes (below Ray's 100 KiB inline limit)
MAX_CALL_BYTES = 90_000
#: most tests queued for one backend, whatever `campaign.queue_s` says
MAX_QUEUE = 2000


@dataclass(frozen=True)
class PoolLimits:
    """What bounds a pool's calls and its queue (the `campaign.*` fields of the same names)."""

    in_flight_per_worker: int  #: calls queued per actor
    max_batch: int  #: tests per call at most
    queue_s: float  #: seconds of a backend's work its queue holds
    test_timeout_s: float  #: what a call may take beyond its expected time
    sandbox_timeout_s: float  #: a merged module's limit is k of these
    #: tests its evaluator compiles as one module (`BackendOptions.merge`; 1 for generation)
    merge: int = 1

    @classmethod
    def of(cls, c: CampaignConfig, stage: str) -> PoolLimits:
        return cls(in_flight_per_worker=c.in_flight_per_worker, max_batch=c.max_batch,
                   queue_s=c.queue_s, test_timeout_s=c.test_timeout_s,
                   sandbox_timeout_s=c.sandbox_timeout_s,
                   merge=c.options(stage).merge if stage != GEN else 1)


@dataclass(eq=False)
class Call:
    """One actor call: its tests, in the order their results come back."""

    items: list[Item]
    ref: Any
    slot: Slot
    sent: float = 0.0
    #: the scheduler's charge made when it was sent (None: not scheduled)
    expected_s: float | None = None


@dataclass(eq=False)
class Slot:
    """An actor position of a pool: its current actor and its calls, oldest first (an actor runs
    its calls in submission order, so `calls[0]` is the one running)."""

    pool: Pool
    number: int
    actor: Any = None
    name: str = ""
    calls: deque = field(default_factory=deque)
    head_since: float = 0.0  #: when calls[0] (probably) started running
    #: a fresh actor's `where()` call until it returns (its calls wait on the start-up, which
    #: must not count towards the hang limit)
    starting: Any = None
    #: its actor's start: when it was made, whether it is ready or was given up on
    start: ActorStart | None = None
    host: str = "unknown"
    node_id: str = ""
    generation: int = 0

    @property
    def given_up(self) -> bool:
        """Its actor could not be placed: it gets no call (and no replacement)."""
        return self.start is not None and self.start.given_up


class Pool:
    """The actors of one stage (generation, or one backend) and the tests queued for them."""

    def __init__(self, stage: str, n: int, resources: dict[str, float],
                 make: Callable[[str], Any], method: str, limits: PoolLimits, *,
                 by_ref: dict[Any, Call], upstream_backlog: Callable[[], int],
                 scheduler: CoreScheduler | None = None,
                 merge_key: Callable[[int], Hashable] | None = None) -> None:
        """`make(name)`: a new actor; `method`: the actor method a call runs; `by_ref`: the
        campaign's calls in flight, which this pool adds its calls to and pops them from;
        `upstream_backlog()`: the tests generation still holds (0: no more are coming);
        `scheduler`: told when a scheduled call comes back."""
        self.stage = stage
        self.n = n
        self.resources = resources
        self._make = make
        self.method = method
        self.slots = [Slot(self, k) for k in range(n)]
        self.queue: deque[Item] = deque()  #: waiting for an actor
        self.retry: deque[Item] = deque()  #: to run again, before the queue
        self.suspects: deque[Item] = deque()  #: to run again, each alone on an actor
        self.in_flight = 0  #: items in calls not yet back
        self.per_item_s: float | None = None  #: moving average of an item's time in a call
        self.limits = limits
        #: tests its evaluator compiles as one module (`BackendOptions.merge`; 1 for generation)
        self.merge = limits.merge
        #: for a merging backend that compiles each test in a dialect of its own: the dialect
        #: of a test's seed (`backend_merge_keys`); a call's queued tests share it
        self.merge_key = merge_key
        self._by_ref = by_ref
        self._upstream_backlog = upstream_backlog
        self._scheduler = scheduler
        self.done = 0  #: items that came back
        self.skipped_busy = 0  #: tests not given to this backend because its queue was full
        #: ... of which while none of its actors had been ready yet (the summary tells a slow
        #: start from one that never got placed)
        self.skipped_starting = 0
        #: tests not given to this backend, or taken back, because its actors were not placed
        self.not_placed = 0
        self.ever_ready = False  #: some actor of it has come up (`started`)
        self.calls = 0  #: actor calls sent (tests per call: `done / calls`)

    @property
    def label(self) -> str:
        return "gen" if self.stage == GEN else self.stage

    # ---- actors ------------------------------------------------------------------------------
    def start_actor(self, slot: Slot) -> None:
        slot.name = f"{self.label}#{slot.number}" + (f".{slot.generation}" if slot.generation else "")
        slot.actor = self._make(slot.name)
        slot.starting = slot.actor.where.remote()
        slot.start = ActorStart(slot.name, time.monotonic(), first=slot.generation == 0)

    @property
    def awaiting_placement(self) -> bool:
        """None of its actors is up, and those still starting were last seen not placed: a
        backend that waits (`wait`) holds generation up no longer, its tests skip it while its
        queue is full (a slow start of a placed actor is waited for)."""
        return all(s.start is not None and (s.start.given_up or s.start.starting and s.start.unplaced)
                   for s in self.slots)

    @property
    def out(self) -> bool:
        """None of its actors could be placed: it takes no test."""
        return all(s.given_up for s in self.slots)

    def started(self, slot: Slot) -> None:
        """`slot`'s actor came up."""
        slot.starting = None
        assert slot.start is not None
        slot.start.ready(time.monotonic())
        self.ever_ready = True

    def replace(self, slot: Slot) -> None:
        kill_actor(slot.actor)
        slot.generation += 1
        self.start_actor(slot)

    # ---- sizing ------------------------------------------------------------------------------
    def batch(self) -> int:
        """Tests per call: ~CALL_TARGET_S of work, at least a backend's `merge` (its
        evaluator compiles a call's tests as one module)."""
        if not self.per_item_s:
            return self.merge
        n = round(CALL_TARGET_S / self.per_item_s)
        return max(self.merge, min(self.limits.max_batch, n))

    def backlog(self) -> int:
        return len(self.queue) + len(self.retry) + len(self.suspects) + self.in_flight

    def limit(self) -> int:
        """Most tests this pool holds (queued + in flight): its calls in flight and a batch
        waiting on every actor, or `campaign.queue_s` seconds of its work if more (so an actor
        being replaced, or still starting, does not make tests skip a backend that keeps up),
        up to MAX_QUEUE."""
        calls = self.n * (self.limits.in_flight_per_worker + 1) * self.batch()
        if self.stage == GEN:  # generation makes tests on demand: no queue beyond its calls
            return calls
        # before its first result (an actor still starting: actors are not waited for) a test
        # is taken to cost UNMEASURED_S, so a backend warming up gets queue_s worth of tests
        work = self.n * self.limits.queue_s / (self.per_item_s or UNMEASURED_S)
        return max(calls, min(MAX_QUEUE, int(work)))

    # ---- submitting --------------------------------------------------------------------------
    def submit(self) -> None:
        for slot in self.slots:
            if slot.given_up:
                continue
            if not slot.calls and self.suspects:
                self._send(slot, [self.suspects.popleft()])
            if slot.calls and slot.calls[0].items[0].suspect:
                continue  # nothing queued behind a suspect, so its death blames it alone
            while len(slot.calls) < self.limits.in_flight_per_worker and self.due() <= 0:
                items = self.take(self.batch())
                if not items:
                    break
                self._send(slot, items)

    # ---- under the core scheduler: one call per actor, each holding a core -----------------
    def idle_slot(self) -> Slot | None:
        """An actor that has started and runs no call."""
        for slot in self.slots:
            if not slot.calls and slot.starting is None and not slot.given_up:
                return slot
        return None

    def has_work(self) -> bool:
        """Whether a call is due: a suspect or re-run, or a due batch of queued tests."""
        return bool(self.suspects or self.retry or (self.queue and self.due() <= 0))

    def send_next(self, slot: Slot) -> Call | None:
        """Send `slot` its next call (a suspect alone, else a batch); None when nothing is due."""
        items = [self.suspects.popleft()] if self.suspects else self.take(self.batch())
        if not items:
            return None
        return self._send(slot, items)

    def expected_s(self, call: Call) -> float:
        """What a call is expected to take (for the scheduler's charge when it is sent)."""
        return len(call.items) * (self.per_item_s if self.per_item_s is not None else 1.0)

    def can_send(self) -> bool:
        """Whether some actor has room for another call (fewer than `in_flight_per_worker`)."""
        return any(len(slot.calls) < self.limits.in_flight_per_worker and not slot.given_up
                   for slot in self.slots)

    def due(self) -> float:
        """Seconds until the next call should go (<= 0: now). Generation and re-runs go at
        once. An evaluation call waits for a whole batch (by count or bytes), at most
        CALL_TARGET_S after its oldest test was queued, or until no more tests are coming: an
        evaluator faster than generation would otherwise get a call per generated batch, and
        each call costs ~1.5 ms of CPU (driver and actor) however few tests it carries."""
        if self.stage == GEN or self.retry or not self.queue:
            return 0.0
        n, size, want = 0, 0, self.batch()
        for it in self._batchable(self.queue):
            n += 1
            size += len(it.test.case) if it.test.case is not None else 0
            if n >= want or size >= MAX_CALL_BYTES:
                return 0.0
        if not self._upstream_backlog():  # generation is done (budget spent or downstream full)
            return 0.0
        return self.queue[0].queued + self.batch_wait_s() - time.monotonic()

    def batch_wait_s(self) -> float:
        """How long a queued test may wait for its batch to fill: CALL_TARGET_S, or for a
        backend that merges tests a share of its call's time (a merged compile of k tests
        costs about what one costs, so a batch short of k wastes most of it)."""
        if self.merge <= 1 or not self.per_item_s:
            return CALL_TARGET_S
        return max(CALL_TARGET_S, MERGE_WAIT_FRACTION * self.per_item_s * self.merge)

    def take(self, n: int) -> list[Item]:
        """Up to `n` items, re-runs first; an evaluation batch also stops at MAX_CALL_BYTES of
        packed tests (Ray passes smaller arguments inline, larger ones through its object
        store, at a cost)."""
        out: list[Item] = []
        size = 0
        while self.retry and len(out) < n:
            case = self.retry[0].test.case
            if out and case is not None and size + len(case) > MAX_CALL_BYTES:
                return out
            size += len(case) if case is not None else 0
            out.append(self.retry.popleft())
        taken: list[Item] = []
        for it in self._batchable(self.queue):
            if len(out) + len(taken) >= n:
                break
            case = it.test.case
            if (out or taken) and case is not None and size + len(case) > MAX_CALL_BYTES:
                break
            size += len(case) if case is not None else 0
            taken.append(it)
        if self.merge_key is None or len(taken) == len(self.queue):
            for _ in taken:  # the oldest ones
                self.queue.popleft()
        else:
            ids = set(map(id, taken))
            self.queue = deque(it for it in self.queue if id(it) not in ids)
        return out + taken

    def _batchable(self, queue: deque[Item]) -> Iterator[Item]:
        """The queued items a call may take together, oldest first: all of them, or for a
        pool with a `merge_key` those that share the oldest one's key."""
        if self.merge_key is None or not queue:
            yield from queue
            return
        key = self.merge_key
        head = key(queue[0].test.seed)
        for it in queue:
            if key(it.test.seed) == head:
                yield it

    def _send(self, slot: Slot, items: list[Item]) -> Call:
        payload: list[Any]
        if self.stage == GEN:
            payload = [(it.test.test_id, it.test.seed, it.test.backends, sorted(it.test.avoid))
                       for it in items]
        else:
            payload = [it.test.case for it in items]
        ref = getattr(slot.actor, self.method).remote(payload)
        call = Call(items, ref, slot)
        if not slot.calls:
            slot.head_since = time.monotonic()
        slot.calls.append(call)
        self.in_flight += len(items)
        self.calls += 1
        self._by_ref[ref] = call
        call.sent = time.monotonic()
        return call

    def pop(self, call: Call, timed: bool = True) -> None:
        slot = call.slot
        del self._by_ref[call.ref]
        now = time.monotonic()
        if timed and slot.calls and slot.calls[0] is call:
            took = (now - slot.head_since) / len(call.items)
            self.per_item_s = took if self.per_item_s is None else 0.8 * self.per_item_s + 0.2 * took
        slot.calls.remove(call)
        slot.head_since = now
        self.in_flight -= len(call.items)
        if call.expected_s is not None and self._scheduler is not None:
            self._scheduler.finish(self.stage, call.expected_s, now - call.sent)

    def call_limit(self, call: Call) -> float:
        """Seconds a call may run: the per-test limit plus the batch's expected time, x4; for a
        backend that merges tests (`merge`), plus the merged module's own limit (k tests'
        sandbox limits) before its parts re-run alone."""
        lim = self.limits
        merged = lim.sandbox_timeout_s * self.merge if self.merge > 1 else 0.0
        return lim.test_timeout_s + merged + 4 * len(call.items) * (self.per_item_s or 0.0)
