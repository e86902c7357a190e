"""Backends written to misbehave (segfault, abort, OOM kill, exit, hang, memory hog, wrong
answer, known gap, missing GPU), loaded by dotted path into one FuzzWorker: every case becomes
the right verdict with the right stage, the worker goes on, and no row is lost."""
from __future__ import annotations

import json

import pytest

from campaign.sandbox import SandboxConfig
from campaign.testcase import TestCase
from campaign.worker import FuzzWorker, WorkerConfig
from ir.text import parse
from ir.values import random_values

GRAPH = """graph main(%x0: f32[2,3], %w1: param f32[3,4]) {
  %v2 = matmul(%x0, %w1) : f32[2,4]
  %v3 = relu(%v2) : f32[2,4]
  %v4 = add(%v3, %v3) : f32[2,4]
  return %v4, %v2
}"""

#: backend spec -> (verdict, stage, error_class)
EXPECTED = {
    "ort": ("pass", None, None),
    "misbehaving:Segfault": ("signal", "compile", "SIGSEGV"),
    "misbehaving:SegfaultKill?stage=import": ("signal", "import", "SIGSEGV"),
    "misbehaving:Abort?stage=run": ("signal", "run", "SIGABRT"),
    "misbehaving:OomKill?stage=compile": ("signal", "compile", "SIGKILL"),
    "misbehaving:Exit?stage=run": ("crash", "run", "ProcessExit"),
    "misbehaving:Raise": ("crash", "compile", "RuntimeError"),
    "misbehaving:Hang?seconds=600": ("timeout", "compile", "Timeout"),
    "misbehaving:MemoryHog?max_mb=3072": ("crash", "run", "MemoryError"),
    "misbehaving:WrongAnswer?op=add": ("mismatch", "compare", "Mismatch"),
    "misbehaving:KnownGap": ("unsupported", "import", "NotImplementedError"),
    "misbehaving:NeedsGpu": ("skipped", None, "Unavailable"),
    "misbehaving.make_segfault_at_run": ("signal", "run", "SIGSEGV"),
}


@pytest.fixture(scope="module")
def worker():
    # slack for a loaded machine; a hang is confirmed by one re-run with the same limit
    cfg = WorkerConfig(backends=list(EXPECTED),
                       limits=SandboxConfig(timeout_s=6.0, memory_limit_mb=512,
                                            confirm_timeout_factor=1.0))
    w = FuzzWorker(cfg, "w-test")
    yield w
    w.close()


def _case(i: int) -> TestCase:
    g = parse(GRAPH)
    return TestCase(f"t-{i}", i, g, random_values(g, i), [{"seed": i}])


@pytest.mark.parametrize("round_", [0, 1])
def test_every_misbehaviour_gets_its_verdict_and_the_worker_goes_on(worker, round_):
    report = worker.run_case(_case(round_))
    rows = {r["backend"]: r for r in report.rows}
    assert list(rows) == list(EXPECTED)  # one row per backend, in order: nothing lost
    for spec, (verdict, stage, error_class) in EXPECTED.items():
        row = rows[spec]
        got = (row["verdict"], row["stage"], row["error_class"])
        assert got == (verdict, stage, error_class), (spec, row["error_msg"])
        assert row["test_id"] == f"t-{round_}"
    # the wrong answer is on output 0 (add), by exactly 1, and the shadow confirms it
    wrong = rows["misbehaving:WrongAnswer?op=add"]
    assert wrong["mismatch_output"] == 0 and wrong["max_abs_err"] == pytest.approx(1.0)
    assert "float64 shadow confirms" in wrong["error_msg"]
    assert "GPU" in rows["misbehaving:NeedsGpu"]["error_msg"]
    assert rows["misbehaving:Raise"]["error_sig"].startswith(
        "RuntimeError: backend failed at <addr> on tensor of shape [N, N]")
    assert rows["misbehaving:Segfault"]["error_sig"].startswith("SIGSEGV: SIGSEGV during compile")
    hang = rows["misbehaving:Hang?seconds=600"]
    assert hang["error_sig"].startswith("Timeout: during compile")
    assert hang["timeout_confirmed"] is True  # it ran out twice, the second time alone
    assert (hang["timeout_limit_s"], hang["confirm_limit_s"]) == (6.0, 6.0)
    assert all(r["timeout_confirmed"] is None for s, r in rows.items() if r is not hang)
    # a finding per non-pass, non-skipped row, with its artifacts
    found = {f.backend: f for f in report.findings}
    assert set(found) == {s for s, (v, _, _) in EXPECTED.items() if v not in ("pass", "skipped")}
    info = json.loads(found["misbehaving:Segfault"].files["info.json"])
    assert info["verdict"] == "signal" and info["stage"] == "compile"
    assert "graph.gir" in found["misbehaving:WrongAnswer?op=add"].files


def test_dead_processes_were_replaced_and_healthy_ones_kept(worker):
    # after the two rounds above: killers restarted once per test, the hanger twice, ort never
    sb = worker.sandboxes
    assert sb["ort"].stats.processes == 1 and sb["ort"].stats.tests == 2
    assert sb["misbehaving:Segfault"].stats.processes == 2
    assert sb["misbehaving:Segfault"].stats.deaths == 2
    hang = sb["misbehaving:Hang?seconds=600"].stats  # each test timed out, then its re-run
    assert (hang.timeouts, hang.confirmations, hang.confirmed) == (4, 2, 2)
    assert sb["misbehaving:Raise"].stats.processes == 1  # an exception does not kill it
