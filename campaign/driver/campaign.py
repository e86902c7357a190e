"""One campaign run's state and what happens to its tests and actors: tests are fed to
generation while the budget lasts and some backend has room, routed to the backends' pools
when made, and recorded when they come back; a dead, hung or raising actor is replaced and its
tests blamed or re-run as the blame policy decides. A backend whose rows show an environment
fault (`campaign.env_fault`: one signature on most of its tests within a window) is held back:
one line says why, its queued tests are dropped, it gets no more, and the others go on. The loop
(`campaign.driver.loop`) drives it.

Invariants: `by_ref` holds every call in flight, in the order they were sent; every test a
backend was given gets exactly one row for that backend (`campaign.driver.results`)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import OutOfMemoryError, RayActorError, RayTaskError

from campaign.budget_plan import BudgetPlan
from campaign.compiler_coverage_log import CampaignCoverage
from campaign.config import Config
from campaign.driver.actor_pool import Call, Pool, PoolLimits, Slot
from campaign.driver.actors import actor_class, kill_actor
from campaign.driver.blame import BlamePolicy, Decision, Failure
from campaign.driver.cluster import Needs, placement
from campaign.driver.errors import CampaignError, last_line
from campaign.driver.results import COVERAGE_DIR, Recorder, is_error
from campaign.driver.resume import count_stored_findings, resume_point
from campaign.driver.routing import Lacks, Router
from campaign.driver.stages import GEN, Stages
from campaign.driver.work import Item, PipelineTest
from campaign.env_fault import EnvFault, EnvFaultDetector, read_faults, write_faults
from campaign.findings import FindingStore
from campaign.ids import new_run_id, sampled, test_id, test_seed
from campaign.scheduler import CoreScheduler
from campaign.storage import ResultSink
from campaign.verdict import Verdict

log = logging.getLogger(__name__)


class Campaign:
    """The state of one run; `run_campaign` is its public face."""

    def __init__(self, cfg: Config, plan: BudgetPlan, out_dir: Path, stages: Stages,
                 needs: Needs, targets: dict[str, str],
                 cores: int = 0, lacks: Mapping[str, Lacks | frozenset[str]] | None = None,
                 merge_keys: dict[str, Callable[[int], Hashable]] | None = None) -> None:
        self.cfg = cfg
        self.c = c = cfg.campaign
        #: the budget, parsed once, and its split (`campaign.budget_plan`; `begin` starts it)
        self.plan = plan
        self.budget = plan.budget
        self.out_dir = out_dir
        self.stages = stages
        self.targets = targets
        self.run_id = new_run_id()
        self.next_index = 0
        #: the first test index of this run when it resumed an earlier one
        self.resumed_at: int | None = None
        seq_start = 0
        if c.resume:
            point = resume_point(out_dir)
            if point.run_id is not None:
                self.run_id = point.run_id
            self.next_index, self.resumed_at, seq_start = (point.next_index, point.resumed_at,
                                                           point.next_seq)
        sink = ResultSink(out_dir, self.run_id, c.name, flush_rows=c.flush_rows,
                          flush_every_s=c.flush_every_s, seq_start=seq_start)
        findings = FindingStore(out_dir, c.max_findings_per_signature)
        if c.resume:
            count_stored_findings(findings, out_dir)
        #: compiler coverage: the union per backend (`campaign.compiler_coverage_log`)
        coverage = (CampaignCoverage.load(out_dir / COVERAGE_DIR) if c.resume
                    else CampaignCoverage())
        self.recorder = Recorder(sink, findings, coverage, targets,
                                 elapsed_s=lambda: time.monotonic() - self.t_start)
        self.sink = sink
        self.tally = self.recorder.tally
        self.policy = BlamePolicy(c.max_consecutive_worker_failures)
        self.by_ref: dict[Any, Call] = {}
        self.t_start = time.monotonic()
        #: the core scheduler (campaign/scheduler.py); None: no limit (`campaign.cores=0`)
        self.scheduler: CoreScheduler | None = None
        if cores:
            self.scheduler = CoreScheduler(cores, {
                GEN: c.generation.share, **{b: c.options(b).share for b in c.backends}})
        self.cores = cores
        self.gen, self.evals = self._pools(needs, merge_keys or {})
        self.pools = [self.gen, *self.evals.values()]
        #: capability routing and known bugs (`TestMode.lacks`, `campaign.known_rate`)
        self.router = Router(list(self.evals), {
            b: v for b, v in (lacks or {}).items() if v and c.route}, c.known_rate)
        #: environment faults (`campaign.env_fault`): a backend that trips is held back
        self.env = EnvFaultDetector(c.env_fault)
        #: monotonic time the testing phase ends (a wall-clock budget), None: a test budget
        self.deadline: float | None = None
        self.t_end: float | None = None

    def begin(self, t0: float) -> None:
        """The budget counts from `t0` (monotonic; after Ray's start-up): testing ends at the
        plan's deadline."""
        self.t_start = t0
        if self.plan.testing_s is not None:
            self.deadline = t0 + self.plan.testing_s

    def _pools(self, needs: Needs, merge_keys: dict[str, Callable[[int], Hashable]]
               ) -> tuple[Pool, dict[str, Pool]]:
        """The generation pool and each backend's, their actors not started yet."""
        scfg = self.stages.config
        shared: dict[str, Any] = {"by_ref": self.by_ref, "scheduler": self.scheduler}
        n, res = needs[GEN]
        gen_cls = actor_class(self.stages.generator_cls, res, self.run_id)
        gen = Pool(GEN, n, res, lambda name: gen_cls.remote(scfg, name), "generate",
                   PoolLimits.of(self.c, GEN), upstream_backlog=lambda: 0, **shared)
        evals: dict[str, Pool] = {}
        for b in self.c.backends:
            n, res = needs[b]
            cls = actor_class(self.stages.evaluator_cls, res, self.run_id)

            def make(name: str, b: str = b, cls: Any = cls) -> Any:
                return cls.remote(scfg, b, name)

            evals[b] = Pool(b, n, res, make, "evaluate", PoolLimits.of(self.c, b),
                            upstream_backlog=gen.backlog, merge_key=merge_keys.get(b), **shared)
        return gen, evals

    # ---- actors ------------------------------------------------------------------------------
    def start_actors(self) -> None:
        """Start every actor without waiting for them: a stage whose actors are up starts
        testing at once, while a slow backend warms up (Inductor's first compile, 12-17 s).
        `check_hangs` sees each come up (`check_start`)."""
        for pool in self.pools:
            for slot in pool.slots:
                pool.start_actor(slot)

    def _started(self, slot: Slot) -> None:
        assert slot.start is not None
        try:
            info = ray.get(slot.starting)
        except RayActorError as e:
            slot.start.failed(last_line(e))
            raise CampaignError(f"actor {slot.name} failed to start: {last_line(e)}") from None
        except OutOfMemoryError as e:  # killed by Ray while starting: no test's doing
            slot.starting = None
            self.retire(slot, Verdict.CRASH, "NodeOutOfMemory", e)
            return
        slot.pool.started(slot)
        slot.head_since = time.monotonic()
        slot.host, slot.node_id = info["host"], info["node_id"]

    def check_start(self, slot: Slot, now: float, final: bool = False) -> None:
        """An actor still starting: come up (or failed to: a first start stops the campaign, a
        replacement's calls fail with the cause), or still waited for (said so now and then),
        or given up on because it cannot be placed (`give_up`); `final`: testing has ended,
        so one not placed yet never will be."""
        start = slot.start
        assert start is not None
        done, _ = ray.wait([slot.starting], timeout=0)
        if done:
            try:
                self._started(slot)
            except CampaignError:
                if start.first:
                    raise
                slot.starting = None  # its calls fail with the cause
            return
        if not (final or start.due_probe(now)):
            return
        line = start.observe(now, placement(slot.actor, slot.pool.resources),
                             self.cfg.ray.start_timeout_s, final=final)
        if line:
            log.warning("%s", line)
        if start.given_up:
            self.give_up(slot, final)

    def give_up(self, slot: Slot, final: bool = False) -> None:
        """`slot`'s actor could not be placed: it is killed, the tests of its calls go back
        to its pool (no test's doing) and it gets no more. A backend none of whose actors
        could be placed takes no test from now on (`drop`); while testing goes on (not
        `final`), the campaign stops when that leaves no generation actor or no backend."""
        pool = slot.pool
        for call in list(slot.calls):
            pool.pop(call, timed=False)
            for it in call.items:
                (pool.suspects if it.suspect else pool.retry).append(it)
        slot.starting = None
        kill_actor(slot.actor)
        if not pool.out:
            return
        if final:
            self.drop(pool)
            return
        reasons = lambda p: "; ".join(  # noqa: E731
            f"{s.name} {s.start.reason}" for s in p.slots if s.start is not None)
        if pool.stage == GEN:
            raise CampaignError(f"no generation actor can run: {reasons(pool)}")
        if all(p.out for p in self.evals.values()):
            raise CampaignError("no backend can run, none of their actors could be placed: "
                                + "; ".join(reasons(p) for p in self.evals.values()))
        log.warning("backend %s: none of its actors could be placed; the campaign goes on "
                    "without it (its tests are counted as not placed)", pool.stage)
        self.drop(pool)

    def drop(self, pool: Pool) -> None:
        """`pool`'s backend takes no test: those it holds are counted as not placed (no row),
        and so are those routed to it from now on (`on_generated`)."""
        pool.not_placed += self.drain(pool)

    def drain(self, pool: Pool) -> int:
        """Drop the tests `pool` holds (queued, to retry, suspects) without a row: a test
        no other stage waits on is finished. Returns how many were dropped."""
        dropped = 0
        for q in (pool.queue, pool.retry, pool.suspects):
            for it in q:
                dropped += 1
                it.test.pending.discard(pool.stage)
                if not it.test.pending:
                    self.recorder.finish(it.test)
            q.clear()
        return dropped

    def settle_starts(self) -> None:
        """Testing has ended: an actor still not placed is given up on (the summary says why,
        and counts its backend's tests as not placed); one placed is still starting."""
        now = time.monotonic()
        for pool in self.pools:
            for slot in pool.slots:
                if slot.starting is not None:
                    self.check_start(slot, now, final=True)

    def stop_actors(self) -> None:
        for p in self.pools:
            for s in p.slots:
                kill_actor(s.actor)

    def actor_table(self, settle_s: float = 5.0) -> list[dict[str, Any]]:
        """Where each actor landed. A short run can end before an actor's start-up check came
        back: those get up to `settle_s` to report; one still not up has an empty node_id."""
        starting = self.starting_refs()
        if starting:
            ready = set(ray.wait(starting, num_returns=len(starting), timeout=settle_s)[0])
            for p in self.pools:
                for s in p.slots:
                    if s.starting in ready:
                        try:
                            self._started(s)
                        except Exception:  # not up: no node to show
                            s.starting = None
        nodes = {n["NodeID"]: n for n in ray.nodes()} if ray.is_initialized() else {}
        now = time.monotonic()
        return [{"name": s.name, "stage": p.stage, "node_id": s.node_id,
                 "node_ip": nodes.get(s.node_id, {}).get("NodeManagerAddress", ""),
                 "host": s.host, "resources": p.resources,
                 "start": s.start.phase.value if s.start else "",
                 "start_s": s.start.start_s if s.start else None,
                 "start_text": s.start.describe(now) if s.start else ""}
                for p in self.pools for s in p.slots]

    def starting_refs(self) -> list:
        """The start-up checks of the actors still starting."""
        return [s.starting for p in self.pools for s in p.slots if s.starting is not None]

    # ---- feeding -----------------------------------------------------------------------------
    def budget_left(self) -> bool:
        if self.budget.tests is not None:
            return self.next_index < self.budget.tests
        if self.deadline is not None:
            return time.monotonic() < self.deadline
        return time.monotonic() - self.t_start < (self.budget.seconds or 0.0)

    def _room(self, coming: int) -> bool:
        """Whether a new test may enter generation: no waiting backend is full and some
        backend has room, counting the tests already in generation as coming its way. A
        backend that takes no test (held back, or none of its actors placed) counts for
        neither; one whose actors wait for placement does not hold generation up."""
        some = False
        for b, pool in self.evals.items():
            if b in self.router.env_held or pool.out:  # gets no tests: neither full nor room
                continue
            o = self.c.options(b)
            free = pool.limit() - pool.backlog() - coming * o.rate
            if o.wait and not pool.awaiting_placement and free <= 0:
                return False
            some = some or free > 0
        return some

    def feed(self) -> None:
        """Queue new tests for generation, as many as keep its actors busy and fit downstream;
        none while results cannot be written (`hold_for_disk`)."""
        if self.sink.blocked:
            return
        want = self.gen.limit() - self.gen.backlog()
        while want > 0 and self._room(self.gen.backlog()) and self.budget_left():
            i = self.next_index
            self.next_index += 1
            seed = test_seed(self.c.seed, i)
            backends = [b for b in self.c.backends if sampled(seed, b, self.c.options(b).rate)]
            for b in set(backends) & self.router.env_held:  # counted as held back, no row
                self.router.held_env[b] += 1
            backends = [b for b in backends if b not in self.router.env_held]
            if not backends:
                continue  # sampled for no backend: nothing to test
            test = PipelineTest(i, test_id(self.run_id, i), seed, backends)
            self.router.make_for_starving(test, self.evals)
            self.gen.queue.append(Item(test))
            want -= 1

    # ---- results -----------------------------------------------------------------------------
    def on_generated(self, item: Item, res: Any) -> None:
        test = item.test
        if is_error(res):
            self.tally.errors += 1
            self.fail(self.gen, item, Verdict.INVALID, "WorkerError", res.message)
            return
        self.router.generated(test)
        if res.report is not None:  # an invalid test: its rows are final
            self.recorder.record(test, self.router.applicable(res.report))
            self.policy.test_reported()
            self.recorder.finish(test)
            return
        test.case, test.base = res.case, res.base
        known = getattr(res, "known", None) or {}
        for b in test.backends:
            if not self.router.route(test, b, known):
                continue
            pool = self.evals[b]
            if pool.out:
                pool.not_placed += 1
            elif ((self.c.options(b).wait and not pool.awaiting_placement)
                  or pool.backlog() < pool.limit()):
                pool.queue.append(Item(test))
                test.pending.add(b)
            else:
                pool.skipped_busy += 1
                pool.skipped_starting += not pool.ever_ready
        self.policy.test_reported()
        if not test.pending:
            self.recorder.finish(test)

    def on_evaluated(self, pool: Pool, item: Item, res: Any) -> None:
        if is_error(res):
            self.tally.errors += 1
            self.fail(pool, item, Verdict.INVALID, "WorkerError", res.message)
            return
        self.recorder.evaluated(item.test, res)
        self.policy.test_reported()
        self._done_with(pool, item.test)
        self.watch(res.rows)

    def watch(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Evaluation rows into the environment-fault detector; a backend that trips is held
        back (`hold_back`)."""
        now = time.monotonic()
        for row in rows:
            fault = self.env.observe(row["backend"], row, now)
            if fault is not None:
                self.hold_back(fault)

    def hold_back(self, fault: EnvFault) -> None:
        """`fault.backend` gets no more tests: its fault in one line (the log, the summary,
        `env_faults.json` for the triage), its queued tests dropped (no row; counted as held
        back), its calls in flight left to finish."""
        b = fault.backend
        log.warning("%s", fault.line())
        self.router.hold_back(b)
        pool = self.evals.get(b)
        if pool is not None:
            dropped = self.drain(pool)
            if dropped:  # a Counter: no key for a backend that had nothing queued
                self.router.held_env[b] += dropped
        faults = list(self.env.faults.values())
        if self.c.resume:  # the earlier runs' faults: their rows are in results/ too
            mine = {(f.backend, f.signature) for f in faults}
            faults = [f for f in read_faults(self.out_dir)
                      if (f.backend, f.signature) not in mine] + faults
        try:
            write_faults(self.out_dir, faults)
        except OSError as e:  # the summary still says it; the triage then buckets them as bugs
            log.warning("env_faults.json: cannot write to %s (%s)", self.out_dir,
                        e.strerror or e)

    def _done_with(self, pool: Pool, test: PipelineTest) -> None:
        test.pending.discard(pool.stage)
        pool.done += 1
        if not test.pending:
            self.recorder.finish(test)

    def fail(self, pool: Pool, item: Item, verdict: Verdict, error_class: str, msg: str,
             slot: Slot | None = None) -> None:
        """The driver's rows for a test whose actor died, hung or raised on it
        (`Recorder.failure_rows`); too many such tests in a row stop the campaign."""
        test = item.test
        worker = slot.name if slot is not None else pool.label
        host = slot.host if slot is not None else "unknown"
        rows = self.recorder.failure_rows(test, pool.stage, worker, host, verdict, error_class,
                                          msg)
        if pool.stage == GEN:
            self.router.generated(test)
            self.recorder.finish(test)
        else:
            self._done_with(pool, test)
            self.watch(rows)
        if self.policy.test_failed(hung=error_class == "WorkerTimeout"):
            raise CampaignError(
                f"{self.policy.max_consecutive_failures} tests in a row failed inside the actors "
                f"(campaign.max_consecutive_worker_failures); last: {error_class}: "
                f"{last_line(Exception(msg))}")

    # ---- completions and failures ------------------------------------------------------------
    def complete(self, ref: Any) -> None:
        """Handle one finished call."""
        call = self.by_ref.get(ref)
        if call is None:  # already handled while retiring its actor
            return
        slot = call.slot
        pool = slot.pool
        try:
            results = ray.get(ref)
        except RayActorError as e:
            self.retire(slot, Verdict.CRASH, "WorkerDied", e)
            return
        except OutOfMemoryError as e:
            self.retire(slot, Verdict.CRASH, "NodeOutOfMemory", e)
            return
        except RayTaskError as e:
            pool.pop(call)
            log.warning("actor %s raised: %s", slot.name, last_line(e))
            self._raised(pool, call, slot, e)
            return
        pool.pop(call)
        self._results(pool, call, results)

    def _raised(self, pool: Pool, call: Call, slot: Slot, e: BaseException) -> None:
        """A whole call raised: the policy blames a test that ran alone, re-runs a batch's."""
        decision = self.policy.raised(call.items)
        if decision.blamed is not None:
            self.tally.errors += 1
            self.fail(pool, decision.blamed, Verdict.INVALID, "WorkerError", str(e), slot)
        else:
            self._suspect(pool, decision, slot)

    def _results(self, pool: Pool, call: Call, results: list) -> None:
        for item, res in zip(call.items, results, strict=True):
            if pool.stage == GEN:
                self.on_generated(item, res)
            else:
                self.on_evaluated(pool, item, res)

    def retire(self, slot: Slot, verdict: Verdict, error_class: str,
               cause: BaseException | None) -> None:
        """The actor of `slot` died (or is being killed for hanging): keep the results that came
        back; blame or re-run the tests that did not as the blame policy decides; start a fresh
        actor."""
        pool = slot.pool
        if isinstance(cause, RayActorError) and cause.actor_init_failed:
            raise CampaignError(f"actor {slot.name} failed to start: {last_line(cause)}")
        oom = isinstance(cause, OutOfMemoryError)
        if oom:
            stop = self.policy.node_killed()
            log.warning("actor %s was killed by Ray: the node ran low on memory (%d so far)",
                        slot.name, self.policy.node_oom)
            if stop:
                raise CampaignError(
                    f"Ray killed actors {self.policy.node_oom} times because the node ran low "
                    f"on memory (another process, or actors that need more than it has: see "
                    f"`ray memory`, campaign.backend_options.<b>.actors): "
                    f"{last_line(cause) if cause else ''}")
        kill_actor(slot.actor)
        calls = list(slot.calls)
        ready: set = set()
        if calls:
            done, _ = ray.wait([c.ref for c in calls], num_returns=len(calls), timeout=10.0)
            ready = set(done)
        failed: list[Call] = []  # the calls that did not come back, oldest first
        for c in calls:
            pool.pop(c, timed=False)
            if c.ref in ready:
                try:
                    self._results(pool, c, ray.get(c.ref))
                    continue
                except (RayActorError, OutOfMemoryError) as e:
                    cause = cause or e
                except RayTaskError as e:
                    self._raised(pool, c, slot, e)
                    continue
            failed.append(c)
        hung = error_class == "WorkerTimeout"
        if hung:
            self.tally.timeouts += 1
        else:
            self.tally.deaths += 1
        failure = Failure.HUNG if hung else Failure.NODE_OOM if oom else Failure.DIED
        decision = self.policy.lost(failure, [c.items for c in failed])
        msg = str(cause) if cause is not None else error_class
        self.tally.requeued += len(decision.retry)
        pool.retry.extend(decision.retry)
        if decision.blamed is not None:
            self._blame(pool, decision, slot, verdict, error_class, msg)
        elif decision.suspects:
            self._suspect(pool, decision, slot)
        pool.replace(slot)

    def _blame(self, pool: Pool, decision: Decision, slot: Slot, verdict: Verdict,
               error_class: str, msg: str) -> None:
        item = decision.blamed
        assert item is not None
        log.warning("actor %s %s on %s (seed %d); replacing it", slot.name,
                    decision.failure.value, item.test.test_id, item.test.seed)
        if item.suspect:
            msg = f"(re-run alone on a fresh actor) {msg}"
        self.fail(pool, item, verdict, error_class, msg, slot)

    def _suspect(self, pool: Pool, decision: Decision, slot: Slot) -> None:
        log.warning("actor %s %s with %d tests not back; re-running each alone", slot.name,
                    decision.failure.value, len(decision.suspects))
        for it in decision.suspects:
            it.suspect = True
        self.tally.requeued += len(decision.suspects)
        pool.suspects.extend(decision.suspects)

    def check_hangs(self) -> None:
        """Actors that started (or failed to, or cannot be placed: `check_start`), and calls
        that ran past their limit (their actor is retired as hung)."""
        now = time.monotonic()
        for pool in self.pools:
            for slot in pool.slots:
                if slot.starting is not None:
                    self.check_start(slot, now)
                    continue
                if slot.calls and now - slot.head_since > pool.call_limit(slot.calls[0]):
                    limit = self.c.test_timeout_s
                    self.retire(slot, Verdict.TIMEOUT, "WorkerTimeout", TimeoutError(
                        f"actor call ran past campaign.test_timeout_s={limit:g} s"))
