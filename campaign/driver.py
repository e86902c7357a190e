"""The campaign driver: the only module that imports Ray.

It starts (or joins) a Ray cluster, runs `campaign.workers` FuzzWorker actors, keeps
`in_flight_per_worker` calls queued on each, and writes every returned row to the results
dataset and every finding to its artifact folder, until the budget is spent; then it drains the
calls in flight and prints a summary.

Invariants:
- every test whose report came back has one row per configured backend in the results;
- a test that was running when its worker died (or hung past `campaign.test_timeout_s`) gets one
  row per backend (verdict crash / timeout, error_class WorkerDied / WorkerTimeout) and the calls
  queued behind it are re-queued on a fresh actor, so a crash loses no test and blames one.
  When several calls of a dead actor failed, which one killed it is ambiguous (a call that
  finished just before the crash can lose its reply with the process), so none is blamed yet:
  each is re-run alone on an actor ("suspect"), where a death is unambiguous;
- rows are flushed as whole Parquet files (see campaign.storage), also on Ctrl-C and on errors.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import ray
from omegaconf import DictConfig, OmegaConf
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from campaign.backends import BACKENDS
from campaign.config import Budget, Config, ConfigError, to_config, validate
from campaign.findings import FindingStore
from campaign.schema import graphless_row
from campaign.ids import new_run_id, test_id, test_seed
from campaign.storage import ResultSink
from campaign.verdict import Stage, Verdict
from campaign.worker import Finding, FuzzWorker, TestReport, WorkerConfig

log = logging.getLogger(__name__)

#: longest error message kept in a driver-made row
MAX_MSG = 2000
#: how long one `ray.wait` blocks, so hang checks and timed flushes still happen when idle
POLL_S = 0.5


class CampaignError(RuntimeError):
    """The campaign cannot go on (no resources, workers that cannot start or keep failing)."""


@dataclass
class Summary:
    """What a campaign run did. `verdicts[backend][verdict]` counts rows."""

    campaign: str
    run_id: str
    budget: str
    out_dir: str
    results_dir: str
    findings_dir: str
    tests: int = 0
    rows: int = 0
    elapsed_s: float = 0.0
    tests_per_s: float = 0.0
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)
    findings: int = 0  #: findings counted (each non-pass, non-skipped row with artifacts)
    finding_folders: int = 0  #: of which written to disk (the rest were over the per-signature cap)
    worker_deaths: int = 0
    worker_timeouts: int = 0
    worker_errors: int = 0
    requeued: int = 0
    interrupted: bool = False

    def table(self) -> str:
        """Verdict counts per backend as a small text table."""
        present = {v for counts in self.verdicts.values() for v in counts}
        cols = ["pass"] + [v.value for v in Verdict if v.value in present and v.value != "pass"]
        cols += sorted(present - set(cols))  # verdicts outside the enum would be a bug; show them
        header = ["backend", *cols, "total"]
        body = [[b, *(str(c.get(v, 0)) for v in cols), str(sum(c.values()))]
                for b, c in sorted(self.verdicts.items())]
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        fmt = lambda r: "  ".join(s.ljust(w) if i == 0 else s.rjust(w)  # noqa: E731
                                  for i, (s, w) in enumerate(zip(r, widths)))
        return "\n".join(fmt(r) for r in [header, *body])

    def text(self) -> str:
        state = " (interrupted)" if self.interrupted else ""
        lines = [
            f"campaign {self.campaign} run {self.run_id}{state}: {self.tests} tests in "
            f"{self.elapsed_s:.1f} s ({self.tests_per_s:.1f} tests/s), budget {self.budget}",
            self.table() if self.verdicts else "(no results)",
            f"results:  {self.results_dir} ({self.rows} rows)",
            f"findings: {self.findings_dir} ({self.findings} findings, "
            f"{self.finding_folders} folders)",
        ]
        if self.worker_deaths or self.worker_timeouts or self.worker_errors:
            lines.append(f"workers: {self.worker_deaths} died, {self.worker_timeouts} hung, "
                         f"{self.worker_errors} raised; {self.requeued} tests re-queued")
        return "\n".join(lines)


@dataclass
class _Call:
    """One `run(test_id, seed)` submitted to an actor."""

    index: int
    test_id: str
    seed: int
    ref: Any = None
    #: run alone on its actor: it was in flight when an actor died with others in flight too
    suspect: bool = False


@dataclass
class _Slot:
    """A worker position: its current actor and the calls queued on it, oldest first (an actor
    runs its calls in submission order, so `calls[0]` is the one running)."""

    number: int
    actor: Any
    name: str
    calls: deque[_Call] = field(default_factory=deque)
    head_since: float = 0.0  #: when calls[0] (probably) started running
    #: a fresh actor's `__ray_ready__` call until it returns (its calls wait on the start-up,
    #: which must not count towards the hang limit), with when it was made
    starting: Any = None
    starting_since: float = 0.0
    host: str = "unknown"
    generation: int = 0


def preflight(cfg: Config) -> Budget:
    """Config checks that need the product's registries; errors name the field."""
    budget = validate(cfg)
    unknown = [b for b in cfg.campaign.backends if b not in BACKENDS]
    if unknown:
        raise ConfigError(f"campaign.backends: unknown backend {unknown[0]!r} "
                          f"(known: {', '.join(sorted(BACKENDS))})")
    unknown = [b for b in cfg.campaign.probe if b not in BACKENDS]
    if unknown:
        raise ConfigError(f"campaign.probe: unknown backend {unknown[0]!r} "
                          f"(known: {', '.join(sorted(BACKENDS))})")
    try:
        if not cfg.generator.enabled_ops():
            raise ConfigError("generator: ops_include/ops_exclude leave no op enabled")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return budget


def _start_ray(cfg: Config) -> bool:
    """Start or join Ray as configured; return whether we started it (and so must stop it)."""
    if ray.is_initialized():
        return False
    common = dict(logging_level=logging.WARNING, log_to_driver=cfg.ray.log_to_driver)
    if cfg.ray.address:
        try:
            ray.init(address=cfg.ray.address, **common)
        except (ConnectionError, RuntimeError) as e:
            raise CampaignError(f"ray.address={cfg.ray.address}: cannot connect: {e}") from e
    else:
        ray.init(address="local", num_cpus=cfg.ray.num_cpus, include_dashboard=False,
                 _temp_dir=cfg.ray.temp_dir, **common)
    return True


def check_resources(cfg: Config) -> None:
    """Fail fast when the cluster cannot hold the workers (Ray would leave them pending forever)."""
    total = ray.cluster_resources()
    n = cfg.campaign.workers
    have_cpu = total.get("CPU", 0.0)
    if have_cpu < n:
        raise CampaignError(
            f"campaign.workers={n} needs {n} CPUs (one per worker) but the Ray cluster has "
            f"{have_cpu:g}; lower campaign.workers or raise ray.num_cpus")
    g = cfg.ray.gpus_per_worker
    if g > 0:
        have_gpu = total.get("GPU", 0.0)
        per_node = max((nd["Resources"].get("GPU", 0.0) for nd in ray.nodes() if nd["Alive"]),
                       default=0.0)
        if have_gpu < n * g or per_node < g:
            raise CampaignError(
                f"campaign.workers={n} with ray.gpus_per_worker={g:g} needs {n * g:g} GPUs "
                f"({g:g} on one node) but the Ray cluster has {have_gpu:g} "
                f"(at most {per_node:g} per node)")


def _last_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


class _Campaign:
    """The state of one run; `run_campaign` is its public face."""

    def __init__(self, cfg: Config, budget: Budget, out_dir: Path, worker_cls: type) -> None:
        self.cfg = cfg
        self.c = cfg.campaign
        self.budget = budget
        self.out_dir = out_dir
        self.run_id = new_run_id()
        self.sink = ResultSink(out_dir, self.run_id, self.c.name, flush_rows=self.c.flush_rows,
                               flush_every_s=self.c.flush_every_s)
        self.findings = FindingStore(out_dir, self.c.max_findings_per_signature)
        self.worker_cfg = WorkerConfig(generator=cfg.generator, backends=list(self.c.backends),
                                       mutation=cfg.mutation)
        self.actor_cls = ray.remote(num_cpus=1, num_gpus=cfg.ray.gpus_per_worker,
                                    max_restarts=0)(worker_cls)
        self.slots: list[_Slot] = []
        self.by_ref: dict[Any, tuple[_Call, _Slot]] = {}
        self.requeue: deque[_Call] = deque()  #: calls to run again, before new tests
        self.suspects: deque[_Call] = deque()  #: calls to run again, each alone on an actor
        self.next_index = 0
        self.tests_done = 0
        self.verdicts: dict[str, Counter[str]] = {}
        self.targets: dict[str, str] = {}  #: backend -> target, learned from workers' rows
        self.deaths = self.timeouts = self.errors = self.requeued = 0
        self.consecutive_failures = 0
        self.t_start = time.monotonic()
        self.bar: Optional[tqdm] = None

    # ---- actors ------------------------------------------------------------------------------
    def _new_actor(self, slot_no: int, generation: int) -> tuple[Any, str]:
        name = f"w{slot_no}" + (f".{generation}" if generation else "")
        return self.actor_cls.remote(self.worker_cfg, name), name

    def start_workers(self) -> None:
        for k in range(self.c.workers):
            actor, name = self._new_actor(k, 0)
            self.slots.append(_Slot(k, actor, name))
        timeout = self.cfg.ray.start_timeout_s
        try:
            ray.get([s.actor.__ray_ready__.remote() for s in self.slots], timeout=timeout)
        except GetTimeoutError:
            raise CampaignError(f"workers did not start within ray.start_timeout_s={timeout:g} s "
                                "(is the cluster busy?)") from None
        except RayActorError as e:
            raise CampaignError(f"a worker failed to start: {_last_line(e)}") from None

    def _replace(self, slot: _Slot) -> None:
        ray.kill(slot.actor, no_restart=True)
        slot.generation += 1
        slot.actor, slot.name = self._new_actor(slot.number, slot.generation)
        slot.starting = slot.actor.__ray_ready__.remote()
        slot.starting_since = time.monotonic()

    def stop_workers(self) -> None:
        for s in self.slots:
            try:
                ray.kill(s.actor, no_restart=True)
            except Exception:  # already gone
                pass

    # ---- submitting --------------------------------------------------------------------------
    def budget_left(self) -> bool:
        if self.budget.tests is not None:
            return self.next_index < self.budget.tests
        return time.monotonic() - self.t_start < (self.budget.seconds or 0.0)

    def _next_call(self) -> Optional[_Call]:
        if self.requeue:
            return self.requeue.popleft()
        if not self.budget_left():
            return None
        i = self.next_index
        self.next_index += 1
        return _Call(i, test_id(self.run_id, i), test_seed(self.c.seed, i))

    def _send(self, slot: _Slot, call: _Call) -> None:
        call.ref = slot.actor.run.remote(call.test_id, call.seed)
        if not slot.calls:
            slot.head_since = time.monotonic()
        slot.calls.append(call)
        self.by_ref[call.ref] = (call, slot)

    def submit(self) -> None:
        for slot in self.slots:
            if not slot.calls and self.suspects:
                self._send(slot, self.suspects.popleft())
            if slot.calls and slot.calls[0].suspect:
                continue  # nothing queued behind a suspect, so its death blames it alone
            while len(slot.calls) < self.c.in_flight_per_worker:
                call = self._next_call()
                if call is None:
                    break
                self._send(slot, call)

    # ---- results -----------------------------------------------------------------------------
    def _count(self, row: dict[str, Any]) -> None:
        self.verdicts.setdefault(row["backend"], Counter())[row["verdict"]] += 1

    def record_report(self, report: TestReport, slot: _Slot) -> None:
        dirs = {}
        for f in report.findings:
            d = self.findings.add(f)
            if d is not None:
                dirs.setdefault(f.backend, d)
        for row in report.rows:
            row = {**row, "finding_dir": dirs.get(row["backend"])}
            self.sink.add(row)
            self._count(row)
            slot.host = row["host"]
            self.targets.setdefault(row["backend"], row["target"])
        self.tests_done += 1
        self.consecutive_failures = 0
        if self.bar is not None:
            self.bar.update(1)

    def record_failure(self, call: _Call, slot: _Slot, verdict: Verdict, error_class: str,
                       msg: str) -> None:
        """Rows for a test whose worker died, hung or raised: what the driver knows of it. Its
        finding folder (on the first backend's row) holds info.json: the seed and the error;
        `FuzzWorker.make_test(test_id, seed)` with the run's config.yaml rebuilds the test."""
        now = datetime.now(timezone.utc)
        finding_dir = None
        if verdict.is_finding:
            info = {"test_id": call.test_id, "seed": call.seed, "verdict": verdict.value,
                    "error_class": error_class, "worker": slot.name, "host": slot.host,
                    "error_msg": msg, "config": "config.yaml in the run's output dir"}
            finding_dir = self.findings.add(Finding(
                call.test_id, self.c.backends[0], verdict.value, error_class,
                {"info.json": (json.dumps(info, indent=2) + "\n").encode()}))
        for k, backend in enumerate(self.c.backends):
            row = {
                **graphless_row(call.test_id, call.seed), "backend": backend,
                "target": self.targets.get(backend, ""), "verdict": verdict.value,
                "stage": Stage.UNKNOWN.value, "error_class": error_class, "error_sig": error_class,
                "error_msg": msg[:MAX_MSG], "host": slot.host,
                "worker": slot.name, "ts": now, "finding_dir": finding_dir if k == 0 else None,
            }
            self.sink.add(row)
            self._count(row)
        self.tests_done += 1
        if self.bar is not None:
            self.bar.update(1)
        if error_class != "WorkerTimeout":
            self.consecutive_failures += 1
            limit = self.c.max_consecutive_worker_failures
            if self.consecutive_failures >= limit:
                raise CampaignError(
                    f"{limit} tests in a row failed inside the worker "
                    f"(campaign.max_consecutive_worker_failures); last: {error_class}: "
                    f"{_last_line(Exception(msg))}")

    def complete(self, ref: Any) -> None:
        """Handle one finished call."""
        if ref not in self.by_ref:  # already handled while retiring its actor
            return
        call, slot = self.by_ref[ref]
        try:
            report = ray.get(ref)
        except RayActorError as e:
            self.retire(slot, Verdict.CRASH, "WorkerDied", e)
            return
        except RayTaskError as e:
            self._pop(call, slot)
            self.errors += 1
            log.warning("worker %s raised on %s: %s", slot.name, call.test_id, _last_line(e))
            self.record_failure(call, slot, Verdict.INVALID, "WorkerError", str(e))
            return
        self._pop(call, slot)
        self.record_report(report, slot)

    def _pop(self, call: _Call, slot: _Slot) -> None:
        del self.by_ref[call.ref]
        slot.calls.remove(call)
        slot.head_since = time.monotonic()

    def retire(self, slot: _Slot, verdict: Verdict, error_class: str,
               cause: Optional[BaseException]) -> None:
        """The actor of `slot` died (or is being killed for hanging): keep the reports that came
        back; of the calls that did not, blame the oldest if that is unambiguous (a hang, or a
        death with one call failed) and re-queue the rest, else re-queue all as suspects; start
        a fresh actor."""
        if isinstance(cause, RayActorError) and cause.actor_init_failed:
            raise CampaignError(f"worker {slot.name} failed to start: {_last_line(cause)}")
        ray.kill(slot.actor, no_restart=True)
        calls = list(slot.calls)
        slot.calls.clear()
        for c in calls:
            del self.by_ref[c.ref]
        ready: set = set()
        if calls:
            done, _ = ray.wait([c.ref for c in calls], num_returns=len(calls), timeout=10.0)
            ready = set(done)
        failed: list[_Call] = []  # the calls that did not come back, oldest first
        for c in calls:
            if c.ref in ready:
                try:
                    self.record_report(ray.get(c.ref), slot)
                    continue
                except RayActorError as e:
                    cause = cause or e
                except RayTaskError as e:
                    self.errors += 1
                    self.record_failure(c, slot, Verdict.INVALID, "WorkerError", str(e))
                    continue
            failed.append(c)
        hung = error_class == "WorkerTimeout"
        if hung:
            self.timeouts += 1
        else:
            self.deaths += 1
        if failed and (hung or len(failed) == 1):
            blamed, rest = failed[0], failed[1:]
            log.warning("worker %s %s on %s (seed %d); replacing it", slot.name,
                        "hung" if hung else "died", blamed.test_id, blamed.seed)
            msg = str(cause) if cause is not None else error_class
            if blamed.suspect:
                msg = f"(re-run alone on a fresh worker) {msg}"
            self.record_failure(blamed, slot, verdict, error_class, msg)
            self.requeued += len(rest)
            self.requeue.extend(rest)
        elif failed:
            log.warning("worker %s died with %d calls in flight; re-running each alone",
                        slot.name, len(failed))
            for c in failed:
                c.suspect = True
            self.requeued += len(failed)
            self.suspects.extend(failed)
        self._replace(slot)

    def check_hangs(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.starting is not None:
                done, _ = ray.wait([slot.starting], timeout=0)
                if done:  # started (or failed to: its calls then fail and say so)
                    slot.starting = None
                    slot.head_since = now
                elif now - slot.starting_since > self.cfg.ray.start_timeout_s:
                    raise CampaignError(
                        f"replacement worker {slot.name} did not start within "
                        f"ray.start_timeout_s={self.cfg.ray.start_timeout_s:g} s")
                continue
            if slot.calls and now - slot.head_since > self.c.test_timeout_s:
                limit = self.c.test_timeout_s
                self.retire(slot, Verdict.TIMEOUT, "WorkerTimeout",
                            TimeoutError(f"worker call ran past campaign.test_timeout_s={limit:g} s"))

    # ---- the loop ----------------------------------------------------------------------------
    def loop(self) -> None:
        last_postfix = 0.0
        while True:
            self.submit()
            refs = list(self.by_ref)
            if not refs:
                return
            ready, rest = ray.wait(refs, num_returns=1, timeout=POLL_S)
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                self.complete(ref)
            self.check_hangs()
            self.sink.maybe_flush()
            now = time.monotonic()
            if self.bar is not None and now - last_postfix >= 0.5:
                last_postfix = now
                rate = self.tests_done / max(now - self.t_start, 1e-9)
                self.bar.set_postfix({"tests/s": f"{rate:.1f}", "findings": self.findings.total},
                                     refresh=False)

    def summary(self, interrupted: bool) -> Summary:
        elapsed = time.monotonic() - self.t_start
        return Summary(
            campaign=self.c.name, run_id=self.run_id, budget=str(self.budget),
            out_dir=str(self.out_dir), results_dir=str(self.sink.dir),
            findings_dir=str(self.findings.dir), tests=self.tests_done,
            rows=self.sink.rows_written, elapsed_s=elapsed,
            tests_per_s=self.tests_done / elapsed if elapsed > 0 else 0.0,
            verdicts={b: dict(c) for b, c in self.verdicts.items()},
            findings=self.findings.total, finding_folders=self.findings.folders,
            worker_deaths=self.deaths, worker_timeouts=self.timeouts, worker_errors=self.errors,
            requeued=self.requeued, interrupted=interrupted,
        )


def run_campaign(cfg: Config | DictConfig, out_dir: Path, *,
                 worker_cls: type = FuzzWorker) -> Summary:
    """Run one campaign into `out_dir` (results/, findings/, config.yaml, summary.json) and
    return its summary. `worker_cls` must have FuzzWorker's constructor and `run`.

    Raises ConfigError for an unusable config and CampaignError when the cluster cannot host
    the workers or they cannot start; results gathered so far are flushed either way."""
    conf = to_config(cfg)
    budget = preflight(conf)
    if conf.campaign.probe:
        from campaign.probe import deny_list  # runs the backends in this process, once cached

        conf.generator.deny = sorted(set(conf.generator.deny) | set(deny_list(conf.campaign.probe)))
        log.warning("support probe of %s: %d signatures kept out of the generator",
                    ", ".join(conf.campaign.probe), len(conf.generator.deny))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(conf)))
    started = _start_ray(conf)
    camp: Optional[_Campaign] = None
    interrupted = False
    try:
        check_resources(conf)
        camp = _Campaign(conf, budget, out_dir, worker_cls)
        with logging_redirect_tqdm():
            try:
                camp.start_workers()
                camp.t_start = time.monotonic()
                camp.bar = tqdm(total=budget.tests, unit="test", dynamic_ncols=True,
                                disable=None, desc=conf.campaign.name)
                camp.loop()
            except KeyboardInterrupt:
                interrupted = True
            finally:
                if camp.bar is not None:
                    camp.bar.close()
    finally:
        if camp is not None:
            camp.sink.close()
            camp.stop_workers()
        if started:
            ray.shutdown()
    assert camp is not None
    summary = camp.summary(interrupted)
    (out_dir / "summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    print(summary.text(), flush=True)
    return summary
