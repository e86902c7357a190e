"""The real CLI (Hydra + Ray + the real stages on onnxruntime) interrupted, killed and resumed,
and a Hydra multirun sweep read back as one dataset."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from campaign.ids import index_of
from campaign.schema import RESULT_SCHEMA
from campaign.storage import read_results, read_sweep, sweep_files

REPO = Path(__file__).resolve().parents[2]
#: the smoke preset (ORT alone), one generation and one ORT actor; flushes every half second
COMMON = ["campaign=smoke", "campaign.workers=1", "ray.temp_dir=/tmp/dsray-cli",
          "campaign.flush_every_s=0.5"]


def _start(*args: str, sigint: object = signal.SIG_DFL) -> subprocess.Popen:
    # its own process group, as a shell job: signals go to the driver and the cluster it started.
    # SIGINT as a terminal's foreground job has it (default), whatever this pytest inherited: a
    # test run started with `&` by a script would otherwise pass SIG_IGN on: Ctrl-C ignored
    return subprocess.Popen([sys.executable, "run.py", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def _finish(p: subprocess.Popen, timeout: float) -> str:
    """Its output once it exits; killed (its whole group) and failed when it does not in time."""
    try:
        return p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError(
            f"still running after {timeout} s:\n{p.communicate()[0][-3000:]}") from None


def _files(out: Path) -> list[Path]:
    d = out / "results"
    return sorted(d.glob("part-*.parquet")) if d.is_dir() else []


def _wait_for_files(p: subprocess.Popen, out: Path, more_than: int, timeout: float = 200) -> None:
    t0 = time.monotonic()
    while len(_files(out)) <= more_than:
        assert p.poll() is None, p.communicate()[0][-3000:]
        assert time.monotonic() - t0 < timeout, "no results written"
        time.sleep(0.2)


@pytest.mark.slow  # 40 s; resume alone: test_driver's test_resume_goes_on_after_the_last_test
def test_ctrl_c_then_kill_9_then_resume_loses_nothing_flushed_and_repeats_no_test(tmp_path):
    out = tmp_path / "run"
    args = [*COMMON, f"output.dir={out}"]

    # Ctrl-C (SIGINT to the whole process group, as a terminal sends it): flush, summary, 130
    p = _start("campaign.budget=1000000", *args)
    _wait_for_files(p, out, 0)
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGINT)
    text = _finish(p, 120)
    assert p.returncode == 130, text[-3000:]
    assert "(interrupted)" in text and "results:" in text
    summary = json.loads((out / "summary.json").read_text())
    first = read_results(out)
    assert summary["interrupted"] and summary["signal"] == "SIGINT" and first.num_rows == summary["rows"] == summary["tests"] > 0

    # resumed, then the driver (and the local cluster it started) killed with -9
    p = _start("campaign.budget=1000000", "campaign.resume=true", *args)
    _wait_for_files(p, out, len(_files(out)))
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGKILL)
    killed_at = time.time()
    _finish(p, 60)
    second = read_results(out)
    assert second.num_rows > first.num_rows
    # what it had flushed is all there; the newest file is about one flush interval old
    assert killed_at - max(f.stat().st_mtime for f in _files(out)) < 5.0

    # resumed to a test budget: it goes on after the last test recorded and stops there
    last = max(index_of(t) for t in second.column("test_id").to_pylist())
    p = _start(f"campaign.budget={last + 21}", "campaign.resume=true", *args)
    text = _finish(p, 300)
    assert p.returncode == 0, text[-3000:]
    assert f"resumed at test {last + 1}" in text
    rows = read_results(out).to_pylist()
    ids = [r["test_id"] for r in rows]
    assert len(ids) == len(set(ids))  # one backend: one row per test, no test id twice
    assert len({r["run_id"] for r in rows}) == 1
    assert sorted(index_of(t) for t in ids)[-20:] == list(range(last + 1, last + 21))


def test_sigterm_stops_as_ctrl_c_does_and_is_the_way_when_ctrl_c_is_ignored(tmp_path):
    out = tmp_path / "run"
    # started as `cmd &` in a script starts it: SIGINT ignored, which it keeps
    p = _start("campaign.budget=1000000", *COMMON, f"output.dir={out}", sigint=signal.SIG_IGN)
    _wait_for_files(p, out, 0)
    os.killpg(p.pid, signal.SIGINT)
    time.sleep(3.0)
    assert p.poll() is None
    os.kill(p.pid, signal.SIGTERM)  # `kill PID`
    text = _finish(p, 120)
    assert p.returncode == 143, text[-3000:]
    assert "Ctrl-C (SIGINT) is ignored in this process" in text
    assert "(interrupted by SIGTERM)" in text and "results:" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["signal"] == "SIGTERM"
    assert read_results(out).num_rows == summary["rows"] == summary["tests"] > 0


@pytest.mark.slow  # 21 s: two campaigns through Hydra's multirun
def test_multirun_sweep_writes_one_dataset_per_campaign_read_as_one(tmp_path):
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, "run.py", "-m", "campaign=smoke,cpu_ort", "campaign.budget=6",
         *COMMON[1:], f"hydra.sweep.dir={sweep}"],
        cwd=REPO, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = sweep_files(sweep)
    assert {Path(f).parts[-3] for f in files} == {"0", "1"}  # one dataset per job
    assert all(pq.read_schema(f).equals(RESULT_SCHEMA) for f in files)
    table = read_sweep(sweep)
    assert table.num_rows == 12
    counts = table.group_by("campaign").aggregate([("test_id", "count_distinct")]).to_pylist()
    assert sorted((c["campaign"], c["test_id_count_distinct"]) for c in counts) == [
        ("cpu_ort", 6), ("smoke", 6)]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_an_output_dir_that_cannot_be_made_is_one_line(tmp_path):
    proc = _cli("output.dir=/proc/nope", f"hydra.run.dir={tmp_path / 'h'}")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: output.dir: cannot create '/proc/nope': No such file or directory"]


def test_a_backend_spec_error_names_the_spec_after_overriding_backends(tmp_path):
    # cpu_ort's options for ort are dropped with ort: the spec's own error is what is said
    proc = _cli("campaign=cpu_ort", "campaign.backends=['tvm?opt_levl=3']",
                f"hydra.run.dir={tmp_path / 'h'}")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: campaign.backends: backend 'tvm?opt_levl=3': unknown option 'opt_levl' "
        "(known: target, opt_level, pipeline, mcpu)"]


def test_options_the_user_set_for_a_backend_no_longer_listed_are_a_warning(tmp_path):
    out = tmp_path / "run"
    proc = _cli("campaign=cpu_ort", "campaign.backends=[eager]",
                "campaign.backend_options.ort.rate=0.5", "campaign.budget=2", *COMMON,
                f"output.dir={out}", "triage.enabled=false", timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[0] == (
        "warning: campaign.backend_options.ort: ignored, 'ort' is not in campaign.backends "
        "['eager']")
    assert read_results(out).num_rows == 2
