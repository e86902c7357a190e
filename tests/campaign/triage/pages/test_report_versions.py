"""What report.md and repro.py say of where a bug was seen (campaign/triage/pages/environment.py,
upstream_report.py, tracker_templates.py): the versions it failed on, from this run, the bug
database and the version matrix; torch's collect_env output folded in report.md, run once per
interpreter, time-limited, and one line when it fails."""
from __future__ import annotations

import ast
import json
import stat
from pathlib import Path

import pytest

from campaign.triage.bugdb.matrix import Cell, Column, Matrix
from campaign.triage.bugdb.store import Bug
from campaign.triage.bugdb.versions import installed
from campaign.triage.pages import environment, upstream_report
from campaign.triage.pages.environment import Seen, collect_env, seen_comment, seen_versions

FAKE_ENV = "PyTorch version: 9.9.9\nIs debug build: False\nOS: Fake Linux"


def _folder(tmp_path: Path) -> tuple[Path, dict]:
    """A bug folder (info.json only) and its bugs-table row, a known finding's bug."""
    folder = tmp_path / "bugs" / "inductor-crash-0123456789"
    folder.mkdir(parents=True)
    (folder / "info.json").write_text(json.dumps(
        {"row": {"error_class": "RuntimeError", "error_msg": "RuntimeError: boom"}, "seed": 0}))
    row = {"bucket": folder.name, "bug": folder.name, "backend": "inductor", "target": "cpu",
           "verdict": "crash", "stage": "compile", "error_sig": "RuntimeError: boom",
           "kind": "bug", "artifact_path": f"bugs/{folder.name}", "count": 3,
           "finding": "F99-fake"}
    return folder, row


def _matrix() -> Matrix:
    return Matrix([
        # releases no test machine has installed, so that the matrix's sighting is never the
        # run's own (one installed release is one sighting, whoever saw it)
        Column("torch 2.98.0", "/v298", {"torch": "2.98.0", "onnxruntime": "1.32.0"},
               cells={"F99-fake": Cell("reproduces")}),
        Column("torch 2.99.0", "/v299", {"torch": "2.99.0"}, cells={"F99-fake": Cell("fixed")})])


def test_report_md_has_the_versions_seen_and_collect_env_folded(tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(upstream_report, "collect_env", lambda: calls.append("x") or FAKE_ENV)
    _, row = _folder(tmp_path)
    bugs = {"F99-fake": Bug("F99-fake", "known", versions=["torch==2.12.0"])}
    out = upstream_report.write_reports(tmp_path, [row], bugs, _matrix())
    text = out[row["bug"]].read_text()
    (this,) = [v for v in installed("inductor") if v.startswith("torch==")]
    # the matrix's fixed column is no sighting; onnxruntime is not the Inductor bug's stack
    assert (f"**Seen on** (torch versions the bug failed on): torch==2.12.0 (bug database); "
            f"{this} (this run); torch==2.98.0 (version matrix).\n") in text
    versions = text.split("### Versions\n", 1)[1]
    assert versions.index("**Seen on**") < versions.index("- OS: ")
    assert ("<details>\n<summary>python -m torch.utils.collect_env</summary>\n\n```\n"
            f"{FAKE_ENV}\n```\n\n</details>\n") in versions
    assert calls == ["x"]


def test_tvm_and_ort_reports_carry_them_too(tmp_path, monkeypatch):
    monkeypatch.setattr(upstream_report, "collect_env", lambda: FAKE_ENV)
    _, row = _folder(tmp_path)
    for backend, heading in (("tvm", "### Environment\n\n"),
                             ("ort", "### Versions seen and environment\n\n")):
        text = upstream_report.report_text(tmp_path, row["bug"], {**row, "backend": backend},
                                           [row])
        part = text.split(heading, 1)[1]
        assert part.startswith("**Seen on** (torch versions the bug failed on): ")
        assert f"```\n{FAKE_ENV}\n```" in part


def test_seen_versions_without_a_database_or_matrix_are_this_runs():
    seen = seen_versions("inductor", [{"bucket": "b"}])
    assert [s.version for s in seen] == sorted(installed("inductor"))
    assert {s.sources for s in seen} == {("this run",)}
    assert seen_versions("inductor", [{"bucket": "b"}], this_run=False) == []


def test_repro_py_comment_block_keeps_the_docstring():
    seen = [Seen("torch==2.13.0+cpu", ("this run", "bug database")),
            Seen("torch==2.14.1", ("version matrix",))]
    block = seen_comment(seen)
    assert block == (
        "# Versions this bug was seen failing on (dynsmith's triage: this run, the bug\n"
        "# database's sightings, the version matrix):\n"
        "#   torch==2.13.0+cpu (this run, bug database)\n"
        "#   torch==2.14.1 (version matrix)\n"
        "# The full environment (python -m torch.utils.collect_env) is in report.md.\n")
    script = block + '"""Reproducer."""\nfrom __future__ import annotations\n\nx = 1\n'
    assert ast.get_docstring(ast.parse(script)) == "Reproducer."
    compile(script, "repro.py", "exec")


def _fake_python(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fakepython"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_collect_env_is_cached_per_interpreter(tmp_path, monkeypatch):
    monkeypatch.setattr(environment, "_COLLECTED", {})
    calls = tmp_path / "calls"
    fake = _fake_python(tmp_path, f'echo "PyTorch version: 9.9"; echo "$@" >> {calls}')
    assert collect_env(fake) == "PyTorch version: 9.9"
    assert collect_env(fake) == "PyTorch version: 9.9"
    assert calls.read_text() == "-m torch.utils.collect_env\n"  # run once


@pytest.mark.parametrize("body, limit, message", [
    ("sleep 30", 1.0, "collect_env failed: timed out after 1 s"),
    ('echo "ModuleNotFoundError: No module named \'torch\'" >&2; exit 1', 60.0,
     "collect_env failed: ModuleNotFoundError: No module named 'torch'"),
])
def test_collect_env_failing_is_one_line(tmp_path, monkeypatch, body, limit, message):
    monkeypatch.setattr(environment, "_COLLECTED", {})
    assert collect_env(_fake_python(tmp_path, body), limit) == message


def test_collect_env_of_a_missing_interpreter(monkeypatch):
    monkeypatch.setattr(environment, "_COLLECTED", {})
    assert collect_env("/nonexistent/python") == (
        "collect_env failed: /nonexistent/python: FileNotFoundError: No such file or directory")
