"""The sandbox process: transparent for a healthy backend; a kill, hang, exit or failed start
is reported and the process replaced; leftovers (compiler subprocesses, scratch dirs, the
process itself when its parent dies) are cleaned up."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult, make_backend
from campaign.sandbox import (
    Job,
    JobMaterialized,
    Sandbox,
    SandboxConfig,
    crash_summary,
    sweep_stale_work_dirs,
)
from campaign.testcase import TestCase
from campaign.verdict import Stage, Verdict
from ir.core.text import parse
from ir.numerics.values import random_values

REPO = Path(__file__).resolve().parents[2]
GRAPH = """graph main(%x0: f32[2,3], %w1: param f32[3,4]) {
  %v2 = matmul(%x0, %w1) : f32[2,4]
  %v3 = add(%v2, %v2) : f32[2,4]
  return %v3
}"""


def _m(seed: int = 0) -> Materialized:
    g = parse(GRAPH)
    return Materialized(TestCase(f"t{seed}", seed, g, random_values(g, seed)))


class Scripted(Backend):
    """Does what `self.plan` (set before the fork, or per call via the graph seed) says."""

    def __init__(self, action: str = "ok", arg: float = 0.0):
        self.name = "scripted"
        self.action = action
        self.arg = arg

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        action = self.action if m.tc.seed == 0 else "ok"
        print(f"output of test {m.tc.test_id}", flush=True)

        def compile_():
            marks = Path(os.environ.get("SANDBOX_TEST_DIR", "/nonexistent"))
            if action == "hang_with_child":
                mark = marks / "grandchild"
                if mark.exists():  # a re-run: is the first attempt's subprocess still there?
                    (marks / "first_alive").write_text(str(_running(int(mark.read_text()))))
                child = subprocess.Popen(["sleep", "600"])
                mark.write_text(str(child.pid))
                child.wait()
            if action in ("slow_once", "slow_then_hog"):
                mark = marks / "attempted"
                if not mark.exists():  # the first attempt only
                    mark.write_text("1")
                    time.sleep(600)
                elif action == "slow_then_hog":  # the re-run hits the memory limit
                    np.ones(2**31, np.uint8)
            if action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return [np.full((2, 4), float(os.getpid()))]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


class BadInit(Scripted):
    def child_init(self, work_dir: str) -> None:
        raise RuntimeError("cannot set up")


def test_sandbox_matches_in_process_results():
    ort = make_backend("ort")
    m = _m(3)
    direct = ort.evaluate(m)
    with Sandbox(make_backend("ort")) as sb:
        boxed = sb.evaluate(m)
        assert sb.pid != os.getpid()
    assert boxed.verdict is None and not boxed.failed
    assert [o.tobytes() for o in boxed.outputs] == [o.tobytes() for o in direct.outputs]
    assert boxed.compile_ms is not None and boxed.run_ms is not None


def test_job_round_trips_and_reuses_the_parents_onnx():
    m = _m()
    job = Job.unpack(Job.of(m).pack())
    assert job.graph == m.tc.graph and job.onnx_bytes == m.onnx_bytes
    assert all(np.array_equal(job.values[k], v) for k, v in m.tc.values.items())
    jm = JobMaterialized(job)
    assert not make_backend("ort").evaluate(jm).failed
    assert "onnx_model" not in jm.__dict__  # ORT needed only the bytes: no rebuild, no parse


def test_timeout_kills_the_process_group_and_the_next_test_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("SANDBOX_TEST_DIR", str(tmp_path))
    cfg = SandboxConfig(timeout_s=1.5, confirm_timeout_factor=0)  # no confirming re-run
    with Sandbox(Scripted("hang_with_child"), cfg) as sb:
        sb.start()  # the process's start (the fork server's imports, the first time) is not timed
        t0 = time.monotonic()
        r = sb.evaluate(_m(0))
        assert time.monotonic() - t0 < 5
        assert (r.verdict, r.stage, r.error_class) == (Verdict.TIMEOUT, Stage.COMPILE, "Timeout")
        assert (r.timeout_limit_s, r.confirm_limit_s, r.timeout_confirmed) == (1.5, None, None)
        assert "subprocess.py" in r.traceback  # faulthandler's dump of where it hung
        grandchild = int((tmp_path / "grandchild").read_text())
        time.sleep(0.2)
        assert not Path(f"/proc/{grandchild}").exists() or \
            Path(f"/proc/{grandchild}/stat").read_text().split()[2] == "Z"
        ok = sb.evaluate(_m(1))
        assert not ok.failed and ok.verdict is None
        assert sb.stats.processes == 2 and sb.stats.timeouts == 1


def test_a_timeout_is_confirmed_alone_in_a_fresh_process_with_a_larger_limit(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("SANDBOX_TEST_DIR", str(tmp_path))
    cfg = SandboxConfig(timeout_s=1.0, confirm_timeout_factor=2.0)
    with Sandbox(Scripted("hang_with_child"), cfg) as sb:
        t0 = time.monotonic()
        r = sb.evaluate(_m(0))
        assert time.monotonic() - t0 < 8
        assert (r.verdict, r.stage, r.error_class) == (Verdict.TIMEOUT, Stage.COMPILE, "Timeout")
        assert r.timeout_confirmed is True
        assert (r.timeout_limit_s, r.confirm_limit_s) == (1.0, 2.0) and 2.0 <= r.confirm_s < 4
        assert r.error_msg.startswith("confirmed: the first attempt ran past 1 s, a re-run in "
                                      "a fresh process past 2 s; no result within 2 s")
        # the re-run did not compete with its first attempt: that one's subprocess was gone
        assert (tmp_path / "first_alive").read_text() == "False"
        assert (sb.stats.processes, sb.stats.timeouts) == (2, 2)
        assert (sb.stats.confirmations, sb.stats.confirmed) == (1, 1)
        ok = sb.evaluate(_m(1))
        assert ok.verdict is None and not ok.failed and ok.timeout_limit_s is None


@pytest.mark.parametrize("action", ["slow_once", "slow_then_hog"])
def test_a_test_slow_only_once_gets_the_verdict_of_its_re_run(tmp_path, monkeypatch, action):
    """The first attempt runs past the limit (as a compile may under load), the re-run in a
    fresh process finishes: its result stands, marked as an unconfirmed timeout; the re-run's
    process keeps the memory limit (an allocation past it is a MemoryError crash)."""
    monkeypatch.setenv("SANDBOX_TEST_DIR", str(tmp_path))
    cfg = SandboxConfig(timeout_s=1.0, confirm_timeout_factor=3.0, memory_limit_mb=512)
    with Sandbox(Scripted(action), cfg) as sb:
        r = sb.evaluate(_m(0))
        assert r.timeout_confirmed is False and r.verdict is None
        assert (r.timeout_limit_s, r.confirm_limit_s) == (1.0, 3.0) and r.confirm_s < 3.0
        if action == "slow_once":
            assert not r.failed and r.outputs[0].shape == (2, 4)
        else:
            assert (r.stage, r.error_class) == (Stage.COMPILE, "MemoryError")
        assert (sb.stats.confirmations, sb.stats.confirmed, sb.stats.processes) == (1, 0, 2)


def test_death_report_has_stage_signal_and_only_this_tests_output():
    with Sandbox(Scripted("kill")) as sb:
        assert not sb.evaluate(_m(1)).failed  # prints "output of test t1"
        r = sb.evaluate(_m(0))
        assert (r.verdict, r.stage, r.error_class) == (Verdict.SIGNAL, Stage.COMPILE, "SIGKILL")
        assert "output of test t0" in r.error_msg and "t1" not in r.error_msg


def test_process_killed_while_idle_is_replaced_transparently():
    with Sandbox(Scripted()) as sb:
        first = sb.evaluate(_m(1))
        os.kill(sb.pid, signal.SIGKILL)
        time.sleep(0.1)
        second = sb.evaluate(_m(2))
        assert not second.failed and second.outputs[0][0, 0] != first.outputs[0][0, 0]
        assert sb.stats.processes == 2


def test_recycled_after_max_tests():
    with Sandbox(Scripted(), SandboxConfig(max_tests_per_process=2)) as sb:
        pids = {int(sb.evaluate(_m(i)).outputs[0][0, 0]) for i in range(1, 6)}
        assert len(pids) == 3 and sb.stats.recycled == 2


def test_failed_start_is_our_problem_not_a_finding():
    with Sandbox(BadInit()) as sb:
        r = sb.evaluate(_m(1))
        assert (r.verdict, r.error_class) == (Verdict.INVALID, "SandboxError")
        assert "cannot set up" in r.error_msg
        assert sb.evaluate(_m(2)).verdict is Verdict.INVALID  # and again, without hanging


def test_close_removes_process_and_scratch_dir():
    sb = Sandbox(Scripted())
    sb.evaluate(_m(1))
    pid, work_dir = sb.pid, sb._work_dir
    assert os.path.isdir(work_dir)
    sb.close()
    assert not os.path.exists(work_dir)
    assert not Path(f"/proc/{pid}").exists()


def test_sandbox_process_dies_with_its_parent(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from campaign.backends import make_backend
        from campaign.sandbox import Sandbox
        sb = Sandbox(make_backend("ort"))
        sb.start()
        print(sb.pid, sb._work_dir, flush=True)
        os._exit(0)  # no cleanup: only PR_SET_PDEATHSIG can stop the child now
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    child, work_dir = int(out.stdout.split()[0]), out.stdout.split()[1]
    for _ in range(50):
        if not Path(f"/proc/{child}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists()
    # its scratch dir outlived both; the next sandbox to start in any process sweeps it
    assert os.path.isdir(work_dir)
    assert sweep_stale_work_dirs() >= 1 and not os.path.exists(work_dir)


@pytest.mark.parametrize("text, summary", [
    ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc",
     "std::bad_alloc"),
    ("noise\nCheck failed: x == y: bad shape\nmore", "Check failed: x == y: bad shape"),
    ("Fatal Python error: Segmentation fault\n\nStack...", None),
])
def test_crash_summary_picks_the_informative_line(text, summary):
    assert crash_summary(text) == summary


class TrainsInChild(Backend):
    """Compiles a function with AOT autograd and runs its backward: what every gradient test
    of a torch backend does in its sandbox process."""

    PRELOAD = ("torch",)

    def __init__(self) -> None:
        self.name = "trains_in_child"

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        import torch

        def train() -> list[np.ndarray]:
            f = torch.compile(lambda x: torch.sin(x) * 2, backend="aot_eager", fullgraph=True)
            x = torch.ones(3, requires_grad=True)
            f(x).sum().backward()
            return [x.grad.numpy(), np.array([os.getppid()])]

        return self.stage(Stage.COMPILE, train, result, "compile_ms")


def test_a_caller_that_traced_a_training_graph_still_gets_sound_training_processes():
    """torch from 2.14 refuses autograd in a child forked after AOT autograd traced a training
    graph in its parent ("Unable to handle autograd's threading in combination with fork-based
    multiprocessing"): the sandbox process comes from the fork server, never from its caller,
    which here does just that first (as a pytest process or the triage does)."""
    import torch

    f = torch.compile(lambda x: torch.cos(x) * 3, backend="aot_eager", fullgraph=True)
    x = torch.ones(4, requires_grad=True)
    f(x).sum().backward()
    with Sandbox(TrainsInChild()) as sb:
        r = sb.evaluate(_m(1))
        assert not r.failed and r.error_msg is None, r.error_msg
        grad, ppid = r.outputs
        np.testing.assert_allclose(grad, 2 * np.cos(np.ones(3, np.float32)), rtol=1e-6)
        assert int(ppid[0]) not in (os.getpid(), 1)  # forked by the fork server, not by us


def test_the_sandbox_process_gets_the_callers_environment_of_its_start(monkeypatch):
    """The fork server's environment is the one of its own start; a sandbox process gets its
    caller's as it is when the process starts (tests and workers set variables late)."""
    with Sandbox(Scripted()) as sb:
        sb.start()  # the fork server runs from here on
    monkeypatch.setenv("DYNSMITH_LATE_VARIABLE", "late")
    with Sandbox(EnvReader()) as sb:
        r = sb.evaluate(_m(1))
    assert not r.failed, r.error_msg
    assert r.outputs[0].tobytes() == b"late"


class EnvReader(Backend):
    def __init__(self) -> None:
        self.name = "env_reader"

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        value = os.environ.get("DYNSMITH_LATE_VARIABLE", "unset").encode()
        return [np.frombuffer(value, np.uint8)]


def test_an_unknown_start_method_is_refused_by_name():
    with pytest.raises(ValueError) as e:
        SandboxConfig(start_method="spawn")
    assert str(e.value) == "start_method: 'spawn' is not one of forkserver, fork"
