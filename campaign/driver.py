"""The campaign driver: the only module that imports Ray.

It starts a local Ray cluster or joins one (`ray.address`), checks that the cluster has what
the campaign's actors need, starts them, and runs the pipeline until the budget is spent:

    test i (seed = ids.test_seed(campaign.seed, i), backends sampled by rate)
      -> generation actors (CPU; `campaign.pipeline.Generator`): a valid test, packed, with its
         reference outputs; or the rows of an invalid one
      -> per backend, its own evaluation actors (`campaign.pipeline.Evaluator`), placed with the
         resources its target needs (GPU for cuda targets, custom resources from config):
         one row per (test, backend), and a finding for a non-pass
      -> results/*.parquet (campaign.storage) and findings/ (campaign.findings)

Flow: every pool of actors (generation, each backend) keeps `in_flight_per_worker` calls on each
actor, each call a batch of tests sized so that it takes ~200 ms (Ray's per-call cost, ~1.5 ms of
CPU, is paid per batch; an evaluator faster than generation waits up to that long for a whole
batch rather than getting a call per generated batch); results are taken in completion order
with `ray.wait`. Actors run without Ray task events, with what they hold after their start
frozen out of the garbage collector's way (`gc.freeze`) and with one thread per library and a
small oneDNN primitive cache (`ACTOR_ENV`), so their memory plateaus. Each backend has its own bounded
queue (about `campaign.queue_s` seconds of its work): when it is full, a new test skips that
backend (counted, no row; `wait: true` makes generation wait for it instead), so a slow backend
never stalls a fast one. Generation runs only while some backend has room, so memory stays
bounded whatever the speeds.

Invariants:
- every test a backend was given gets exactly one row for that backend: its evaluator's, or one
  the driver makes when the evaluator died (crash, WorkerDied), hung (timeout, WorkerTimeout) or
  raised (invalid, WorkerError). A dead or hung actor is replaced. When exactly one test of a
  dead actor had not come back, it is blamed; when several had (a batch, or calls queued behind
  it), which one killed it is ambiguous, so each is re-run alone on a fresh actor (a "suspect")
  and only one that kills its actor again is blamed. A hang blames the running test when it ran
  alone; else the tests of its batch are re-run alone likewise. An actor Ray kills because the
  node ran low on memory (`OutOfMemoryError`: Ray picks by its policy, not by culprit; another
  process may hold the memory) is replaced and its tests are re-run alone as suspects, even a
  single one: only a test killed so again alone is blamed (`NodeOutOfMemory`). Past
  `MAX_NODE_OOM` such kills the campaign stops with that reason, keeping its rows;
- rows are flushed as whole Parquet files (campaign.storage) every `flush_every_s` seconds or
  `flush_rows` rows, also on Ctrl-C (the summary is printed, exit 130), on SIGTERM (exit 143)
  and on errors: a driver
  killed with -9 loses at most the rows of the last flush interval;
- `campaign.resume=true` continues the run in `output.dir`: same run id, test indices after the
  last one recorded, so no test id repeats;
- before any actor starts, the cluster's resources are checked against every actor's needs, and
  a campaign the cluster cannot host fails at once with a message naming the config fields
  (Ray would leave the actors pending forever); an actor that does not start within
  `ray.start_timeout_s` (a busy cluster) fails the campaign the same way.
"""
from __future__ import annotations

import gc
import json
import logging
import math
import os
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf
from ray.exceptions import OutOfMemoryError, RayActorError, RayTaskError
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from campaign.budget_plan import BudgetPlan
from campaign.config import Budget, Config, ConfigError, to_config, validate
from campaign.coverage_log import CampaignCoverage
from campaign.findings import FindingStore
from campaign.ids import index_of, new_run_id, sampled, test_id, test_seed
from campaign.row import ResultRow, utc_now
from campaign.scheduler import CoreScheduler
from campaign.stop_signals import sigterm_stops_campaign, warn_if_ctrl_c_ignored
from campaign.storage import ResultSink, describe_error, existing_run
from campaign.verdict import Verdict, verdict_signature

log = logging.getLogger(__name__)

#: how long one `ray.wait` blocks, so hang checks and timed flushes still happen when idle
POLL_S = 0.5
#: batches are sized so that one actor call takes about this long: a Ray call costs ~1.5 ms of
#: CPU (driver and actor together), 5% of a 10-node cpu_ort test when each call carried one
CALL_TARGET_S = 0.2
#: what a backend's test is taken to cost before its first result (queue sizing)
UNMEASURED_S = 1.0
#: a merging backend's queued test waits for a full batch at most this fraction of a call
MERGE_WAIT_FRACTION = 0.25
#: backend verdicts go to the generation actors' seed pools at most this often
FEEDBACK_S = 0.5
#: node-memory kills of actors by Ray (`OutOfMemoryError`) before the campaign stops
MAX_NODE_OOM = 20
#: the campaign's compiler coverage (union, growth), beside results/ (docs/coverage.md)
COVERAGE_DIR = "coverage"
#: packed tests per evaluation call at most, in bytes (below Ray's 100 KiB inline limit)
MAX_CALL_BYTES = 90_000
#: most tests queued for one backend, whatever `campaign.queue_s` says
MAX_QUEUE = 2000
#: the generation stage's name in summaries and actor names
GEN = "generate"


class CampaignError(RuntimeError):
    """The campaign cannot go on (no resources, actors that cannot start or keep failing)."""


class DiskFull(Exception):
    """Results could not be written for `campaign.disk_wait_s`: the campaign stops as on
    Ctrl-C (the message says where and how much space is needed)."""


@dataclass
class Stages:
    """The stage classes and the config their actors are built with: `generator_cls(config,
    name)` with `generate(items) -> results`, `evaluator_cls(config, backend, name)` with
    `evaluate(cases) -> results` (see campaign.pipeline; tests pass light doubles)."""

    generator_cls: type
    evaluator_cls: type
    config: Any


def default_stages(cfg: Config) -> Stages:
    from campaign.pipeline import Evaluator, Generator
    from campaign.sandbox import SandboxConfig
    from campaign.worker import WorkerConfig

    c = cfg.campaign
    return Stages(Generator, Evaluator, WorkerConfig(
        generator=cfg.generator, backends=list(c.backends), mutation=cfg.mutation,
        limits=SandboxConfig(timeout_s=c.sandbox_timeout_s,
                             confirm_timeout_factor=c.confirm_timeout_factor),
        merge={b: c.options(b).merge for b in c.backends if c.options(b).merge > 1},
        configs={b: c.options(b).configs for b in c.backends if c.options(b).configs > 0},
        compiler_coverage=c.coverage))


@dataclass
class Summary:
    """What a campaign run did. `verdicts[backend][verdict]` counts rows."""

    campaign: str
    run_id: str
    budget: str
    out_dir: str
    results_dir: str
    findings_dir: str
    tests: int = 0  #: tests with at least one row (of this run)
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
    #: the signal that interrupted it: SIGINT (Ctrl-C) or SIGTERM (`campaign.stop_signals`)
    signal: str | None = None
    #: why the campaign stopped before its budget other than Ctrl-C (e.g. a full disk)
    stopped: str | None = None
    #: rows that could not be written into results/ when it stopped, and the file holding
    #: them (moved into results/ by `campaign.resume=true`); no file: they were lost
    rows_spilled: int = 0
    spill_file: str | None = None
    #: findings whose folder could not be written (a full disk); their rows have no finding_dir
    finding_write_errors: int = 0
    #: per backend: target, actors, rate, evaluated tests, tests it skipped while busy, calls,
    #: its scheduler share and core-seconds (wall time of its calls), its CPU-seconds (`cpu_s`:
    #: the rows' measured `cpu_ms`)
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: tests that reached no backend (every backend they were sampled for was busy)
    skipped_tests: int = 0
    #: actor calls of the generation stage (each backend's are in `backends`)
    generation_calls: int = 0
    #: where each actor ran: name, stage, node id and address, the resources it holds
    actors: list[dict[str, Any]] = field(default_factory=list)
    #: the first test index of this run when it resumed an earlier one
    resumed_at: int | None = None
    #: cores the scheduler handed out (0: no limit, the OS shared them)
    cores: int = 0
    #: the generation stage: share, core-seconds, calls, tests cut off at the deadline
    generation: dict[str, Any] = field(default_factory=dict)
    #: seconds from the start to the end of testing, and the wall-clock budget's deadline
    #: for it (None: a test budget)
    testing_s: float = 0.0
    testing_deadline_s: float | None = None
    #: compiler coverage: per backend, the lines of its packages the campaign's tests ran
    #: (docs/coverage.md; {} when not measured)
    coverage: dict[str, int] = field(default_factory=dict)

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
                                  for i, (s, w) in enumerate(zip(r, widths, strict=True)))
        return "\n".join(fmt(r) for r in [header, *body])

    def text(self) -> str:
        state = ""
        if self.interrupted:
            state = " (interrupted)" if self.signal in (None, "SIGINT") else \
                f" (interrupted by {self.signal})"
        resumed = f", resumed at test {self.resumed_at}" if self.resumed_at is not None else ""
        lines = [
            f"campaign {self.campaign} run {self.run_id}{state}{resumed}: {self.tests} tests in "
            f"{self.elapsed_s:.1f} s ({self.tests_per_s:.1f} tests/s), budget {self.budget}",
            self.table() if self.verdicts else "(no results)",
        ]
        busy = {b: s["skipped_busy"] for b, s in self.backends.items() if s.get("skipped_busy")}
        if busy:
            lines.append("skipped while busy (no row): " + ", ".join(
                f"{b} {n}" for b, n in sorted(busy.items())))
        for key, what in (("not_applicable", "not applicable (no row; ops it lacks)"),
                          ("made_for", "made for a backend that would idle (without those ops)"),
                          ("held_known", "held back: matched a known bug (no row)"),
                          ("cut_off", "cut off at the deadline (no row)")):
            per = {b: s[key] for b, s in self.backends.items() if s.get(key)}
            if per:
                lines.append(f"{what}: " + "; ".join(
                    f"{b} {_count_text(c, top=key == 'not_applicable')}"
                    for b, c in sorted(per.items())))
        if self.cores:
            parts = [f"{GEN} {self.generation.get('core_s', 0):.0f} s "
                     f"({self.generation.get('share', 0):.0%})"]
            parts += [f"{b} {s.get('core_s', 0):.0f} s ({s.get('share', 0):.0%})"
                      for b, s in sorted(self.backends.items())]
            lines.append(f"core-seconds on {self.cores} cores (share): " + ", ".join(parts))
        if any(s.get("cpu_s") for s in self.backends.values()):
            lines.append("CPU-seconds of the compilers' own work (rows' cpu_ms): " + ", ".join(
                f"{b} {s.get('cpu_s') or 0:.0f} s" for b, s in sorted(self.backends.items())))
        lines += [
            f"results:  {self.results_dir} ({self.rows} rows)",
            f"findings: {self.findings_dir} ({self.findings} findings, "
            f"{self.finding_folders} folders)",
        ]
        if self.stopped:
            lines.append(f"stopped: {self.stopped}")
        if self.rows_spilled:
            lines.append(f"{self.rows_spilled} rows not written to results/: "
                         + (f"kept in {self.spill_file} (campaign.resume=true moves them back)"
                            if self.spill_file else "LOST (no space anywhere)"))
        if self.finding_write_errors:
            lines.append(f"{self.finding_write_errors} finding folders could not be written")
        if self.coverage:
            lines.append("compiler coverage (lines): " + ", ".join(
                f"{b} {n}" for b, n in sorted(self.coverage.items())))
        if self.worker_deaths or self.worker_timeouts or self.worker_errors:
            lines.append(f"actors: {self.worker_deaths} died, {self.worker_timeouts} hung, "
                         f"{self.worker_errors} raised; {self.requeued} tests re-run")
        return "\n".join(lines)


def _count_text(c: int | dict[str, int], top: bool = False) -> str:
    """A count, or the sum of a dict of counts with (`top`) its largest parts."""
    if not isinstance(c, dict):
        return str(c)
    text = str(sum(c.values()))
    if top:
        parts = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
        text += " (" + ", ".join(f"{k} {n}" for k, n in parts) + ")"
    return text


# ---- config checks and the cluster -------------------------------------------------------------

def preflight(cfg: Config) -> Budget:
    """Config checks that need the product's registries; errors name the field."""
    from campaign.backends import BACKENDS

    budget = validate(cfg)
    BudgetPlan.of(budget, cfg.triage.budget, cfg.triage.enabled)  # a triage that leaves no time
    for key in ("backends", "probe"):
        unknown = [b for b in getattr(cfg.campaign, key) if b not in BACKENDS]
        check_specs(key, unknown)  # why: a module not found, a bad option, ...
        if unknown:
            raise ConfigError(f"campaign.{key}: unknown backend {unknown[0]!r} "
                              f"(known: {', '.join(sorted(BACKENDS))})")
        check_specs(key, getattr(cfg.campaign, key))
    try:
        if not cfg.generator.enabled_ops():
            raise ConfigError("generator: ops_include/ops_exclude leave no op enabled")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return budget


def check_specs(key: str, specs: list[str]) -> None:
    """Every spec builds (`make_backend`): an unknown option, a bad value or a module that does
    not import is a ConfigError naming `campaign.<key>` and the spec."""
    from campaign.backends import make_backend

    for spec in specs:
        try:
            make_backend(spec)
        except ValueError as e:
            raise ConfigError(f"campaign.{key}: {e}") from None


def backend_targets(cfg: Config) -> dict[str, str]:
    """backend spec -> its target (`cpu` / `cuda`), which decides its actors' GPUs."""
    from campaign.backends import make_backend

    return {b: make_backend(b).target for b in cfg.campaign.backends}


def backend_lacks(cfg: Config) -> dict[str, frozenset[str]]:
    """backend spec -> the ops it declares it cannot import (`Backend.LACKS`); empty with
    capability routing off."""
    from campaign.backends import make_backend

    if not cfg.campaign.route:
        return {}
    return {b: frozenset(make_backend(b).LACKS) for b in cfg.campaign.backends}


def backend_merge_keys(cfg: Config) -> dict[str, Callable[[int], Hashable]]:
    """backend spec -> what its merged tests must share, from a test's seed
    (`Backend.merge_key`: the control-flow dialect and the configuration its evaluator compiles
    the test in; `campaign.merge.plan` merges only tests of one key). Only for backends that
    merge tests and choose either per test (`dialect=mixed`, `configs` > 0): their calls take
    queued tests of one key, so a call of k tests is one merged module, not one per key."""
    from campaign.backends import make_backend

    keys: dict[str, Callable[[int], Hashable]] = {}
    for b in cfg.campaign.backends:
        opts = cfg.campaign.options(b)
        if opts.merge > 1:
            backend = make_backend(b)
            backend.sample_configs = opts.configs
            if backend.dialect == "mixed" or (opts.configs > 0 and backend.CONFIG_SPACE):
                keys[b] = backend.merge_key
    return keys


def campaign_cores(cfg: Config, started_local: bool) -> int:
    """The cores the scheduler hands out: `campaign.cores`, else this machine's for a local
    cluster we started, else the cluster's CPUs."""
    if cfg.campaign.cores is not None:
        return cfg.campaign.cores
    if started_local:
        return os.cpu_count() or 1
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def actor_needs(cfg: Config, targets: dict[str, str]) -> dict[str, tuple[int, dict[str, float]]]:
    """Per stage (GEN, then each backend): (number of actors, Ray resources of each)."""
    c = cfg.campaign
    needs = {GEN: (c.workers, {"CPU": c.generation.num_cpus, **c.generation.resources})}
    for b in c.backends:
        o = c.options(b)
        gpus = o.num_gpus if o.num_gpus is not None else (1.0 if targets[b] == "cuda" else 0.0)
        needs[b] = (c.actors_of(b), {"CPU": o.num_cpus, "GPU": gpus, **o.resources})
    return {k: (n, {r: v for r, v in res.items() if v > 0}) for k, (n, res) in needs.items()}


def _where(stage: str, cfg: Config) -> str:
    """The config field that sets a stage's resources (for error messages)."""
    return ("campaign.generation" if stage == GEN
            else f"campaign.backend_options.{stage}")


def check_resources(cfg: Config, needs: dict[str, tuple[int, dict[str, float]]],
                    nodes: list[dict[str, float]] | None = None,
                    cluster: str = "the Ray cluster") -> None:
    """Fail fast when the cluster (`nodes`: each node's resources; default: the connected
    cluster's live nodes) cannot hold the actors (Ray would leave them pending forever)."""
    if nodes is None:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    total: Counter[str] = Counter()
    for nd in nodes:
        total.update(nd)
    have = lambda r: total.get(r, 0.0)  # noqa: E731
    for stage, (_n, res) in needs.items():
        what = "generation actor" if stage == GEN else f"backend {stage} actor"
        for r, amount in res.items():
            if have(r) <= 0:
                hint = (" (a cuda target: run on a cluster with a GPU node, ray.address=...)"
                        if r == "GPU" else " (declare it: ray start --resources=...)")
                raise CampaignError(
                    f"each {what} needs {r}={amount:g} ({_where(stage, cfg)}) but {cluster} "
                    f"has no {r}{hint}")
        if not any(all(node.get(r, 0.0) >= v for r, v in res.items()) for node in nodes):
            raise CampaignError(
                f"each {what} needs {_fmt(res)} ({_where(stage, cfg)}) but no node of "
                f"{cluster} has that much: {'; '.join(_fmt(_public(nd)) for nd in nodes)}")
    for r in {r for _, res in needs.values() for r in res}:
        want = sum(n * res.get(r, 0.0) for n, res in needs.values())
        if want > have(r) + 1e-9:
            parts = ", ".join(f"{n} x {res[r]:g} ({_where(s, cfg)})"
                              for s, (n, res) in needs.items() if res.get(r))
            raise CampaignError(
                f"the campaign's actors need {want:g} {r} in all ({parts}) but {cluster} "
                f"has {have(r):g}; lower campaign.workers or the actors/resources of a backend")


def _public(resources: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in resources.items() if not k.startswith("node:") and
            k not in ("memory", "object_store_memory")}


def _fmt(res: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(res.items())) + "}"


def _auth_hint() -> str:
    return ("set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token, which "
            "`ray get-auth-token` prints on its head node (default file ~/.ray/auth_token)")


def _join(address: str, temp_dir: str | None) -> None:
    """Join a running cluster with token authentication on (an explicit address would otherwise
    connect without a token), failing fast and saying so when the token is missing or wrong."""
    from ray._private.services import canonicalize_bootstrap_address
    from ray.exceptions import AuthenticationError

    if "RAY_AUTH_MODE" not in os.environ:  # an explicit choice (e.g. disabled) is kept
        from ray._private.authentication.authentication_token_setup import _enable_token_auth

        _enable_token_auth()  # this process and its children, as `ray.init()` of a new cluster
    try:
        gcs = canonicalize_bootstrap_address(address)
    except Exception as e:
        raise CampaignError(f"ray.address={address}: {_last_line(e)}") from None
    if gcs is None:
        raise CampaignError(f"ray.address={address}: no running Ray cluster found on this "
                            "machine (start one with `ray start --head`)")
    host, _, port = gcs.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise CampaignError(f"ray.address={address}: nothing answers at {gcs} ({e})") from None
    # ignored attr-defined: ray's _raylet.pyi stub lacks these (the compiled module has them)
    from ray._raylet import (  # type: ignore[attr-defined]
        AuthenticationMode,
        AuthenticationTokenLoader,
        get_authentication_mode,
    )

    if (get_authentication_mode() == AuthenticationMode.TOKEN
            and not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)):
        raise CampaignError(f"ray.address={address}: token authentication is on but this "
                            f"driver has no token: {_auth_hint()}")
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # (as above)

        GcsClient(address=gcs)  # fails at once on a token the cluster refuses
    except AuthenticationError as e:
        raise CampaignError(f"ray.address={address}: the cluster refused this driver's "
                            f"authentication token ({_last_line(e)}): {_auth_hint()}") from None
    except Exception as e:  # anything else: let ray.init report it
        log.debug("GCS probe of %s: %s", gcs, e)
    try:
        ray.init(address=gcs, logging_level=logging.WARNING, log_to_driver=False)
    except AuthenticationError as e:  # no token at all
        raise CampaignError(f"ray.address={address}: {_last_line(e)}: {_auth_hint()}") from None
    except (ConnectionError, RuntimeError) as e:
        raise CampaignError(f"ray.address={address}: cannot connect: {_last_line(e)}") from e


def _start_ray(cfg: Config, needs: dict[str, tuple[int, dict[str, float]]]) -> bool:
    """Start or join Ray as configured; return whether we started it (and so must stop it)."""
    if ray.is_initialized():
        return False
    if cfg.ray.address:
        _join(cfg.ray.address, cfg.ray.temp_dir)
        return True
    cpus = cfg.ray.num_cpus
    if cpus is None:
        asked = sum(n * res.get("CPU", 0.0) for n, res in needs.values())
        cpus = max(os.cpu_count() or 1, math.ceil(asked - 1e-9))
    # what the local cluster will have, checked before spending seconds on starting it
    from ray._private.accelerators import get_accelerator_manager_for_resource

    gpu_manager = get_accelerator_manager_for_resource("GPU")
    assert gpu_manager is not None  # Ray always has one for "GPU" (NVIDIA's by default)
    gpus = gpu_manager.get_current_node_num_accelerators()
    check_resources(cfg, needs, [{"CPU": cpus, "GPU": gpus, **cfg.ray.resources}],
                    "the local Ray cluster (this machine; ray.address is unset)")
    ray.init(address="local", num_cpus=cpus, resources=dict(cfg.ray.resources) or None,
             include_dashboard=False, _temp_dir=cfg.ray.temp_dir,
             logging_level=logging.WARNING, log_to_driver=cfg.ray.log_to_driver)
    return True


def _last_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


#: one thread per actor for the libraries that would start one per core (torch and ORT are set
#: in code; TVM reads its variable when its thread pool starts, after the actor's start):
#: actors share the cores with each other and with their sandbox processes
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TVM_NUM_THREADS": "1"}
#: ... and a small oneDNN primitive cache (torch's conv/RNN/matmul kernels, JIT-compiled per
#: shape): its default 1024 entries grew a cpu_ort generation actor by ~18 KB a test (+45 MB over
#: 2500 tests, still growing; flat with 64), while a test reuses only its own few shapes (the
#: input search runs one graph many times: 64 costs no CPU, 0 would cost 19%)
ACTOR_ENV = {**THREAD_ENV, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}


def _actor_env() -> dict[str, str]:
    """ACTOR_ENV, except where the driver's own environment says otherwise."""
    return {k: os.environ.get(k, v) for k, v in ACTOR_ENV.items()}


def _run_env(run_id: str) -> dict[str, str]:
    """The actors' environment: ACTOR_ENV, and the run id that the marks of every process
    their sandboxes start carry (`campaign.proctree`), so the campaign's end finds them all."""
    from campaign.proctree import RUN_ENV

    return {**_actor_env(), RUN_ENV: run_id}


def kill_leftovers(run_id: str, wait_s: float = 3.0) -> int:
    """Kill every process the run's sandboxes started that is still running (actors killed
    with SIGKILL leave their sandbox processes' orphans to init); returns how many. Repeated
    until none is found (actors may still be dying)."""
    from campaign.proctree import sweep

    n, quiet, deadline = 0, 0, time.monotonic() + wait_s
    while quiet < 2 and time.monotonic() < deadline:
        k = sweep(f"{run_id}:", owner_dead_only=False)
        n += k
        quiet = quiet + 1 if k == 0 else 0
        time.sleep(0.1)
    if n:
        log.warning("killed %d processes the run's compilers left running", n)
    return n


def _is_error(result: Any) -> bool:
    """A stage's `CaseError` (our code failed on that test) rather than a result."""
    return hasattr(result, "message")


def _hosted(cls: type, env: dict[str, str]) -> type:
    """`cls` with `env` set in its actor's process before it starts (a runtime_env would cost
    seconds per actor), and a `where()` method: the node an actor landed on (its start-up check
    too)."""

    class Hosted(cls):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            os.environ.update(env)
            super().__init__(*args, **kwargs)
            # what the actor holds now (torch, onnx, z3, Ray: ~250k objects) lives as long as
            # it does: out of the collector's way, so full collections stop walking it
            gc.collect()
            gc.freeze()

        def where(self) -> dict[str, Any]:
            return {"node_id": ray.get_runtime_context().get_node_id(),
                    "host": socket.gethostname(), "pid": os.getpid()}

    Hosted.__name__ = Hosted.__qualname__ = cls.__name__
    return Hosted


# ---- the pipeline state -------------------------------------------------------------------------

@dataclass(eq=False)
class _Test:
    index: int
    test_id: str
    seed: int
    backends: list[str]  #: the backends it was sampled for
    case: bytes | None = None  #: the packed test, kept while some backend has not reported
    base: dict[str, Any] | None = None  #: the row fields its rows share (valid tests)
    pending: set[str] = field(default_factory=set)  #: backends it was given, not yet reported
    rows: int = 0
    #: ops its graph must not hold: made for a backend that lacks them (capability routing)
    avoid: frozenset[str] = frozenset()
    #: the backend it was made for (capability routing), if any
    made_for: str | None = None


@dataclass(eq=False)
class _Item:
    """A test on its way through one pool."""

    test: _Test
    suspect: bool = False  #: in flight when an actor died with others: runs alone
    queued: float = field(default_factory=time.monotonic)  #: when it joined its pool's queue


@dataclass(eq=False)
class _Call:
    items: list[_Item]
    ref: Any
    slot: _Slot
    sent: float = 0.0
    #: the scheduler's charge made when it was sent (None: not scheduled)
    expected_s: float | None = None


@dataclass(eq=False)
class _Slot:
    """An actor position of a pool: its current actor and its calls, oldest first (an actor runs
    its calls in submission order, so `calls[0]` is the one running)."""

    pool: _Pool
    number: int
    actor: Any = None
    name: str = ""
    calls: deque = field(default_factory=deque)
    head_since: float = 0.0  #: when calls[0] (probably) started running
    #: a fresh actor's `where()` call until it returns (its calls wait on the start-up, which
    #: must not count towards the hang limit), with when it was made
    starting: Any = None
    starting_since: float = 0.0
    host: str = "unknown"
    node_id: str = ""
    generation: int = 0
    #: its actor is the campaign's first on this slot (a failed start fails the campaign)
    first_start: bool = False


class _Pool:
    """The actors of one stage (generation, or one backend) and the tests queued for them."""

    def __init__(self, camp: _Campaign, stage: str, n: int, resources: dict[str, float],
                 make: Callable[[str], Any], method: str) -> None:
        self.camp = camp
        self.stage = stage
        self.n = n
        self.resources = resources
        self._make = make
        self.method = method
        self.slots = [_Slot(self, k) for k in range(n)]
        self.queue: deque[_Item] = deque()  #: waiting for an actor
        self.retry: deque[_Item] = deque()  #: to run again, before the queue
        self.suspects: deque[_Item] = deque()  #: to run again, each alone on an actor
        self.in_flight = 0  #: items in calls not yet back
        self.per_item_s: float | None = None  #: moving average of an item's time in a call
        #: tests its evaluator compiles as one module (`BackendOptions.merge`; 1 for generation)
        self.merge = camp.c.options(stage).merge if stage != GEN else 1
        #: for a merging backend that compiles each test in a dialect of its own: the dialect
        #: of a test's seed (`backend_merge_keys`); a call's queued tests share it
        self.merge_key: Callable[[int], Hashable] | None = None
        self.done = 0  #: items that came back
        self.skipped_busy = 0  #: tests not given to this backend because its queue was full
        self.calls = 0  #: actor calls sent (tests per call: `done / calls`)

    @property
    def label(self) -> str:
        return "gen" if self.stage == GEN else self.stage

    # ---- actors ------------------------------------------------------------------------------
    def start_actor(self, slot: _Slot) -> None:
        slot.name = f"{self.label}#{slot.number}" + (f".{slot.generation}" if slot.generation else "")
        slot.actor = self._make(slot.name)
        slot.starting = slot.actor.where.remote()
        slot.starting_since = time.monotonic()

    def replace(self, slot: _Slot) -> None:
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception:  # already gone
            pass
        slot.generation += 1
        self.start_actor(slot)

    # ---- sizing ------------------------------------------------------------------------------
    def batch(self) -> int:
        """Tests per call: ~CALL_TARGET_S of work, at least a backend's `merge` (its
        evaluator compiles a call's tests as one module)."""
        if not self.per_item_s:
            return self.merge
        n = round(CALL_TARGET_S / self.per_item_s)
        return max(self.merge, min(self.camp.c.max_batch, n))

    def backlog(self) -> int:
        return len(self.queue) + len(self.retry) + len(self.suspects) + self.in_flight

    def limit(self) -> int:
        """Most tests this pool holds (queued + in flight): its calls in flight and a batch
        waiting on every actor, or `campaign.queue_s` seconds of its work if more (so an actor
        being replaced, or still starting, does not make tests skip a backend that keeps up),
        up to MAX_QUEUE."""
        calls = self.n * (self.camp.c.in_flight_per_worker + 1) * self.batch()
        if self.stage == GEN:  # generation makes tests on demand: no queue beyond its calls
            return calls
        # before its first result (an actor still starting: actors are not waited for) a test
        # is taken to cost UNMEASURED_S, so a backend warming up gets queue_s worth of tests
        work = self.n * self.camp.c.queue_s / (self.per_item_s or UNMEASURED_S)
        return max(calls, min(MAX_QUEUE, int(work)))

    # ---- submitting --------------------------------------------------------------------------
    def submit(self) -> None:
        for slot in self.slots:
            if not slot.calls and self.suspects:
                self._send(slot, [self.suspects.popleft()])
            if slot.calls and slot.calls[0].items[0].suspect:
                continue  # nothing queued behind a suspect, so its death blames it alone
            while len(slot.calls) < self.camp.c.in_flight_per_worker and self.due() <= 0:
                items = self._take(self.batch())
                if not items:
                    break
                self._send(slot, items)

    # ---- under the core scheduler: one call per actor, each holding a core -----------------
    def idle_slot(self) -> _Slot | None:
        """An actor that has started and runs no call."""
        for slot in self.slots:
            if not slot.calls and slot.starting is None:
                return slot
        return None

    def has_work(self) -> bool:
        """Whether a call is due: a suspect or re-run, or a due batch of queued tests."""
        return bool(self.suspects or self.retry or (self.queue and self.due() <= 0))

    def send_next(self, slot: _Slot) -> _Call | None:
        """Send `slot` its next call (a suspect alone, else a batch); None when nothing is due."""
        items = [self.suspects.popleft()] if self.suspects else self._take(self.batch())
        if not items:
            return None
        return self._send(slot, items)

    def expected_s(self, call: _Call) -> float:
        """What a call is expected to take (for the scheduler's charge when it is sent)."""
        return len(call.items) * (self.per_item_s if self.per_item_s is not None else 1.0)

    def can_send(self) -> bool:
        """Whether some actor has room for another call (fewer than `in_flight_per_worker`)."""
        return any(len(slot.calls) < self.camp.c.in_flight_per_worker for slot in self.slots)

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
        if not self.camp.gen.backlog():  # generation is done (budget spent or downstream full)
            return 0.0
        return self.queue[0].queued + self.batch_wait_s() - time.monotonic()

    def batch_wait_s(self) -> float:
        """How long a queued test may wait for its batch to fill: CALL_TARGET_S, or for a
        backend that merges tests a share of its call's time (a merged compile of k tests
        costs about what one costs, so a batch short of k wastes most of it)."""
        if self.merge <= 1 or not self.per_item_s:
            return CALL_TARGET_S
        return max(CALL_TARGET_S, MERGE_WAIT_FRACTION * self.per_item_s * self.merge)

    def _take(self, n: int) -> list[_Item]:
        """Up to `n` items, re-runs first; an evaluation batch also stops at MAX_CALL_BYTES of
        packed tests (Ray passes smaller arguments inline, larger ones through its object
        store, at a cost)."""
        out: list[_Item] = []
        size = 0
        while self.retry and len(out) < n:
            case = self.retry[0].test.case
            if out and case is not None and size + len(case) > MAX_CALL_BYTES:
                return out
            size += len(case) if case is not None else 0
            out.append(self.retry.popleft())
        taken: list[_Item] = []
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

    def _batchable(self, queue: deque[_Item]) -> Iterator[_Item]:
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

    def _send(self, slot: _Slot, items: list[_Item]) -> _Call:
        payload: list[Any]
        if self.stage == GEN:
            payload = [(it.test.test_id, it.test.seed, it.test.backends, sorted(it.test.avoid))
                       for it in items]
        else:
            payload = [it.test.case for it in items]
        ref = getattr(slot.actor, self.method).remote(payload)
        call = _Call(items, ref, slot)
        if not slot.calls:
            slot.head_since = time.monotonic()
        slot.calls.append(call)
        self.in_flight += len(items)
        self.calls += 1
        self.camp.by_ref[ref] = call
        call.sent = time.monotonic()
        return call

    def pop(self, call: _Call, timed: bool = True) -> None:
        slot = call.slot
        del self.camp.by_ref[call.ref]
        now = time.monotonic()
        if timed and slot.calls and slot.calls[0] is call:
            took = (now - slot.head_since) / len(call.items)
            self.per_item_s = took if self.per_item_s is None else 0.8 * self.per_item_s + 0.2 * took
        slot.calls.remove(call)
        slot.head_since = now
        self.in_flight -= len(call.items)
        if call.expected_s is not None and self.camp.scheduler is not None:
            self.camp.scheduler.finish(self.stage, call.expected_s, now - call.sent)

    def call_limit(self, call: _Call) -> float:
        """Seconds a call may run: the per-test limit plus the batch's expected time, x4; for a
        backend that merges tests (`merge`), plus the merged module's own limit (k tests'
        sandbox limits) before its parts re-run alone."""
        c = self.camp.c
        merged = c.sandbox_timeout_s * self.merge if self.merge > 1 else 0.0
        return c.test_timeout_s + merged + 4 * len(call.items) * (self.per_item_s or 0.0)


class _Campaign:
    """The state of one run; `run_campaign` is its public face."""

    def __init__(self, cfg: Config, budget: Budget, out_dir: Path, stages: Stages,
                 needs: dict[str, tuple[int, dict[str, float]]], targets: dict[str, str],
                 cores: int = 0, lacks: dict[str, frozenset[str]] | None = None,
                 merge_keys: dict[str, Callable[[int], Hashable]] | None = None) -> None:
        self.cfg = cfg
        self.c = cfg.campaign
        self.budget = budget
        self.out_dir = out_dir
        self.stages = stages
        self.targets = targets
        self.run_id = new_run_id()
        self.next_index = 0
        self.resumed_at: int | None = None
        seq_start = 0
        if self.c.resume:
            seq_start = self._resume_state()
        self.sink = ResultSink(out_dir, self.run_id, self.c.name, flush_rows=self.c.flush_rows,
                               flush_every_s=self.c.flush_every_s, seq_start=seq_start)
        self.findings = FindingStore(out_dir, self.c.max_findings_per_signature)
        if self.c.resume:
            self._count_stored_findings()
        self.by_ref: dict[Any, _Call] = {}
        #: backend verdicts not yet sent to the generation actors' seed pools (docs/mutation.md)
        self.outcomes: list[tuple[str, str]] = []
        #: compiler coverage: the union per backend (`campaign.coverage_log`), and the tests
        #: that reached new lines, not yet sent to the generation actors' seed pools
        self.coverage = (CampaignCoverage.load(out_dir / COVERAGE_DIR) if self.c.resume
                         else CampaignCoverage())
        self.cov_outcomes: list[tuple[str, str, int]] = []
        self.feedback_sent = 0.0
        self.tests_done = 0
        self.skipped_tests = 0
        self.verdicts: dict[str, Counter[str]] = {}
        #: per backend: CPU-seconds its rows measured (`cpu_ms`: the compiler's own work)
        self.cpu_s: Counter[str] = Counter()
        self.deaths = self.timeouts = self.errors = self.requeued = self.node_oom = 0
        self.consecutive_failures = 0
        self.t_start = time.monotonic()
        self.bar: tqdm | None = None
        scfg = stages.config

        def remote(cls: type, res: dict[str, float]):
            # no task events: Ray's GCS would keep every call's (up to 100k), growing by ~10 MB
            # a minute, and each call would cost their reporting; nothing here reads them
            opts: dict[str, Any] = {"num_cpus": res.get("CPU", 0.0), "max_restarts": 0,
                                    "enable_task_events": False}
            if res.get("GPU"):
                opts["num_gpus"] = res["GPU"]
            custom = {r: v for r, v in res.items() if r not in ("CPU", "GPU")}
            if custom:
                opts["resources"] = custom
            return ray.remote(**opts)(_hosted(cls, _run_env(self.run_id)))

        n, res = needs[GEN]
        gen_cls = remote(stages.generator_cls, res)
        self.gen = _Pool(self, GEN, n, res, lambda name: gen_cls.remote(scfg, name), "generate")
        self.evals: dict[str, _Pool] = {}
        for b in self.c.backends:
            n, res = needs[b]
            cls = remote(stages.evaluator_cls, res)
            def make(name: str, b: str = b, cls: Any = cls) -> Any:
                return cls.remote(scfg, b, name)

            self.evals[b] = _Pool(self, b, n, res, make, "evaluate")
            self.evals[b].merge_key = (merge_keys or {}).get(b)
        self.pools = [self.gen, *self.evals.values()]
        #: the core scheduler (campaign/scheduler.py); None: no limit (`campaign.cores=0`)
        self.scheduler: CoreScheduler | None = None
        if cores:
            self.scheduler = CoreScheduler(cores, {
                GEN: self.c.generation.share, **{b: self.c.options(b).share for b in self.evals}})
        self.cores = cores
        #: capability routing: per backend, the ops it lacks (`Backend.LACKS`)
        self.lacks = {b: frozenset(v) for b, v in (lacks or {}).items() if v and self.c.route}
        #: per backend: tests not sent to it, by the op it lacks
        self.not_applicable: dict[str, Counter[str]] = {b: Counter() for b in self.evals}
        #: per backend: tests held back for matching a known bug's trigger, by bucket
        self.held_known: dict[str, Counter[str]] = {b: Counter() for b in self.evals}
        #: per backend: tests made without the ops it lacks, in generation now
        self.making_for: Counter[str] = Counter()
        #: per backend: tests cut off at the deadline (no row)
        self.cut_off: Counter[str] = Counter()
        #: monotonic time the testing phase ends (a wall-clock budget), None: a test budget
        self.deadline: float | None = None
        #: per backend: tests made for it without the ops it lacks
        self.made_for: Counter[str] = Counter()
        self.t_end: float | None = None

    # ---- resume ------------------------------------------------------------------------------
    def _resume_state(self) -> int:
        """Continue the run whose results are in out_dir; return the next file sequence number."""
        try:
            _recover_spilled(self.out_dir)
            prev = existing_run(self.out_dir)
        except ValueError as e:
            raise CampaignError(f"campaign.resume: {e}") from None
        if prev.run_id is None:
            log.warning("campaign.resume: %s holds no results yet; starting at test 0",
                        self.out_dir)
            return prev.next_seq
        self.run_id = prev.run_id
        indices = [index_of(t) for t in prev.test_ids]
        self.next_index = self.resumed_at = max(indices) + 1
        log.warning("campaign.resume: run %s has %d rows of %d tests; going on at test %d",
                    self.run_id, prev.rows, len(indices), self.next_index)
        return prev.next_seq

    def _count_stored_findings(self) -> None:
        """The per-signature caps count the folders earlier runs wrote."""
        from campaign.storage import read_results

        t = read_results(self.out_dir).select(["backend", "verdict", "error_sig", "finding_dir"])
        for r in t.to_pylist():
            if r["finding_dir"]:
                self.findings.stored[(r["backend"], r["verdict"], r["error_sig"] or "")] += 1

    # ---- actors ------------------------------------------------------------------------------
    def start_actors(self) -> None:
        """Start every actor without waiting for them: a stage whose actors are up starts
        testing at once, while a slow backend warms up (Inductor's first compile, 12-17 s).
        `check_hangs` sees each come up, and fails the campaign on one that cannot start or
        does not within `ray.start_timeout_s`."""
        for pool in self.pools:
            for slot in pool.slots:
                pool.start_actor(slot)
                slot.first_start = True

    def _started(self, slot: _Slot) -> None:
        try:
            info = ray.get(slot.starting)
        except RayActorError as e:
            raise CampaignError(f"actor {slot.name} failed to start: {_last_line(e)}") from None
        except OutOfMemoryError as e:  # killed by Ray while starting: no test's doing
            slot.starting = None
            self.retire(slot, Verdict.CRASH, "NodeOutOfMemory", e)
            return
        slot.starting = None
        slot.head_since = time.monotonic()
        slot.host, slot.node_id = info["host"], info["node_id"]

    def stop_actors(self) -> None:
        for p in self.pools:
            for s in p.slots:
                try:
                    ray.kill(s.actor, no_restart=True)
                except Exception:  # already gone
                    pass

    def actor_table(self, settle_s: float = 5.0) -> list[dict[str, Any]]:
        """Where each actor landed. A short run can end before an actor's start-up check came
        back: those get up to `settle_s` to report; one still not up has an empty node_id."""
        starting = [s.starting for p in self.pools for s in p.slots if s.starting is not None]
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
        return [{"name": s.name, "stage": p.stage, "node_id": s.node_id,
                 "node_ip": nodes.get(s.node_id, {}).get("NodeManagerAddress", ""),
                 "host": s.host, "resources": p.resources}
                for p in self.pools for s in p.slots]

    # ---- feeding -----------------------------------------------------------------------------
    def budget_left(self) -> bool:
        if self.budget.tests is not None:
            return self.next_index < self.budget.tests
        if self.deadline is not None:
            return time.monotonic() < self.deadline
        return time.monotonic() - self.t_start < (self.budget.seconds or 0.0)

    def _room(self, coming: int) -> bool:
        """Whether a new test may enter generation: no waiting backend is full and some
        backend has room, counting the tests already in generation as coming its way."""
        some = False
        for b, pool in self.evals.items():
            o = self.c.options(b)
            free = pool.limit() - pool.backlog() - coming * o.rate
            if o.wait and free <= 0:
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
            if not backends:
                continue  # sampled for no backend: nothing to test
            test = _Test(i, test_id(self.run_id, i), seed, backends)
            b = self._starving(backends)
            if b is not None:  # made without the ops this backend lacks, so it has work
                test.avoid, test.made_for = self.lacks[b], b
                self.making_for[b] += 1
                self.made_for[b] += 1
            self.gen.queue.append(_Item(test))
            want -= 1

    def _starving(self, backends: list[str]) -> str | None:
        """A backend of `backends` that lacks some ops and would idle: fewer tests waiting for
        it (queued, or being made for it) than it has actors. Ties go to the fewest waiting."""
        best: tuple[int, str] | None = None
        for b in backends:
            if b not in self.lacks:
                continue
            pool = self.evals[b]
            waiting = len(pool.queue) + len(pool.retry) + self.making_for[b]
            if waiting < pool.n and (best is None or waiting < best[0]):
                best = (waiting, b)
        return best[1] if best else None

    def _generated(self, test: _Test) -> None:
        """`test` left generation (made, invalid or failed)."""
        if test.made_for is not None:
            self.making_for[test.made_for] -= 1
            test.made_for = None

    def _lacking(self, backend: str, ops: list[str] | None) -> list[str]:
        """The ops of a test (its rows' `ops`) that `backend` lacks, sorted."""
        return sorted(self.lacks.get(backend, frozenset()) & set(ops or ()))

    def _route(self, test: _Test, b: str, known: dict[str, str]) -> bool:
        """Whether backend `b` gets `test`: not when its graph holds an op `b` lacks (counted
        as not applicable, by that op), nor, mostly, when it matches a known bug of `b`
        (counted as held back; `campaign.known_rate` of such tests still go)."""
        lacking = self._lacking(b, (test.base or {}).get("ops"))
        if lacking:
            self.not_applicable[b][lacking[0]] += 1
            return False
        bucket = known.get(b)
        if bucket is not None and not sampled(test.seed, f"known:{bucket}", self.c.known_rate):
            self.held_known[b][bucket] += 1
            return False
        return True

    # ---- results -----------------------------------------------------------------------------
    def _add_row(self, test: _Test, row: dict[str, Any]) -> None:
        self.sink.add(row)
        self.verdicts.setdefault(row["backend"], Counter())[row["verdict"]] += 1
        if row.get("cpu_ms") is not None:  # a merged module's CPU is on each of its k parts
            self.cpu_s[row["backend"]] += row["cpu_ms"] / 1e3 / (row.get("merged") or 1)
        test.rows += 1

    def _finish(self, test: _Test) -> None:
        test.case = None
        if test.rows:
            self.tests_done += 1
            if self.bar is not None:
                self.bar.update(1)
        else:
            self.skipped_tests += 1

    def _record(self, test: _Test, report: Any) -> None:
        dirs: dict[tuple[str, str], str] = {}
        for f in report.findings:
            d = self.findings.add(f)
            if d is not None:  # an earlier test's finding may come too (worker.blame_finding)
                dirs.setdefault((f.backend, f.test_id), d)
        for row in report.rows:
            self._add_row(test, {**row, "finding_dir": dirs.get((row["backend"], row["test_id"]))})
        self.consecutive_failures = 0

    def on_generated(self, item: _Item, res: Any) -> None:
        test = item.test
        if _is_error(res):
            self.errors += 1
            self.fail(self.gen, item, Verdict.INVALID, "WorkerError", res.message)
            return
        self._generated(test)
        if res.report is not None:  # an invalid test: its rows are final
            self._record(test, self._applicable(res.report))
            self._finish(test)
            return
        test.case, test.base = res.case, res.base
        known = getattr(res, "known", None) or {}
        for b in test.backends:
            if not self._route(test, b, known):
                continue
            pool = self.evals[b]
            if self.c.options(b).wait or pool.backlog() < pool.limit():
                pool.queue.append(_Item(test))
                test.pending.add(b)
            else:
                pool.skipped_busy += 1
        self.consecutive_failures = 0
        if not test.pending:
            self._finish(test)

    def _applicable(self, report: Any) -> Any:
        """An invalid test's report without the rows of backends that lack one of its ops
        (they would not have been given it), unless that leaves none."""
        keep = [r for r in report.rows if not self._lacking(r["backend"], r.get("ops"))]
        if keep and len(keep) < len(report.rows):
            report.rows = keep
        return report

    def on_evaluated(self, pool: _Pool, item: _Item, res: Any) -> None:
        if _is_error(res):
            self.errors += 1
            self.fail(pool, item, Verdict.INVALID, "WorkerError", res.message)
            return
        test = item.test
        self._add_coverage(res)
        self._record(test, res)
        self.outcomes += [(r["test_id"], verdict_signature(r)) for r in res.rows]
        self._done_with(pool, test)

    def _add_coverage(self, report: Any) -> None:
        """The compiler lines a report's tests ran (what they added to their evaluator's
        union) into the campaign's union; each row's `cov_new` becomes what is new to the
        campaign, and a test that reached new lines goes to the seed pools as novel."""
        new: Counter[tuple[str, str]] = Counter()
        measured: set[tuple[str, str]] = set()
        for tid, backend, lines in getattr(report, "coverage", None) or ():
            measured.add((tid, backend))
            new[tid, backend] += self.coverage.add(backend, tid, lines,
                                                   time.monotonic() - self.t_start)
        for row in report.rows:
            key = (row["test_id"], row["backend"])
            if key in measured:
                row["cov_new"] = new[key]
        self.cov_outcomes += [(t, b, n) for (t, b), n in new.items() if n]

    def _done_with(self, pool: _Pool, test: _Test) -> None:
        test.pending.discard(pool.stage)
        pool.done += 1
        if not test.pending:
            self._finish(test)

    def fail(self, pool: _Pool, item: _Item, verdict: Verdict, error_class: str, msg: str,
             slot: _Slot | None = None) -> None:
        """Rows for a test whose actor died, hung or raised on it: what the driver knows of it.
        Its finding folder (on its first row) holds info.json (the seed, the error) and, for an
        evaluation, the test's files; `FuzzWorker.make_test(test_id, seed)` with the run's
        config.yaml rebuilds it."""
        test = item.test
        worker = slot.name if slot is not None else pool.label
        host = slot.host if slot is not None else "unknown"
        backends = test.backends if pool.stage == GEN else [pool.stage]
        base = (ResultRow.from_dict(test.base) if pool.stage != GEN and test.base
                else ResultRow.graphless(test.test_id, test.seed))
        ts = utc_now()
        rows = [base.lost(b, self.targets.get(b, ""), verdict, error_class, msg, host, worker, ts)
                for b in backends]
        finding_dir = None
        if verdict.is_finding:
            finding_dir = self.findings.add(self._failure_finding(test, rows[0], pool, worker, host))
        for k, row in enumerate(rows):
            self._add_row(test, {**row.to_dict(), "finding_dir": finding_dir if k == 0 else None})
        if pool.stage == GEN:
            self._generated(test)
            self._finish(test)
        else:
            self._done_with(pool, test)
        if error_class != "WorkerTimeout":
            self.consecutive_failures += 1
            limit = self.c.max_consecutive_worker_failures
            if self.consecutive_failures >= limit:
                raise CampaignError(
                    f"{limit} tests in a row failed inside the actors "
                    f"(campaign.max_consecutive_worker_failures); last: {error_class}: "
                    f"{_last_line(Exception(msg))}")

    def _failure_finding(self, test: _Test, row: ResultRow, pool: _Pool, worker: str,
                         host: str) -> Any:
        from campaign.worker import Finding

        info = {"test_id": test.test_id, "seed": test.seed, "backend": row.backend,
                "verdict": row.verdict, "error_class": row.error_class,
                "stage": "generation" if pool.stage == GEN else "evaluation",
                "worker": worker, "host": host, "error_msg": row.error_msg,
                "config": "config.yaml in the run's output dir"}
        files: dict[str, bytes] = {}
        if test.case is not None:
            try:
                from campaign.pipeline import case_finding

                files = dict(case_finding(test.case, row).files)
            except Exception as e:  # the artifacts are a courtesy; the row is what counts
                info["artifacts_error"] = f"{type(e).__name__}: {e}"
        files["info.json"] = (json.dumps(info, indent=2, default=str) + "\n").encode()
        return Finding(test.test_id, row.backend, row.verdict, row.error_sig, files)

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
            log.warning("actor %s raised: %s", slot.name, _last_line(e))
            self._raised(pool, call, slot, e)
            return
        pool.pop(call)
        self._results(pool, call, results)

    def _raised(self, pool: _Pool, call: _Call, slot: _Slot, e: BaseException) -> None:
        """A whole call raised (stages catch per test, so this is rare): blame a test that ran
        alone; re-run the tests of a batch each alone, to find the one that raises."""
        if len(call.items) == 1:
            self.errors += 1
            self.fail(pool, call.items[0], Verdict.INVALID, "WorkerError", str(e), slot)
        else:
            self._suspect(pool, call.items, slot, "raised")

    def _results(self, pool: _Pool, call: _Call, results: list) -> None:
        for item, res in zip(call.items, results, strict=True):
            if pool.stage == GEN:
                self.on_generated(item, res)
            else:
                self.on_evaluated(pool, item, res)

    def retire(self, slot: _Slot, verdict: Verdict, error_class: str,
               cause: BaseException | None) -> None:
        """The actor of `slot` died (or is being killed for hanging): keep the results that came
        back; of the tests that did not, blame one if that is unambiguous and re-run the rest
        (see the module doc); start a fresh actor."""
        pool = slot.pool
        if isinstance(cause, RayActorError) and cause.actor_init_failed:
            raise CampaignError(f"actor {slot.name} failed to start: {_last_line(cause)}")
        oom = isinstance(cause, OutOfMemoryError)
        if oom:
            self.node_oom += 1
            log.warning("actor %s was killed by Ray: the node ran low on memory (%d so far)",
                        slot.name, self.node_oom)
            if self.node_oom > MAX_NODE_OOM:
                raise CampaignError(
                    f"Ray killed actors {self.node_oom} times because the node ran low on "
                    f"memory (another process, or actors that need more than it has: see "
                    f"`ray memory`, campaign.backend_options.<b>.actors): {_last_line(cause) if cause else ''}")
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception:
            pass
        calls = list(slot.calls)
        ready: set = set()
        if calls:
            done, _ = ray.wait([c.ref for c in calls], num_returns=len(calls), timeout=10.0)
            ready = set(done)
        failed: list[_Call] = []  # the calls that did not come back, oldest first
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
            self.timeouts += 1
        else:
            self.deaths += 1
        items = [it for c in failed for it in c.items]
        msg = str(cause) if cause is not None else error_class
        if hung and failed:
            running, queued = failed[0].items, [it for c in failed[1:] for it in c.items]
            self.requeued += len(queued)
            pool.retry.extend(queued)
            if len(running) == 1:
                self._blame(pool, running[0], slot, verdict, error_class, msg, "hung")
            else:
                self._suspect(pool, running, slot, "hung")
        elif oom:  # Ray chose the actor to kill: only a test that gets it killed alone again
            if len(items) == 1 and items[0].suspect:
                self._blame(pool, items[0], slot, verdict, error_class, msg, "was killed for memory")
            elif items:
                self._suspect(pool, items, slot, "was killed for memory")
        elif len(items) == 1:
            self._blame(pool, items[0], slot, verdict, error_class, msg, "died")
        elif items:
            self._suspect(pool, items, slot, "died")
        pool.replace(slot)

    def _blame(self, pool: _Pool, item: _Item, slot: _Slot, verdict: Verdict, error_class: str,
               msg: str, how: str) -> None:
        log.warning("actor %s %s on %s (seed %d); replacing it", slot.name, how,
                    item.test.test_id, item.test.seed)
        if item.suspect:
            msg = f"(re-run alone on a fresh actor) {msg}"
        self.fail(pool, item, verdict, error_class, msg, slot)

    def _suspect(self, pool: _Pool, items: list[_Item], slot: _Slot, how: str) -> None:
        log.warning("actor %s %s with %d tests not back; re-running each alone", slot.name, how,
                    len(items))
        for it in items:
            it.suspect = True
        self.requeued += len(items)
        pool.suspects.extend(items)

    def check_hangs(self) -> None:
        now = time.monotonic()
        for pool in self.pools:
            for slot in pool.slots:
                if slot.starting is not None:
                    done, _ = ray.wait([slot.starting], timeout=0)
                    if done:  # started (or failed to: its calls then fail and say so)
                        try:
                            self._started(slot)
                        except CampaignError:
                            if slot.first_start:
                                raise
                            slot.starting = None  # its calls fail with the cause
                    elif now - slot.starting_since > self.cfg.ray.start_timeout_s:
                        what = "actor" if slot.first_start else "replacement actor"
                        raise CampaignError(
                            f"{what} {slot.name} did not start within "
                            f"ray.start_timeout_s={self.cfg.ray.start_timeout_s:g} s "
                            f"(the cluster's resources are in use? see `ray status`; needs "
                            f"{_fmt(pool.resources)})")
                    continue
                slot.first_start = False
                if slot.calls and now - slot.head_since > pool.call_limit(slot.calls[0]):
                    limit = self.c.test_timeout_s
                    self.retire(slot, Verdict.TIMEOUT, "WorkerTimeout", TimeoutError(
                        f"actor call ran past campaign.test_timeout_s={limit:g} s"))

    # ---- the loop ----------------------------------------------------------------------------
    def hold_for_disk(self) -> None:
        """Results cannot be written (`ResultSink.blocked`): generation pauses (no new test is
        fed) while the tests already fed run to the end and their rows come back into memory,
        and writing is retried until it works again (return) or `campaign.disk_wait_s` passed
        (DiskFull)."""
        wait_s = self.c.disk_wait_s
        while self.sink.blocked:
            waited = time.monotonic() - (self.sink.blocked_since or time.monotonic())
            if waited >= wait_s:
                assert self.sink.error is not None  # set with blocked_since
                raise DiskFull(
                    f"results could not be written to {self.sink.dir} for "
                    f"campaign.disk_wait_s={wait_s:g} s ({describe_error(self.sink.error)}); "
                    f"free at least "
                    f"{self.sink.bytes_needed() / 2**20:.1f} MB there and continue with "
                    "campaign.resume=true")
            if self.deadline is not None and time.monotonic() >= self.deadline:
                return  # the loop stops at the deadline; the sink keeps what it could not write
            self.dispatch()  # what was fed before still runs (no feeding): no test left half-done
            refs = list(self.by_ref)
            if refs:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
                for ref in ready:
                    self.complete(ref)
                self.check_hangs()
            else:
                time.sleep(min(POLL_S, max(wait_s - waited, 0.01)))
            self.sink.maybe_flush()

    def loop(self) -> None:
        last_postfix = 0.0
        while True:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.stop_at_deadline()
                return
            if self.sink.blocked:
                self.hold_for_disk()
                continue  # the deadline may have come meanwhile
            self.feed()
            self.dispatch()
            if not self.by_ref:
                if any(p.backlog() for p in self.pools):
                    self._wait_for_starts()
                    continue
                else:
                    last = self.send_feedback(force=True)  # the rest, before the actors stop
                    if last:
                        ray.wait(last, num_returns=len(last), timeout=2.0)
                    return
            refs = list(self.by_ref) + self._starting_refs()
            # wake for a batch coming due only where an actor can take it: a due batch with
            # every actor busy would make this a 1 ms spin (a backend slower than generation)
            wake = min([POLL_S] + [p.due() for p in self.evals.values()
                                   if p.queue and self._can_send(p)])
            if self.deadline is not None:
                wake = min(wake, self.deadline - time.monotonic())
            ready, rest = ray.wait(refs, num_returns=1, timeout=max(wake, 0.001))
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                self.complete(ref)
            self.check_hangs()
            self.sink.maybe_flush()
            self.send_feedback()
            now = time.monotonic()
            if self.bar is not None and now - last_postfix >= 0.5:
                last_postfix = now
                rate = self.tests_done / max(now - self.t_start, 1e-9)
                self.bar.set_postfix({"tests/s": f"{rate:.1f}", "findings": self.findings.total},
                                     refresh=False)

    def _starting_refs(self) -> list:
        return [s.starting for p in self.pools for s in p.slots if s.starting is not None]

    def _wait_for_starts(self) -> bool:
        """Nothing is in flight but work is queued: wait (briefly) for actors still starting,
        or for a batch to come due, or for the deadline (work that would not fit before it
        waits for it); always True (the caller goes round again)."""
        starting = self._starting_refs()
        if starting:
            ray.wait(starting, num_returns=1, timeout=POLL_S)
            self.check_hangs()
            return True
        wait = min([POLL_S] + [p.due() for p in self.evals.values() if p.due() > 0])
        if self.deadline is not None:
            wait = min(wait, self.deadline - time.monotonic())
        time.sleep(max(wait, 0.001))
        return True

    def _can_send(self, pool: _Pool) -> bool:
        return pool.idle_slot() is not None if self.scheduler is not None else pool.can_send()

    def dispatch(self) -> None:
        """Send the calls that are due. Without a scheduler every actor gets up to
        `in_flight_per_worker` calls; with one, each free core goes to the stage with work
        ready and the smallest virtual time (campaign/scheduler.py), one call per actor."""
        sched = self.scheduler
        if sched is None:
            for pool in self.pools:
                pool.submit()
            return
        ready = {p.stage: p for p in self.pools if p.has_work() and p.idle_slot() is not None
                 and self._fits_before_deadline(p)}
        sched.ready(ready)
        while ready and sched.free() > 0:
            stage = sched.pick(ready)
            if stage is None:
                break
            pool = ready[stage]
            slot = pool.idle_slot()
            assert slot is not None
            call = pool.send_next(slot)
            if call is not None:
                call.expected_s = pool.expected_s(call)
                sched.start(stage, call.expected_s)
            if call is None or not pool.has_work() or pool.idle_slot() is None:
                del ready[stage]
            if stage == GEN:  # room for more tests to be made
                self.feed()
                if self.gen.has_work() and self.gen.idle_slot() is not None:
                    ready[GEN] = self.gen

    def _fits_before_deadline(self, pool: _Pool) -> bool:
        """Whether a call of `pool` is expected to come back before the testing deadline: one
        that would be cut off anyway is not sent, and its core goes to a stage whose work
        fits (a compile of seconds in the last seconds of a budget is wasted)."""
        if self.deadline is None or pool.per_item_s is None:
            return True
        return time.monotonic() + pool.per_item_s * pool.batch() <= self.deadline

    def stop_at_deadline(self) -> None:
        """The testing phase's time is up: work in flight is stopped, not waited for. Actors
        running a call are killed (their tests get no row and are not counted; a test another
        backend already reported keeps those rows), queued tests are dropped."""
        for pool in self.pools:
            for slot in pool.slots:
                if not slot.calls:
                    continue
                try:
                    ray.kill(slot.actor, no_restart=True)
                except Exception:  # already gone
                    pass
                for call in list(slot.calls):
                    pool.pop(call, timed=False)
                    for it in call.items:
                        self._cut(pool, it.test)
            for q in (pool.queue, pool.retry, pool.suspects):
                for it in q:
                    self._cut(pool, it.test)
                q.clear()

    def _cut(self, pool: _Pool, test: _Test) -> None:
        """`test` was cut off at the deadline in `pool`."""
        if pool.stage == GEN:
            self.cut_off[GEN] += 1
            return
        self.cut_off[pool.stage] += 1
        test.pending.discard(pool.stage)
        if not test.pending:
            test.case = None
            if test.rows:  # reported by another backend: counted, with those rows
                self.tests_done += 1
                if self.bar is not None:
                    self.bar.update(1)

    def send_feedback(self, force: bool = False) -> list:
        """Backend verdicts to every generation actor's seed pool, fire and forget (a stage
        class without `feedback` gets none); each actor keeps those of its own tests. Sent at
        most every FEEDBACK_S seconds, so that it costs a Ray call per actor per interval, not
        per completed batch."""
        now = time.monotonic()
        if not force and now - self.feedback_sent < FEEDBACK_S:
            return []
        self.feedback_sent = now
        refs = []
        if self.outcomes and hasattr(self.stages.generator_cls, "feedback"):
            refs = [slot.actor.feedback.remote(self.outcomes) for slot in self.gen.slots]
        if self.cov_outcomes and hasattr(self.stages.generator_cls, "coverage_feedback"):
            refs += [slot.actor.coverage_feedback.remote(self.cov_outcomes)
                     for slot in self.gen.slots]
        self.outcomes = []
        self.cov_outcomes = []
        return refs

    def stage_report(self) -> dict[str, dict[str, Any]]:
        """Per stage: share, core-seconds and calls from the scheduler ({} without one)."""
        return self.scheduler.report() if self.scheduler is not None else {}

    def summary(self, interrupted: bool) -> Summary:
        elapsed = time.monotonic() - self.t_start
        sched = self.stage_report()
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
            finding_write_errors=self.findings.write_errors,
            backends={b: {"target": self.targets.get(b, ""), "actors": p.n,
                          "rate": self.c.options(b).rate, "evaluated": p.done,
                          "skipped_busy": p.skipped_busy, "resources": p.resources,
                          "calls": p.calls,
                          "share": sched.get(b, {}).get("share"),
                          "core_s": sched.get(b, {}).get("core_s"),
                          "cpu_s": round(self.cpu_s[b], 3),
                          "not_applicable": dict(self.not_applicable[b]),
                          "made_for": self.made_for[b],
                          "held_known": dict(self.held_known[b]),
                          "cut_off": self.cut_off[b]}
                      for b, p in self.evals.items()},
            skipped_tests=self.skipped_tests, generation_calls=self.gen.calls,
            actors=self.actor_table(),
            resumed_at=self.resumed_at,
            cores=self.cores,
            generation={**sched.get(GEN, {}), "calls": self.gen.calls,
                        "cut_off": self.cut_off[GEN]},
            testing_s=(self.t_end or time.monotonic()) - self.t_start,
            testing_deadline_s=(self.deadline - self.t_start if self.deadline is not None
                                else None),
            coverage=self.coverage.totals(),
        )

    def write_coverage(self) -> None:
        """The campaign's compiler coverage as Parquet in `coverage/` (nothing when none was
        measured); a write that fails is a warning line."""
        if not self.coverage.unions:
            return
        try:
            self.coverage.write(self.out_dir / COVERAGE_DIR)
        except OSError as e:
            log.warning("coverage: cannot write to %s (%s)", self.out_dir / COVERAGE_DIR,
                        e.strerror or e)


def _recover_spilled(out_dir: Path) -> int:
    """The rows an earlier stop on a full disk spilled (`_spill`), back into results/."""
    from campaign.storage import recover_spilled

    try:
        n = recover_spilled(out_dir)
    except OSError as e:
        raise CampaignError(f"campaign.resume: cannot move the rows spilled on a full disk "
                            f"back into {out_dir}: {e.strerror or e}") from None
    if n:
        log.warning("campaign.resume: %d results files spilled on a full disk moved back", n)
    return n


def _check_resume_config(conf: Config, out_dir: Path) -> None:
    """A resumed campaign must make the same tests: same seed, generator, mutation, backends."""
    old = OmegaConf.load(out_dir / "config.yaml")
    new = OmegaConf.structured(conf)
    for key in ("campaign.seed", "campaign.backends", "campaign.name", "generator", "mutation"):
        a, b = OmegaConf.select(old, key), OmegaConf.select(new, key)
        a = OmegaConf.to_container(a) if OmegaConf.is_config(a) else a
        b = OmegaConf.to_container(b) if OmegaConf.is_config(b) else b
        if a != b:
            raise CampaignError(f"campaign.resume=true: {key} differs from the run in {out_dir} "
                                f"({a!r} there, {b!r} now)")


#: seconds of a wall-clock budget kept for building report.html after the triage
REPORT_S = 4.0


def _report(out_dir: Path) -> None:
    """report.html in the output dir (docs/report.md); a failure is logged, never raised."""
    try:
        from campaign.report import build_report

        res = build_report([out_dir], out_dir / "report.html")
        print(f"report: {res.out} ({res.size_bytes / 1e6:.1f} MB)", flush=True)
    except Exception as e:
        log.warning("report.html not built: %s: %s", type(e).__name__, e)


def run_campaign(cfg: Config | DictConfig, out_dir: Path, *,
                 stages: Stages | None = None) -> Summary:
    """Run one campaign into `out_dir` (results/, findings/, config.yaml, summary.json) and
    return its summary. `stages`: the stage classes (default: campaign.pipeline's).

    Raises ConfigError for an unusable config and CampaignError when the cluster cannot host
    the actors or they cannot start; results gathered so far are flushed either way."""
    conf = to_config(cfg)
    budget = preflight(conf)
    out_dir = Path(out_dir)
    if conf.campaign.resume and not (out_dir / "config.yaml").is_file():
        raise CampaignError(f"campaign.resume=true: {out_dir} holds no campaign (no config.yaml); "
                            "set output.dir to the output directory of the run to continue")
    if conf.campaign.probe:
        from campaign.probe import deny_list  # runs the backends in this process, once cached

        conf.generator.deny = sorted(set(conf.generator.deny) | set(deny_list(conf.campaign.probe)))
        log.warning("support probe of %s: %d signatures kept out of the generator",
                    ", ".join(conf.campaign.probe), len(conf.generator.deny))
    if conf.campaign.resume:  # after the probe: config.yaml holds the deny list it made
        _check_resume_config(conf, out_dir)
    targets = backend_targets(conf)
    needs = actor_needs(conf, targets)
    stages = stages or default_stages(conf)
    known = conf.triage.known + ([str(out_dir)] if conf.campaign.resume else [])
    db = _bug_db(conf, out_dir)
    if (known or db) and hasattr(stages.config, "known"):
        from campaign.known import db_triggers, load_triggers

        stages.config.known = load_triggers(known) + (db_triggers(db) if db else [])
        log.warning("known bugs: %d triggers from %s", len(stages.config.known),
                    ", ".join(known + ([str(db)] if db else [])))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"output.dir: cannot create {str(out_dir)!r}: {e.strerror or e}") from None
    if not conf.campaign.resume:
        try:
            (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(conf)))
        except OSError as e:
            raise CampaignError(f"output.dir: cannot write {out_dir / 'config.yaml'}: "
                                f"{e.strerror or e}") from None
    started = _start_ray(conf, needs)
    t0 = time.monotonic()  # the budget counts from here: Ray's start-up is not in it
    plan = BudgetPlan.of(budget, conf.triage.budget, conf.triage.enabled)
    camp: _Campaign | None = None
    interrupted = False
    by_signal: str | None = None
    stopped: str | None = None
    try:
        check_resources(conf, needs)
        camp = _Campaign(conf, budget, out_dir, stages, needs, targets,
                         cores=campaign_cores(conf, started and not conf.ray.address),
                         lacks=backend_lacks(conf), merge_keys=backend_merge_keys(conf))
        if plan.testing_s is not None:
            camp.deadline = t0 + plan.testing_s
        warn_if_ctrl_c_ignored(log)
        with logging_redirect_tqdm(), sigterm_stops_campaign() as received:
            try:
                camp.start_actors()
                camp.t_start = t0
                total = (budget.tests - camp.next_index) if budget.tests is not None else None
                camp.bar = tqdm(total=total, unit="test", dynamic_ncols=True,
                                disable=None, desc=conf.campaign.name)
                camp.loop()
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (`Terminated`)
                interrupted, by_signal = True, received.stop_signal()
            except DiskFull as e:  # stops as on Ctrl-C, with its reason
                interrupted, stopped = True, str(e)
                log.error("%s", e)
            finally:
                camp.t_end = time.monotonic()
                if camp.bar is not None:
                    camp.bar.close()
    finally:
        if camp is not None:
            camp.sink.close()
            spill = _spill(camp.sink)
            camp.write_coverage()
            try:
                summary = camp.summary(interrupted)
            except Exception:  # e.g. the cluster went away: the summary without the actor table
                camp.actor_table = lambda settle_s=0.0: []  # type: ignore[method-assign]  # (a patch, for this call)
                summary = camp.summary(interrupted)
            summary.stopped, summary.signal = stopped, by_signal
            summary.rows_spilled, summary.spill_file = spill
            camp.stop_actors()
        if started:
            ray.shutdown()
        if camp is not None:
            kill_leftovers(camp.run_id)
    assert camp is not None
    try:
        (out_dir / "summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    except OSError as e:  # a full disk: the printed summary is all there is
        log.warning("summary.json: cannot write to %s (%s)", out_dir, e.strerror or e)
    print(summary.text(), flush=True)
    if conf.triage.enabled and not interrupted:
        from campaign.triage.run import triage_campaign  # buckets, reductions, repro.py

        end = t0 + plan.total_s - REPORT_S if plan.total_s is not None else None
        try:
            triage_campaign(out_dir, conf.triage, log=tqdm.write, deadline=end)
        except OSError as e:  # a full disk: the results are safe, triage can run later
            log.warning("triage: stopped, cannot write to %s (%s); run `python -m "
                        "campaign.triage %s` when there is space", out_dir, e.strerror or e,
                        out_dir)
    if conf.campaign.report and not interrupted:
        _report(out_dir)
    return summary


def _bug_db(conf: Config, out_dir: Path) -> Path | None:
    """The bug database the triage will use (`triage.db`, else `runs/bugdb` for an output dir
    under runs/: `campaign.triage.bugdb.resolve`), written back into `conf.triage.db` (`off`
    for none) so config.yaml records it; ConfigError (before any testing) when it is unusable."""
    from campaign.triage.bugdb import BugDb, BugDbError, resolve

    path = resolve(conf.triage.db, out_dir) if conf.triage.enabled else None
    conf.triage.db = str(path) if path is not None else "off"
    if path is None:
        return None
    try:
        BugDb.open(path)
    except BugDbError as e:
        raise ConfigError(str(e)) from None
    return path


def _spill(sink: ResultSink) -> tuple[int, str | None]:
    """Rows the sink still holds after its last flush failed: written to the spill dir
    (`ResultSink.spill`), so a resume gets them back; (rows, file or None when lost)."""
    n = sink.buffered
    if not n:
        return 0, None
    try:
        f = sink.spill()
    except OSError as e:
        log.error("results: %d rows could not be written anywhere (%s)", n, e.strerror or e)
        return n, None
    log.warning("results: %d rows kept in %s until campaign.resume=true moves them back", n, f)
    return n, str(f)
