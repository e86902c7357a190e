"""Backends written to misbehave (segfault, abort, OOM kill, exit, hang, memory hog, wrong
answer, known gap, missing GPU), loaded by dotted path into one FuzzWorker: every case becomes
the right verdict with the right stage, the worker goes on, and no row is lost."""
from __future__ import annotations

import json

import pytest

from campaign.sandbox import SandboxConfig
from campaign.testcase import TestCase
from campaign.worker import FuzzWorker, WorkerConfig
from ir.core.text import parse
from ir.numerics.values import random_values

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


# ---- hostile compilers: processes, damage, floods ----------------------------------------------

#: backend spec -> (verdict, error_class, leaked_procs, damage note (a substring; None: none))
HOSTILE = {
    "ort": ("pass", None, 0, None),
    "misbehaving:Orphan?how=child": ("pass", None, 1, "left 1 process running (killed)"),
    "misbehaving:Orphan?how=daemon": ("pass", None, 1, "left 1 process running (killed)"),
    "misbehaving:Orphan?then=segv": ("signal", "SIGSEGV", 1, None),
    "misbehaving:Orphan?then=hang": ("timeout", "Timeout", 1, None),
    "misbehaving:ClosedFds": ("crash", "ProcessDamaged", 0,
                              "left its process unusable: fd 1 closed, fd 2 closed"),
    "misbehaving:ChangedCwd": ("pass", None, 0, "working directory deleted (changed back)"),
    "misbehaving:ChangedCwd?delete=false": ("pass", None, 0,
                                            "working directory changed to '/tmp/misbehaving-cwd-"),
    "misbehaving:Meddler?what=signals": (
        "pass", None, 0, "signal handlers of SIGTERM, SIGSEGV replaced (put back)"),
    "misbehaving:Meddler?what=stdout": ("pass", None, 0, "sys.stdout replaced (put back)"),
    "misbehaving:Meddler?what=env": (
        "pass", None, 0, "environment variables HOME, MEDDLER_WAS_HERE changed (restored)"),
    "misbehaving:Meddler?what=thread": (
        "pass", None, 0, "left 1 thread running (meddler; process replaced)"),
    "misbehaving:IgnoreTermHang": ("timeout", "Timeout", 0, None),
    "misbehaving:Flood?mb=20": ("pass", None, 0, None),
    "misbehaving:MemoryHog?max_mb=3072": ("crash", "MemoryError", 0, None),
}


def _ours(owner: int) -> list[int]:
    """Living processes that sandboxes of process `owner` started (their mark names it)."""
    from campaign import proctree

    return [p for p in proctree.marked("") if proctree._owner_of(p) == owner]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    import os

    pids = tmp_path_factory.mktemp("pids")
    os.environ["MISBEHAVING_PIDS"] = str(pids)
    cfg = WorkerConfig(backends=list(HOSTILE),
                       limits=SandboxConfig(timeout_s=3.0, memory_limit_mb=512,
                                            confirm_timeout_factor=1.0))
    w = FuzzWorker(cfg, "w-hostile")
    yield w, pids
    w.close()


#: rounds of hostile tests on one worker (each a fresh process for a backend that damaged its own)
ROUNDS = 2


@pytest.mark.parametrize("round_", list(range(ROUNDS)))
def test_hostile_compilers_get_their_verdict_leave_nothing_and_the_worker_goes_on(hostile,
                                                                                  round_):
    import os

    w, pids = hostile
    report = w.run_case(_case(round_))
    rows = {r["backend"]: r for r in report.rows}
    assert list(rows) == list(HOSTILE)  # one row per backend: nothing lost
    for spec, (verdict, error_class, leaked, note) in HOSTILE.items():
        row = rows[spec]
        assert (row["verdict"], row["error_class"]) == (verdict, error_class), (spec, row)
        assert row["leaked_procs"] == leaked, (spec, row["damage"])
        if note is None:
            assert row["damage"] is None, (spec, row["damage"])
        else:
            assert note in row["damage"], (spec, row["damage"])
    assert rows["misbehaving:ClosedFds"]["error_msg"] == (
        "left its process unusable: fd 1 closed, fd 2 closed")
    # between tests, nothing the compilers started is left; the sandbox processes themselves are
    alive = _ours(os.getpid())
    assert {p for p in alive} <= {sb.pid for sb in w.sandboxes.values() if sb.alive}
    for f in pids.iterdir():  # every orphan noted is dead (or a zombie being reaped)
        from campaign import proctree

        assert not proctree.alive(int(f.read_text().strip())), f.name


def test_damaged_processes_were_replaced_and_repaired_ones_kept(hostile):
    import os

    w, _ = hostile
    st = {spec: sb.stats for spec, sb in w.sandboxes.items()}
    assert st["misbehaving:ClosedFds"].replaced == ROUNDS  # one per round
    assert st["misbehaving:Meddler?what=thread"].replaced == ROUNDS
    for spec in ("misbehaving:ChangedCwd", "misbehaving:Meddler?what=signals",
                 "misbehaving:Meddler?what=stdout", "misbehaving:Meddler?what=env",
                 "misbehaving:Orphan?how=daemon", "misbehaving:Flood?mb=20", "ort"):
        assert st[spec].processes == 1, spec  # repaired in place: no restart
    w.close()
    assert _ours(os.getpid()) == []  # closed: no process of ours is left


def test_a_damage_no_check_sees_is_blamed_on_the_test_that_left_it():
    """PoisonHarness breaks pickle.loads in its process: the next test fails in our code there,
    is re-run in a fresh process and passes; the earlier test gets a crash finding."""
    cfg = WorkerConfig(backends=["misbehaving:PoisonHarness"],
                       limits=SandboxConfig(timeout_s=10.0, memory_limit_mb=512))
    with FuzzWorker(cfg, "w-poison") as w:
        first = w.run_case(_case(0))
        second = w.run_case(_case(1))
        sb = w.sandboxes["misbehaving:PoisonHarness"]
        assert (sb.stats.harness_reruns, sb.stats.processes) == (1, 2)
    assert first.rows[0]["verdict"] == "pass" and first.findings == []
    row = second.rows[0]
    assert row["verdict"] == "pass"
    assert row["damage"] == ("test t-0 left the process unusable (sandbox could not read the "
                             "job: [Errno 9] Bad file descriptor); this test was re-run in a "
                             "fresh process")
    [blamed] = second.findings
    assert (blamed.test_id, blamed.verdict, blamed.error_sig) == (
        "t-0", "crash", "ProcessDamaged: left its process unusable")
    info = json.loads(blamed.files["info.json"])
    assert info["error_msg"] == ("left its process unusable: the next test hit a harness error "
                                 "there (sandbox could not read the job: [Errno 9] Bad file "
                                 "descriptor)")
    assert "graph.gir" in blamed.files


def test_a_campaign_of_hostile_backends_goes_on_loses_no_row_and_leaves_no_process(tmp_path):
    """The real CLI, the misbehaving backends loaded by dotted path in their Ray actors."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from campaign import proctree
    from campaign.storage import read_results

    repo = Path(__file__).resolve().parents[3]
    pids = tmp_path / "pids"
    pids.mkdir()
    out = tmp_path / "run"
    specs = ["ort", "misbehaving:Orphan?how=daemon", "misbehaving:Orphan?then=segv",
             "misbehaving:ClosedFds", "misbehaving:Flood?mb=20"]
    env = {**os.environ, "MISBEHAVING_PIDS": str(pids),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(repo)])}
    proc = subprocess.run(
        [sys.executable, "run.py", "campaign=smoke", "campaign.backends=[" + ",".join(f"'{s}'" for s in specs) + "]",
         "campaign.budget=6", "campaign.workers=1", "mutation.rate=0",
         "campaign.queue_s=1000",  # room for every test in each backend's queue: no skip
         "campaign.sandbox_timeout_s=20", "campaign.test_timeout_s=120",
         f"output.dir={out}", "ray.temp_dir=/tmp/dsray-hostile", "triage.enabled=false"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_results(out).to_pylist()
    assert len(rows) == 6 * len(specs)  # every test, every backend: nothing lost
    got = {(r["backend"], r["verdict"], r["leaked_procs"]) for r in rows}
    assert got == {("ort", "pass", 0), ("misbehaving:Orphan?how=daemon", "pass", 1),
                   ("misbehaving:Orphan?then=segv", "signal", 1),
                   ("misbehaving:ClosedFds", "crash", 0), ("misbehaving:Flood?mb=20", "pass", 0)}
    run_id = rows[0]["run_id"]
    assert proctree.marked(f"{run_id}:") == []  # nothing any sandbox started is left
    noted = [int(f.read_text()) for f in pids.iterdir()]
    assert len(noted) == 12 and not any(proctree.alive(p) for p in noted)
