"""The driver's fault handling, with a fake worker (a test double of FuzzWorker) that crashes,
exits, hangs or raises on chosen tests: every test still gets one row per backend, the failing
one is blamed, the others queued behind it are re-run, and the campaign goes on."""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pytest
import ray.cloudpickle

import campaign.driver
from campaign.config import CampaignConfig, Config, RayConfig
from campaign.driver import CampaignError, run_campaign
from campaign.storage import read_results
from campaign.verdict import Verdict

# Ray workers cannot import this test module by name: ship the fake worker's code by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: test index -> what the fake worker does on it
ACTIONS = {3: "segfault", 7: "exit", 9: "raise", 12: "hang"}


@dataclass
class FakeWorkerConfig:
    """WorkerConfig's fields. The real one lives in campaign.worker, which imports torch: every
    fake actor would then spend ~6 s importing it on 2 cores."""

    generator: object
    backends: list
    mutation: object


@pytest.fixture(autouse=True)
def light_worker_config(monkeypatch):
    monkeypatch.setattr(campaign.driver, "WorkerConfig", FakeWorkerConfig)


@dataclass
class FakeFinding:
    test_id: str
    backend: str
    verdict: str
    error_sig: str
    files: dict = field(default_factory=dict)


@dataclass
class FakeReport:
    rows: list
    findings: list


class FakeWorker:
    """FuzzWorker's interface; misbehaves on the indices in ACTIONS, finds a mismatch on every
    5th test, passes the rest."""

    def __init__(self, cfg, name: str):
        self.backends = list(cfg.backends)
        self.name = name

    def run(self, test_id: str, seed: int) -> FakeReport:
        index = int(test_id.rsplit("-", 1)[1])
        action = ACTIONS.get(index)
        if action == "segfault":
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGSEGV)
        elif action == "exit":
            os._exit(1)
        elif action == "raise":
            raise RuntimeError("fake worker bug")
        elif action == "hang":
            time.sleep(3600)
        return self.report(test_id, seed, "mismatch" if index % 5 == 0 else "pass")

    def report(self, test_id: str, seed: int, verdict: str) -> FakeReport:
        rows = [{
            "test_id": test_id, "seed": seed, "lineage": "[]", "mutators": [], "graph_hash": "h",
            "n_insts": 1, "n_inputs": 1, "n_params": 0, "max_depth": 1, "n_if": 1,
            "n_loop": 0, "n_scan": 0, "n_rnn": 0, "n_input_sets": 2, "branch_coverage": 1.0, "trip_counts": [], "ops": ["add"],
            "dtypes": ["f32"], "dialect": "eager", "backend": b, "target": "cpu",
            "verdict": verdict, "gen_ms": 0.1, "host": "fakehost", "worker": self.name,
            "ts": datetime.now(timezone.utc),
        } for b in self.backends]
        findings = [FakeFinding(test_id, b, verdict, "Mismatch: output N", {"info.json": b"{}"})
                    for b in self.backends if verdict != "pass"]
        return FakeReport(rows, findings)


class PassingWorker(FakeWorker):
    def run(self, test_id: str, seed: int) -> FakeReport:
        return self.report(test_id, seed, "pass")


class BrokenInitWorker(FakeWorker):
    def __init__(self, cfg, name: str):
        raise ValueError("no such backend: nope")


class AlwaysRaisingWorker(FakeWorker):
    def run(self, test_id: str, seed: int):
        raise RuntimeError("harness bug")


def _config(**campaign) -> Config:
    base = dict(name="t", budget="20", workers=2, backends=["ort", "ort_noopt"], seed=1,
                in_flight_per_worker=2, flush_rows=7, flush_every_s=60.0,
                max_findings_per_signature=1, test_timeout_s=2.0)
    return Config(campaign=CampaignConfig(**{**base, **campaign}), ray=RayConfig(start_timeout_s=60))


def test_crashes_exits_hangs_and_raises_lose_no_rows(ray_cluster, tmp_path, capsys):
    summary = run_campaign(_config(), tmp_path, worker_cls=FakeWorker)

    rows = read_results(tmp_path).to_pylist()
    assert len(rows) == 20 * 2 == summary.rows
    assert summary.tests == 20 and not summary.interrupted
    by_test: dict[int, list[dict]] = {}
    for r in rows:
        by_test.setdefault(int(r["test_id"].rsplit("-", 1)[1]), []).append(r)
    assert sorted(by_test) == list(range(20))
    assert all(sorted(r["backend"] for r in rs) == ["ort", "ort_noopt"] for rs in by_test.values())
    assert {r["verdict"] for r in rows} <= {v.value for v in Verdict}

    def only(i: int) -> tuple:
        (v, s, c), = {(r["verdict"], r["stage"], r["error_class"]) for r in by_test[i]}
        return v, s, c

    assert only(3) == ("crash", "unknown", "WorkerDied")
    assert only(7) == ("crash", "unknown", "WorkerDied")
    assert only(9) == ("invalid", "unknown", "WorkerError")
    assert only(12) == ("timeout", "unknown", "WorkerTimeout")
    blamed = {i for i, rs in by_test.items() if rs[0]["error_class"] is not None}
    assert blamed == {3, 7, 9, 12}  # the tests queued behind a dying one were re-run, not blamed
    # a death with two calls in flight re-runs both alone first, so 3 and 7 may each kill 2 actors
    assert 2 <= summary.worker_deaths <= 4
    assert summary.worker_timeouts == 1 and summary.worker_errors == 1
    assert "fake worker bug" in by_test[9][0]["error_msg"]
    assert all(r["target"] == "cpu" and r["campaign"] == "t" for r in rows)

    # mismatches on 0, 5, 10, 15 (x2 backends) plus 4 worker failures: all counted; one folder
    # per (backend, verdict, signature): 2 mismatch + WorkerDied + WorkerError + WorkerTimeout
    assert summary.findings == 12 and summary.finding_folders == 5
    with_dir = [r for r in rows if r["finding_dir"]]
    assert len(with_dir) == 5
    assert all((tmp_path / r["finding_dir"] / "info.json").is_file() for r in with_dir)
    died = [r for r in with_dir if r["error_class"] == "WorkerDied"]
    assert len(died) == 1 and died[0]["backend"] == "ort"
    info = json.loads((tmp_path / died[0]["finding_dir"] / "info.json").read_text())
    assert info["seed"] == died[0]["seed"] and info["test_id"] == died[0]["test_id"]
    assert summary.verdicts["ort"] == {"pass": 12, "mismatch": 4, "crash": 2, "invalid": 1,
                                       "timeout": 1}
    assert (tmp_path / "summary.json").is_file() and (tmp_path / "config.yaml").is_file()
    out = capsys.readouterr().out
    assert "backend" in out and "mismatch" in out and str(tmp_path / "results") in out


def test_time_budget_stops_and_drains(ray_cluster, tmp_path):
    summary = run_campaign(_config(budget="1s", flush_every_s=0.2), tmp_path,
                           worker_cls=PassingWorker)
    rows = read_results(tmp_path)
    assert summary.tests > 0 and rows.num_rows == 2 * summary.tests
    assert set(rows.column("verdict").to_pylist()) == {"pass"}
    assert summary.elapsed_s < 10


def test_worker_that_cannot_start_fails_fast(ray_cluster, tmp_path):
    with pytest.raises(CampaignError, match="a worker failed to start: .*no such backend: nope"):
        run_campaign(_config(), tmp_path, worker_cls=BrokenInitWorker)


def test_systematic_worker_failure_aborts_after_the_limit(ray_cluster, tmp_path):
    with pytest.raises(CampaignError, match=r"^5 tests in a row failed inside the worker .*"
                                            r"WorkerError: RuntimeError: harness bug"):
        run_campaign(_config(max_consecutive_worker_failures=5), tmp_path,
                     worker_cls=AlwaysRaisingWorker)
    assert read_results(tmp_path).num_rows == 10  # what was recorded is flushed


def test_too_many_workers_for_the_cluster_fails_fast(ray_cluster, tmp_path):
    with pytest.raises(CampaignError, match=r"campaign.workers=5 needs 5 CPUs .* has 2;"):
        run_campaign(_config(workers=5), tmp_path, worker_cls=FakeWorker)


def test_gpus_the_cluster_lacks_fail_fast(ray_cluster, tmp_path):
    cfg = _config()
    cfg.ray.gpus_per_worker = 1.0
    with pytest.raises(CampaignError, match=r"ray.gpus_per_worker=1 needs 2 GPUs .* has 0 "):
        run_campaign(cfg, tmp_path, worker_cls=FakeWorker)
