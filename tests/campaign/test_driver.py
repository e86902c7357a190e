"""The driver on a simulated heterogeneous Ray cluster (`ray.cluster_utils.Cluster`: a CPU head
node, and a node declaring a GPU added halfway), with light test doubles of the two stages that
crash, exit, hang, raise or are killed with -9 on chosen tests: every test still gets one row
per backend it was given, the failing one is blamed, the others are re-run, the campaign goes
on; actors land where their resources are; a missing GPU fails at once."""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field

import pytest
import ray
import ray.cloudpickle
from stage_doubles import Made

from campaign.config import BackendOptions, CampaignConfig, Config, GenerationOptions, RayConfig
from campaign.driver import checks
from campaign.driver.errors import CampaignError
from campaign.driver.run import run_campaign
from campaign.driver.stages import Stages
from campaign.ids import index_of, sampled
from campaign.row import ResultRow
from campaign.storage import read_results
from campaign.verdict import Verdict

# Ray workers cannot import this test module by name: ship the doubles' code by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: (stage, test index) -> what the double does there; stage "gen" or a backend spec
ACTIONS = {("ort", 3): "segfault", ("ort_noopt", 7): "exit", ("ort", 9): "raise",
           ("ort_noopt", 12): "hang", ("gen", 15): "exit", ("ort", 17): "error"}


# ---- the doubles ------------------------------------------------------------------------------

@dataclass
class FakeConfig:
    backends: list
    actions: dict = field(default_factory=dict)
    #: backend -> seconds per test
    delay: dict = field(default_factory=dict)
    #: a file: the first evaluator to reach test 5 creates it and kills itself with SIGKILL
    kill_once: str = ""
    #: a file every call appends "stage start end" to (monotonic clock, shared by processes)
    trace: str = ""
    #: generation: tests with an odd index hold a `loop` (unless asked to avoid it)
    odd_loops: bool = False
    #: generation: tests whose index is a multiple of this match a known bug of `known_for`
    known_every: int = 0
    known_for: tuple = ()
    #: seconds each generation call takes per test
    gen_delay: float = 0.0


@dataclass
class FakeReport:
    rows: list
    findings: list


@dataclass
class FakeFinding:
    test_id: str
    backend: str
    verdict: str
    error_sig: str
    files: dict = field(default_factory=dict)


@dataclass
class FakeError:
    message: str


def base_row(test_id: str, seed: int) -> dict:
    """The shared columns of a test's rows (backend, target and verdict empty)."""
    return ResultRow.graphless(test_id, seed, graph_hash="h", n_insts=1, n_inputs=1, max_depth=1,
                               n_input_sets=1, ops=["add"], dtypes=["f32"], dialect="eager",
                               gen_ms=0.1, host="fakehost", worker="gen")


def misbehave(action: str) -> None:
    if action == "segfault":
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    elif action == "exit":
        os._exit(1)
    elif action == "raise":
        raise RuntimeError("fake stage bug")
    elif action == "hang":
        time.sleep(3600)


class FakeGenerator:
    def __init__(self, cfg: FakeConfig, name: str):
        self.cfg = cfg

    def generate(self, items):
        t0 = time.monotonic()
        out = []
        for tid, seed, _backends, *rest in items:
            i = index_of(tid)
            misbehave(self.cfg.actions.get(("gen", i), ""))
            time.sleep(self.cfg.gen_delay)
            base = base_row(tid, seed)
            avoid = list(rest[0]) if rest else []
            if avoid:
                base.update(lineage=json.dumps([{"seed": seed, "avoid": avoid}]))
            if self.cfg.odd_loops and i % 2 and "loop" not in avoid:
                base.update(ops=["add", "loop"])
            known = ({b: "known-bug" for b in self.cfg.known_for}
                     if self.cfg.known_every and i % self.cfg.known_every == 0 else {})
            case = f"{tid}|{seed}|{','.join(base['ops'])}|{','.join(avoid)}"
            out.append(Made(tid, seed, case, base, None, known=known))
        _trace(self.cfg, "generate", t0)
        return out


def _trace(cfg: FakeConfig, stage: str, t0: float) -> None:
    if cfg.trace:
        with open(cfg.trace, "a") as f:
            f.write(f"{stage} {t0} {time.monotonic()}\n")


def _first_to_create(path: str) -> bool:
    """Create `path`; True only for the one process that did (both backends' evaluators may
    reach test 5 at once: checking, then creating, let both kill themselves now and then)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class FakeEvaluator:
    """Finds a mismatch on every 5th test, passes the rest; misbehaves as `cfg.actions` say."""

    def __init__(self, cfg: FakeConfig, backend: str, name: str):
        self.cfg, self.backend, self.name = cfg, backend, name

    def evaluate(self, cases):
        t0 = time.monotonic()
        out = self._evaluate(cases)
        _trace(self.cfg, self.backend, t0)
        return out

    def _evaluate(self, cases):
        out = []
        for case in cases:
            tid, seed, ops, avoid = case.split("|")
            i = index_of(tid)
            action = self.cfg.actions.get((self.backend, i), "")
            if action == "error":
                out.append(FakeError(f"harness error on {tid}"))
                continue
            misbehave(action)
            if i == 5 and self.cfg.kill_once and _first_to_create(self.cfg.kill_once):
                os.kill(os.getpid(), signal.SIGKILL)  # what `kill -9 <actor pid>` does
            time.sleep(self.cfg.delay.get(self.backend, 0.0))
            verdict = "mismatch" if i % 5 == 0 else "pass"
            row = base_row(tid, int(seed)).for_backend(self.backend, "cpu", verdict=verdict,
                                                       worker=self.name, ops=ops.split(","))
            if avoid:
                row.update(lineage=json.dumps([{"seed": int(seed), "avoid": avoid.split(",")}]))
            findings = ([FakeFinding(tid, self.backend, verdict, "Mismatch: output N",
                                     {"info.json": b"{}"})] if verdict != "pass" else [])
            out.append(FakeReport([row], findings))
        return out


class BrokenEvaluator(FakeEvaluator):
    def __init__(self, cfg, backend, name):
        raise ValueError("no such backend: nope")


class RaisingGenerator(FakeGenerator):
    def generate(self, items):
        return [FakeError("harness bug") for _ in items]


def stages(backends, gen=FakeGenerator, ev=FakeEvaluator, **kw) -> Stages:
    return Stages(gen, ev, FakeConfig(list(backends), **kw))


def config(**campaign) -> Config:
    """A campaign of the doubles; its backends wait (no test skips a busy one: an actor being
    replaced makes it busy for a while), so that every test gets a row from each. The hang
    limit leaves room for a loaded machine (an actor starved for seconds is no hang)."""
    backends = campaign.get("backends", ["ort", "ort_noopt"])
    base = dict(name="t", budget="20", workers=2, backends=backends, seed=1,
                in_flight_per_worker=2, flush_rows=7, flush_every_s=60.0,
                max_findings_per_signature=1, test_timeout_s=6.0, sandbox_timeout_s=1.0,
                backend_options={b: BackendOptions(wait=True) for b in backends})
    return Config(campaign=CampaignConfig(**{**base, **campaign}),
                  ray=RayConfig(start_timeout_s=60))


def by_test(rows) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in rows:
        out.setdefault(index_of(r["test_id"]), []).append(r)
    return out


# ---- the cluster --------------------------------------------------------------------------------

def _token_auth_on() -> str | None:
    """Turn token authentication on in this process (and the nodes it starts), with a token in
    ~/.ray/auth_token if there is none yet (what `ray.init()` of a local cluster does); return
    the RAY_AUTH_MODE it replaced."""
    from ray._private.authentication.authentication_token_setup import (
        _enable_token_auth,
        generate_and_save_token,
    )
    from ray._raylet import AuthenticationTokenLoader

    old = os.environ.get("RAY_AUTH_MODE")
    _enable_token_auth()
    loader = AuthenticationTokenLoader.instance()
    if not loader.has_token(ignore_auth_mode=True):
        generate_and_save_token()
        loader.reset_cache()
    return old


@pytest.fixture(scope="module")
def cluster():
    """A CPU-only head node (8 logical CPUs, custom resource `gen_box`); the placement test adds
    a node declaring a GPU. Only this cluster's own processes are stopped at the end."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    # the head writes its address into <RAY_TMPDIR>/ray/ray_current_cluster, where a plain
    # `ray.init()` or `ray.address=auto` on this machine would find it: keep it in our own dir
    old_tmp = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = "/tmp/dsray-cl"
    os.makedirs("/tmp/dsray-cl/ray", exist_ok=True)
    old_mode = _token_auth_on()  # as `ray start --head` and a new local cluster have it
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 8, "resources": {"gen_box": 8}, "include_dashboard": False,
        "temp_dir": "/tmp/dsray-cl"})
    ray.init(address=c.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        for var, value in (("RAY_TMPDIR", old_tmp), ("RAY_AUTH_MODE", old_mode)):
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        from ray._raylet import Config as RayletConfig

        RayletConfig.initialize("")


def test_missing_gpu_fails_fast_with_a_clear_message(cluster, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(CampaignError, match=r"^each backend ort_cuda actor needs GPU=1 "
                       r"\(campaign.backend_options.ort_cuda\) but the Ray cluster has no GPU "
                       r"\(a cuda target: run on a cluster with a GPU node"):
        run_campaign(config(backends=["ort", "ort_cuda"]), tmp_path,
                     stages=stages(["ort", "ort_cuda"]))
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "results").exists() or read_results(tmp_path).num_rows == 0


def test_heterogeneous_cluster_places_each_stage_where_its_resources_are(cluster, tmp_path):
    if not any(n["Resources"].get("GPU") for n in ray.nodes() if n["Alive"]):
        cluster.add_node(num_cpus=4, num_gpus=1, resources={"tvm_box": 2},
                         include_dashboard=False)
    gpu_node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU"))
    head = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("gen_box"))
    cfg = config(budget="30", backends=["ort", "ort_cuda", "tvm"],
                 generation=GenerationOptions(resources={"gen_box": 1}),
                 backend_options={"tvm": BackendOptions(actors=1, resources={"tvm_box": 1},
                                                        wait=True),
                                  "ort": BackendOptions(wait=True),
                                  "ort_cuda": BackendOptions(num_gpus=0.5, wait=True)})
    summary = run_campaign(cfg, tmp_path, stages=stages(["ort", "ort_cuda", "tvm"]))

    where = {(a["stage"], a["name"]): a["node_id"] for a in summary.actors}
    assert len(where) == 2 + 2 + 2 + 1
    assert {n for (s, _), n in where.items() if s == "generate"} == {head}  # gen_box: head only
    assert {n for (s, _), n in where.items() if s == "ort_cuda"} == {gpu_node}  # half a GPU each
    assert {n for (s, _), n in where.items() if s == "tvm"} == {gpu_node}  # tvm_box there
    assert summary.backends["ort_cuda"]["resources"] == {"CPU": 1.0, "GPU": 0.5}
    assert summary.backends["ort_cuda"]["target"] == "cuda"
    rows = read_results(tmp_path).to_pylist()
    assert len(rows) == 30 * 3 and summary.tests == 30
    # two cuda actors need 2 GPUs: the cluster has 1 -> a clear error before anything starts
    with pytest.raises(CampaignError, match=r"need 2 GPU in all \(2 x 1 \(campaign.backend_"
                                            r"options.ort_cuda\)\) but the Ray cluster has 1"):
        run_campaign(config(backends=["ort_cuda"], workers=1,
                            backend_options={"ort_cuda": BackendOptions(actors=2, wait=True)}),
                     tmp_path / "b", stages=stages(["ort_cuda"]))


def test_crashes_exits_hangs_and_raises_lose_no_rows(cluster, tmp_path, capsys):
    summary = run_campaign(config(), tmp_path, stages=stages(["ort", "ort_noopt"],
                                                             actions=ACTIONS))
    rows = read_results(tmp_path).to_pylist()
    assert len(rows) == 20 * 2 == summary.rows
    assert summary.tests == 20 and not summary.interrupted
    tests = by_test(rows)
    assert sorted(tests) == list(range(20))
    assert all(sorted(r["backend"] for r in rs) == ["ort", "ort_noopt"] for rs in tests.values())
    assert {r["verdict"] for r in rows} <= {v.value for v in Verdict}
    got = {(i, r["backend"]): (r["verdict"], r["stage"], r["error_class"])
           for i, rs in tests.items() for r in rs if r["error_class"] is not None}
    assert got == {
        (3, "ort"): ("crash", "unknown", "WorkerDied"),
        (7, "ort_noopt"): ("crash", "unknown", "WorkerDied"),
        (9, "ort"): ("invalid", "unknown", "WorkerError"),
        (12, "ort_noopt"): ("timeout", "unknown", "WorkerTimeout"),
        (15, "ort"): ("crash", "unknown", "WorkerDied"),  # generation died: a row per backend
        (15, "ort_noopt"): ("crash", "unknown", "WorkerDied"),
        (17, "ort"): ("invalid", "unknown", "WorkerError"),
    }, "only the misbehaving tests are blamed; the others were re-run"
    assert "fake stage bug" in next(r["error_msg"] for r in tests[9] if r["backend"] == "ort")
    # a hang in a batch is found by re-running its tests alone: one or two actors hung
    assert summary.worker_timeouts in (1, 2) and summary.worker_errors == 2
    assert summary.worker_deaths >= 3
    # an evaluation failure keeps the test's graph columns; a generation failure has none
    assert {r["graph_hash"] for r in tests[3]} == {"h"} and tests[15][0]["graph_hash"] == ""
    with_dir = [r for r in rows if r["finding_dir"]]
    assert all((tmp_path / r["finding_dir"] / "info.json").is_file() for r in with_dir)
    assert summary.verdicts["ort"]["crash"] == 2 and summary.verdicts["ort_noopt"]["timeout"] == 1
    assert (tmp_path / "summary.json").is_file() and (tmp_path / "config.yaml").is_file()
    out = capsys.readouterr().out
    assert "backend" in out and "mismatch" in out and str(tmp_path / "results") in out


def test_evaluation_actor_killed_with_sigkill_is_replaced_and_its_test_recorded(cluster, tmp_path):
    marker = tmp_path / "killed-once"
    cfg = config(budget="40", workers=1)
    summary = run_campaign(cfg, tmp_path, stages=stages(["ort", "ort_noopt"],
                                                        kill_once=str(marker)))
    assert marker.exists()  # one evaluation actor was killed mid-campaign ...
    assert summary.worker_deaths == 1
    rows = read_results(tmp_path).to_pylist()
    tests = by_test(rows)
    # ... and no row is lost: the tests it held were re-run on its replacement
    assert sorted(tests) == list(range(40)) and len(rows) == 80
    assert all(r["error_class"] is None for r in rows)


def _node_oom_on(monkeypatch, backend: str, index: int, times: int) -> dict:
    """`ray.get` in the driver raises Ray's OutOfMemoryError (an actor killed by the node's
    memory monitor) on the first `times` calls whose results hold test `index` of `backend`
    (each time it is asked for them); returns call -> how many tests it held."""
    import ray.exceptions

    real, killed = ray.get, {}

    def get(refs, *args, **kwargs):
        value = real(refs, *args, **kwargs)
        key = id(refs) if isinstance(refs, list) else refs  # a call's result fails each time
        if key not in killed and isinstance(value, list) and len(killed) < times and any(
                isinstance(r, FakeReport) and r.rows[0]["backend"] == backend
                and index_of(r.rows[0]["test_id"]) == index for r in value):
            killed[key] = len(value)
        if key in killed:
            raise ray.exceptions.OutOfMemoryError("Task was killed due to the node running "
                                                  "low on memory.")
        return value

    monkeypatch.setattr(ray, "get", get)
    return killed


def test_an_actor_killed_for_node_memory_is_replaced_and_its_tests_rerun_unblamed(
        cluster, tmp_path, monkeypatch):
    killed = _node_oom_on(monkeypatch, "ort", 5, times=1)
    summary = run_campaign(config(budget="12", workers=1), tmp_path,
                           stages=stages(["ort", "ort_noopt"]))
    assert len(killed) == 1 and summary.worker_deaths == 1
    tests = by_test(read_results(tmp_path).to_pylist())
    assert sorted(tests) == list(range(12))
    # Ray chose that actor, not test 5: re-run alone on a fresh actor, it gets its own row
    assert {r["backend"]: r["verdict"] for r in tests[5]} == {"ort": "mismatch",
                                                              "ort_noopt": "mismatch"}
    assert all(r["error_class"] is None for rs in tests.values() for r in rs)


def test_a_test_killed_for_node_memory_again_alone_is_blamed(cluster, tmp_path, monkeypatch):
    killed = _node_oom_on(monkeypatch, "ort", 5, times=2)
    summary = run_campaign(config(budget="12", workers=1), tmp_path,
                           stages=stages(["ort", "ort_noopt"]))
    assert list(killed.values())[1] == 1 and summary.worker_deaths == 2  # then alone
    tests = by_test(read_results(tmp_path).to_pylist())
    assert sorted(tests) == list(range(12))
    row = next(r for r in tests[5] if r["backend"] == "ort")
    assert (row["verdict"], row["error_class"]) == ("crash", "NodeOutOfMemory")
    assert row["error_msg"].startswith("(re-run alone on a fresh actor) ")
    assert [r["error_class"] for rs in tests.values() for r in rs].count(None) == 2 * 12 - 1


def test_a_slow_backend_never_stalls_a_fast_one_and_rates_sample_by_seed(cluster, tmp_path,
                                                                         monkeypatch):
    names = ["fast", "slow", "sampled"]
    _patch_registry(monkeypatch, names)  # the doubles' backends are not registered backends
    cfg = config(budget="10s", workers=1, backends=names,
                 backend_options={"fast": BackendOptions(wait=True),
                                  "sampled": BackendOptions(rate=0.3, wait=True)}, queue_s=0.5)
    summary = run_campaign(cfg, tmp_path, stages=stages(names, delay={"slow": 0.5}))
    rows = read_results(tmp_path).to_pylist()
    per = {b: [r for r in rows if r["backend"] == b] for b in names}
    cut = {b: summary.backends[b]["cut_off"] for b in names}
    # the fast backend saw every test (it waits: generation keeps its pace), but those the
    # deadline cut off in its queue ...
    reported = {r["test_id"] for r in rows}
    assert len(reported) == summary.tests > 60
    assert summary.tests - len(per["fast"]) <= cut["fast"]
    assert 2 <= len(per["slow"]) <= 30  # ... the slow one what it could (0.5 s each) ...
    # every test it has no row of was skipped while it was busy (or while its actor started,
    # when it came up after testing did), or cut off at the deadline
    assert (summary.tests - len(per["slow"]) <= summary.backends["slow"]["skipped_busy"]
            + summary.backends["slow"]["skipped_starting"] + cut["slow"])
    assert summary.backends["slow"]["skipped_busy"] > 10 * len(per["slow"])
    # ... and a sampled backend exactly the tests its rate picks by seed
    seeds = {r["seed"] for r in rows}
    picked = {s for s in seeds if sampled(s, "sampled", 0.3)}
    assert {r["seed"] for r in per["sampled"]} <= picked
    assert len(picked) - len(per["sampled"]) <= cut["sampled"]
    assert 0.15 < len(picked) / len(seeds) < 0.45


def test_resume_goes_on_after_the_last_test_without_duplicate_ids(cluster, tmp_path):
    first = run_campaign(config(budget="12", workers=1), tmp_path, stages=stages(["ort", "ort_noopt"]))
    (tmp_path / "results" / ".tmp-part-x.parquet").write_bytes(b"a kill's leftover")
    second = run_campaign(config(budget="30", workers=1, resume=True), tmp_path,
                          stages=stages(["ort", "ort_noopt"]))
    assert second.run_id == first.run_id and second.resumed_at == 12 and second.tests == 18
    rows = read_results(tmp_path).to_pylist()
    keys = [(r["test_id"], r["backend"]) for r in rows]
    assert len(keys) == len(set(keys)) == 60  # no duplicates
    assert sorted(by_test(rows)) == list(range(30))
    with pytest.raises(CampaignError, match=r"campaign.resume=true: campaign.seed differs"):
        run_campaign(config(budget="40", seed=2, resume=True), tmp_path,
                     stages=stages(["ort", "ort_noopt"]))
    with pytest.raises(CampaignError, match=r"holds no campaign \(no config.yaml\)"):
        run_campaign(config(resume=True), tmp_path / "nothing", stages=stages(["ort"]))


def test_a_deadline_stops_work_in_flight_and_writes_no_partial_row(cluster, tmp_path):
    """A wall-clock budget ends the testing at its deadline (campaign/budget_plan.py), not
    after draining: calls in flight are killed and queued tests dropped; a cut-off test has no
    row for that backend (and none at all if no backend reported it)."""
    t0 = time.monotonic()
    summary = run_campaign(config(budget="10s", flush_every_s=0.2), tmp_path,
                           stages=stages(["ort", "ort_noopt"], delay={"ort_noopt": 0.4}))
    took = time.monotonic() - t0
    rows = read_results(tmp_path).to_pylist()
    assert summary.testing_deadline_s == pytest.approx(10 - 2.5 - 0.5)  # triage 25%, stop 0.5 s
    assert summary.testing_s < summary.testing_deadline_s + 1.0
    assert took < 10 * 1.1 + 15  # + this test's Ray start-up, which the budget leaves out
    # the slow backend had calls in flight and tests queued at the deadline: cut off
    assert summary.backends["ort_noopt"]["cut_off"] >= 1
    assert len(rows) == summary.rows == sum(summary.backends[b]["evaluated"] for b in
                                             ("ort", "ort_noopt"))
    assert {r["verdict"] for r in rows} <= {"pass", "mismatch"}  # no driver-made partial rows
    tests = by_test(rows)
    assert len(tests) == summary.tests
    assert all(len(rs) == len({r["backend"] for r in rs}) for rs in tests.values())


def test_actor_that_cannot_start_fails_fast(cluster, tmp_path):
    with pytest.raises(CampaignError, match=r"^actor ort(_noopt)?#\d failed to start: .*no such backend: nope"):
        run_campaign(config(), tmp_path, stages=stages(["ort", "ort_noopt"], ev=BrokenEvaluator))


def test_systematic_failure_aborts_after_the_limit(cluster, tmp_path):
    with pytest.raises(CampaignError, match=r"^5 tests in a row failed inside the actors .*"
                                            r"WorkerError: harness bug"):
        run_campaign(config(max_consecutive_worker_failures=5), tmp_path,
                     stages=stages(["ort", "ort_noopt"], gen=RaisingGenerator))
    assert read_results(tmp_path).num_rows == 10  # what was recorded is flushed


def test_more_cpus_than_the_cluster_has_fail_fast(cluster, tmp_path):
    with pytest.raises(CampaignError, match=r"need \d+ CPU in all \(9 x 1 \(campaign.generation\)"):
        run_campaign(config(workers=9), tmp_path, stages=stages(["ort", "ort_noopt"]))



def test_joining_a_cluster_needs_its_token_and_says_so(cluster, monkeypatch, tmp_path):
    from ray._raylet import AuthenticationTokenLoader

    from campaign.driver.cluster import join

    loader = AuthenticationTokenLoader.instance()
    # the driver is connected already: `_join` must refuse before it tries to connect
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("connected with a bad token"))
    try:
        monkeypatch.setenv("RAY_AUTH_TOKEN", "not-the-token")
        loader.reset_cache()
        t0 = time.monotonic()
        with pytest.raises(CampaignError, match=r"the cluster refused this driver's "
                                                r"authentication token .*: set RAY_AUTH_TOKEN"):
            join(cluster.address, None)
        monkeypatch.delenv("RAY_AUTH_TOKEN")
        monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
        loader.reset_cache()
        with pytest.raises(CampaignError, match=r"token authentication is on but this driver "
                                                r"has no token: set RAY_AUTH_TOKEN"):
            join(cluster.address, None)
        with pytest.raises(CampaignError, match=r"nothing answers at .*:1 "):
            join("127.0.0.1:1", None)
        assert time.monotonic() - t0 < 10
    finally:
        monkeypatch.undo()
        loader.reset_cache()


# ---- the core scheduler, capability routing, known bugs ----------------------------------------

def _most_at_once(trace) -> int:
    """The most calls that overlapped in time, from the doubles' trace lines."""
    events = []
    for line in trace.read_text().splitlines():
        _, t0, t1 = line.split()
        events += [(float(t0), 1), (float(t1), -1)]
    most = cur = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):
        cur += d
        most = max(most, cur)
    return most


def _patch_registry(monkeypatch, names, lacks=None):
    """The doubles' backends are not registered backends: their registry facts, and the
    config checks without the registry."""
    from campaign.budget_plan import BudgetPlan
    from campaign.config import validate

    monkeypatch.setattr(checks, "backend_targets", lambda conf: {b: "cpu" for b in names})
    monkeypatch.setattr(checks, "backend_lacks", lambda conf: lacks or {})
    monkeypatch.setattr(checks, "preflight", lambda conf: BudgetPlan.of(
        validate(conf), conf.triage.budget, conf.triage.enabled))


def test_the_scheduler_honours_shares_and_runs_no_more_calls_than_cores(cluster, tmp_path,
                                                                        monkeypatch):
    """Stand-in backends with known costs (cheap: 5 ms a test, dear: 150 ms) and generation
    (5 ms a test) on 2 cores: the calls never overlap more than 2 at once, and each stage's
    core-seconds follow its share although the cheap one could take far more."""
    names = ["cheap", "dear"]
    _patch_registry(monkeypatch, names)
    trace = tmp_path / "trace.txt"
    cfg = config(budget="16s", workers=1, backends=names, cores=2, queue_s=2.0,
                 generation=GenerationOptions(share=0.2),
                 backend_options={"cheap": BackendOptions(wait=True, share=0.2),
                                  "dear": BackendOptions(share=0.6, actors=2)})
    cfg.triage.enabled = False
    summary = run_campaign(cfg, tmp_path, stages=stages(
        names, delay={"cheap": 0.005, "dear": 0.15}, gen_delay=0.005, trace=str(trace)))
    assert _most_at_once(trace) <= 2
    core = {"generate": summary.generation["core_s"],
            **{b: summary.backends[b]["core_s"] for b in names}}
    used = sum(core.values())
    assert summary.cores == 2 and used > 0.3 * 2 * summary.testing_s  # the cores were kept busy
    # the dear backend had work all along (it skips what it cannot take): it got its share
    assert core["dear"] / used == pytest.approx(0.6, abs=0.12)
    assert summary.backends["dear"]["share"] == pytest.approx(0.6)
    assert "core-seconds on 2 cores (share):" in summary.text()


def test_a_test_holding_an_op_a_backend_lacks_is_never_sent_to_it(cluster, tmp_path,
                                                                  monkeypatch):
    """`lacky` lacks `loop`, which every odd test holds: it gets none of them (no row, counted
    as not applicable), and since it would idle, tests are made for it without a loop."""
    names = ["ort", "lacky"]
    _patch_registry(monkeypatch, names, lacks={"lacky": frozenset({"loop"})})
    cfg = config(budget="60", workers=1, backends=names,
                 backend_options={"ort": BackendOptions(wait=True),
                                  "lacky": BackendOptions(wait=True)})
    cfg.triage.enabled = False
    summary = run_campaign(cfg, tmp_path, stages=stages(names, odd_loops=True))
    rows = read_results(tmp_path).to_pylist()
    lacky = [r for r in rows if r["backend"] == "lacky"]
    ort = [r for r in rows if r["backend"] == "ort"]
    assert len(ort) == 60 and lacky
    assert all("loop" not in r["ops"] for r in lacky)
    with_loop = sum("loop" in r["ops"] for r in ort)
    assert with_loop > 0
    assert summary.backends["lacky"]["not_applicable"] == {"loop": with_loop}
    assert len(lacky) == 60 - with_loop
    made = [r for r in ort if "avoid" in r["lineage"]]
    assert len(made) == summary.backends["lacky"]["made_for"] > 0
    assert all(json.loads(r["lineage"])[0]["avoid"] == ["loop"] for r in made)
    assert "not applicable (no row; ops it lacks): lacky" in summary.text()


def test_a_known_trigger_holds_back_repeats_but_not_new_patterns(cluster, tmp_path,
                                                                 monkeypatch):
    """Every 12th test matches a known bug of `ort` (under a tenth: specific enough to hold
    back, `routing.GENERAL_SHARE`): with known_rate 0 none of them reaches ort (held back,
    counted by bucket) while ort_noopt, whose bug it is not, gets them all, and every other
    test reaches both."""
    names = ["ort", "ort_noopt"]
    _patch_registry(monkeypatch, names)
    cfg = config(budget="45", workers=1, backends=names, known_rate=0.0)
    cfg.triage.enabled = False
    summary = run_campaign(cfg, tmp_path, stages=stages(names, known_every=12,
                                                        known_for=("ort",)))
    tests = by_test(read_results(tmp_path).to_pylist())
    assert len(tests) == 45
    for i, rs in tests.items():
        expected = ["ort_noopt"] if i % 12 == 0 else ["ort", "ort_noopt"]
        assert sorted(r["backend"] for r in rs) == expected, i
    assert summary.backends["ort"]["held_known"] == {"known-bug": 4}
    assert summary.backends["ort"]["too_general"] == {}
    assert summary.backends["ort_noopt"]["held_known"] == {}
class _FullDisk:
    """`campaign.storage.write_table` on a disk that is full (ENOSPC after a partial write)
    while `full` is set, for writes under `under`."""

    def __init__(self, real, under, free_after_s=None):
        self.real, self.under, self.full, self.failed = real, str(under), True, 0
        self.free_after_s, self.first = free_after_s, None

    def __call__(self, table, path):
        import errno

        if self.first is not None and self.free_after_s is not None and (
                time.monotonic() - self.first > self.free_after_s):
            self.full = False  # someone freed space
        if self.full and str(path).startswith(self.under):
            self.first = self.first or time.monotonic()
            path.write_bytes(b"PAR1 partial")
            self.failed += 1
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        self.real(table, path)


def test_a_full_disk_pauses_generation_and_loses_no_row_when_space_comes_back(
        cluster, tmp_path, monkeypatch, caplog):
    import campaign.storage as storage

    disk = _FullDisk(storage.write_table, tmp_path, free_after_s=2.0)
    monkeypatch.setattr(storage, "write_table", disk)
    monkeypatch.setattr(storage, "RETRY_S", 0.2)
    with caplog.at_level(logging.WARNING, logger="campaign.storage"):
        summary = run_campaign(config(budget="20", flush_rows=7, flush_every_s=0.2), tmp_path,
                               stages=stages(["ort", "ort_noopt"]))
    assert disk.failed >= 2 and not summary.interrupted and summary.stopped is None
    rows = read_results(tmp_path).to_pylist()
    assert len(rows) == summary.rows == 40 and sorted(by_test(rows)) == list(range(20))
    warned = [r.getMessage() for r in caplog.records if r.name == "campaign.storage"]
    assert warned[0].startswith(f"results: cannot write to {tmp_path / 'results'} (disk full): ")
    assert "generation paused; free at least " in warned[0]
    assert any("works again" in w for w in warned)


def test_a_disk_full_too_long_stops_as_on_ctrl_c_and_resume_continues(cluster, tmp_path,
                                                                      monkeypatch):
    import campaign.storage as storage

    out = tmp_path / "out"
    disk = _FullDisk(storage.write_table, out)
    monkeypatch.setattr(storage, "write_table", disk)
    monkeypatch.setattr(storage, "SPILL_ROOT", tmp_path / "spill")
    summary = run_campaign(config(budget="40", flush_rows=7, disk_wait_s=1.0, workers=1), out,
                           stages=stages(["ort", "ort_noopt"]))
    assert summary.interrupted and summary.stopped.startswith(
        f"results could not be written to {out / 'results'} for campaign.disk_wait_s=1 s")
    assert summary.rows == 0 and summary.rows_spilled >= 14  # at least one flush's worth
    assert summary.spill_file.startswith(str(tmp_path / "spill"))
    assert read_results(out).num_rows == 0  # nothing could be written there ...
    disk.full = False  # ... space comes back: resume moves the spilled rows in and goes on
    again = run_campaign(config(budget="40", flush_rows=7, workers=1, resume=True), out,
                         stages=stages(["ort", "ort_noopt"]))
    rows = read_results(out).to_pylist()
    keys = [(r["test_id"], r["backend"]) for r in rows]
    assert len(keys) == len(set(keys)) == 80 and sorted(by_test(rows)) == list(range(40))
    assert again.resumed_at == summary.rows_spilled // 2
