"""A harness failure is never a compiler bug (issue 41, point 3): a bucket whose repro.py was run
and did not reproduce is `unconfirmed`, not `new` (the bugs table, the bug database, the
summaries); the rows of an environment fault the campaign named are bucketed apart, not
reduced, not recorded as bugs."""
from __future__ import annotations

import json
import sys
import textwrap
from datetime import datetime, timezone

import pyarrow.parquet as pq
from test_triage import PATTERN, _case, campaign_dir

from campaign.env_fault import EnvFault, row_signature, write_faults
from campaign.storage import read_results
from campaign.triage import TriageConfig
from campaign.triage.bugdb.sightings import record
from campaign.triage.bugdb.store import BugDb
from campaign.triage.pipeline.buckets import Bucket, BucketKey, unconfirmed
from campaign.triage.pipeline.campaign_triage import triage
from campaign.triage.pipeline.repro import check_repro, fixed_release

#: stand-in repro.py files (the test double's backend has none)
NOT_REPRODUCED = 'print("NOT REPRODUCED")\n'
REPRODUCED = 'print("REPRODUCED: crash: a stand-in")\nraise SystemExit(1)\n'


def _bug_rows(out):
    return [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]


def _replace_repro(out, text: str) -> None:
    """Put `text` as the bug folder's repro.py, unchecked (as a triage out of time leaves it)."""
    (row,) = _bug_rows(out)
    folder = out / row["artifact_path"]
    (folder / "repro.py").write_text(text)
    info = json.loads((folder / "info.json").read_text())
    info["repro_status"] = None
    (folder / "info.json").write_text(json.dumps(info))


def test_a_repro_that_does_not_reproduce_makes_an_unconfirmed_bug_not_a_new_one(tmp_path):
    out = campaign_dir(tmp_path / "run", [PATTERN], [_case("run-000000", 0)])
    db = str(tmp_path / "db")
    first = triage(out, TriageConfig(max_tests=150, check_repro=False, db=db),
                   log=lambda s: None)
    (row,) = _bug_rows(out)
    # no repro.py was run (the backend has none): new, as before, told apart by repro_status
    assert (row["status"], row["new"], row["repro_status"]) == ("new", True, "none")
    assert "1 new compiler bugs" in first.text()

    _replace_repro(out, NOT_REPRODUCED)
    again = triage(out, TriageConfig(max_tests=150, db=db), log=lambda s: None)
    (row,) = _bug_rows(out)
    assert (row["status"], row["new"], row["repro_status"]) == (
        "unconfirmed", True, "not reproduced")
    bug = row["bug"]
    lines = again.text().splitlines()
    assert lines[0].startswith(
        "triage: 1 buckets (0 compiler-bug buckets in 0 bugs; 1 unconfirmed bugs: their "
        "repro.py did not reproduce), 0 reductions in ")
    assert lines[1] == ("  unconfirmed (their repro.py did not reproduce: not compiler bugs "
                        "until one does; the next triage checks them again):")
    assert lines[2].startswith(f"    {bug}")
    assert lines[3] == (f"bug database {db}: 0 new compiler bugs (0 new buckets of ours or "
                        "known limitations), 0 bugs seen before; 1 unconfirmed (their repro.py "
                        "did not reproduce)")
    assert lines[4].startswith(f"  unconfirmed: {bug}  ")
    (stored,) = BugDb(tmp_path / "db").read().values()
    assert (stored.status, stored.repro_status) == ("unconfirmed", "not reproduced")
    # not known to a later triage (it is reduced and checked again), and it holds nothing back
    assert BugDb(tmp_path / "db").known_keys("another run") == []
    from campaign.known import db_triggers, load_triggers

    assert db_triggers(tmp_path / "db") == [] and load_triggers([out]) == []

    # its repro.py reproduces on a later check: a new compiler bug, new in that triage
    _replace_repro(out, REPRODUCED)
    third = triage(out, TriageConfig(max_tests=150, db=db), log=lambda s: None)
    (row,) = _bug_rows(out)
    assert (row["status"], row["repro_status"]) == ("new", "reproduced")
    assert "1 new compiler bugs" in third.text() and "unconfirmed" not in third.text()
    assert BugDb(tmp_path / "db").read()[bug].status == "new"
    assert [t.bucket for t in load_triggers([out])] == [row["bucket"]]


def _row(bucket: str, status: str, repro_status: str | None, kind: str = "bug") -> dict:
    return {"bucket": bucket, "bug": bucket, "backend": "ort", "target": "cpu",
            "verdict": "crash", "stage": "compile", "error_sig": f"E: {bucket}", "pattern": None,
            "backend_config": "", "kind": kind, "status": status, "count": 3,
            "first_seen": datetime(2026, 1, 1, tzinfo=timezone.utc), "artifact_path": None,
            "repro": None, "repro_status": repro_status}


def test_the_database_keeps_an_unconfirmed_bug_apart_until_it_reproduces(tmp_path):
    db = BugDb.open(tmp_path / "db")
    one = record(db, tmp_path / "a", [_row("b1", "unconfirmed", "error"),
                                      _row("b2", "new", "reproduced"),
                                      _row("e1", "environment", None, kind="env")],
                 versions=lambda b: [])
    assert one.new == {"b1": "unconfirmed", "b2": "new"}  # the environment fault: no bug
    assert one.text(tmp_path / "db").splitlines() == [
        f"bug database {tmp_path / 'db'}: 1 new compiler bugs (0 new buckets of ours or known "
        "limitations), 0 bugs seen before; 1 unconfirmed (their repro.py did not reproduce)",
        "  new: b2  ONNX Runtime: crash during compile: E: b2",
        "  unconfirmed: b1  ONNX Runtime: crash during compile: E: b1"]
    # seen again, not checked (budget): still unconfirmed, listed apart, counted as seen before
    two = record(db, tmp_path / "b", [_row("b1", "new", None)], versions=lambda b: [])
    assert two.known == {"b1": "unconfirmed"} and two.new == {}
    assert "0 new compiler bugs" in two.text(tmp_path / "db")
    # a new bug whose repro.py was written and not run: new to the database, but not counted
    # among the new compiler bugs (only a reproduction confirms one): listed apart
    unrun = {**_row("b3", "new", None), "repro": "bugs/b3/repro.py"}
    assert record(db, tmp_path / "b", [unrun], versions=lambda b: []).text(
        tmp_path / "db").splitlines() == [
        f"bug database {tmp_path / 'db'}: 0 new compiler bugs (0 new buckets of ours or known "
        "limitations), 0 bugs seen before; 1 new, not checked yet (repro.py not run)",
        "  not checked: b3  ONNX Runtime: crash during compile: E: b3  (repro.py not run yet)"]
    # a bug of two buckets, one reproduced, the other's repro.py not run: checked, new
    pair = [{**_row("b6", "new", "reproduced"), "repro": "bugs/b6/repro.py"},
            {**_row("b7", "new", None), "bug": "b6", "repro": "bugs/b7/repro.py"}]
    both = record(db, tmp_path / "d", pair, versions=lambda b: [])
    assert both.new == {"b6": "new"} and both.unchecked == set()
    # seen again and its repro.py reproduced: new in that run
    three = record(db, tmp_path / "c", [_row("b1", "new", "reproduced")], versions=lambda b: [])
    assert three.new == {"b1": "new"}
    assert db.read()["b1"].status == "new"


def test_a_bug_is_unconfirmed_only_when_some_repro_ran_and_none_reproduced():
    assert unconfirmed(["not reproduced"]) and unconfirmed(["different failure", None])
    assert unconfirmed(["error", "none"])
    assert not unconfirmed([None]) and not unconfirmed(["none"]) and not unconfirmed([])
    assert not unconfirmed(["not reproduced", "reproduced"])
    b = Bucket(BucketKey("ort", "cpu", "crash", "compile", "E"), unconfirmed=True)
    assert b.status == "unconfirmed"
    assert Bucket(BucketKey("ort", "cpu", "crash", "compile", "E"), new=False,
                  unconfirmed=True).status == "known"
    assert Bucket(BucketKey("ort", "cpu", "invalid", "unknown", "E")).status == "ours"
    env = Bucket(BucketKey("ort", "cpu", "crash", "compile", "E"), env_fault="environment ...")
    assert (env.kind, env.status, env.row()["kind"]) == ("env", "environment", "env")


def test_an_environment_faults_rows_are_bucketed_apart_not_reduced_nor_recorded(tmp_path):
    out = campaign_dir(tmp_path / "run", [PATTERN], [_case("run-000000", 0),
                                                     _case("run-000001", 1)])
    rows = [r for r in read_results(out).to_pylist() if r["verdict"] == "crash"]
    assert rows
    fault = EnvFault(rows[0]["backend"], row_signature(rows[0]), 9, 10, 12.0)
    write_faults(out, [fault])
    report = triage(out, TriageConfig(max_tests=150, db=str(tmp_path / "db")),
                    log=lambda s: None)
    assert report.reductions == 0
    table = pq.read_table(out / "bugs.parquet").to_pylist()
    (env,) = [r for r in table if r["kind"] == "env"]
    assert (env["status"], env["note"], env["count"]) == ("environment", fault.line(), len(rows))
    assert env["repro"] is None and env["reduced_insts"] is None
    lines = report.text().splitlines()
    assert lines[0].startswith("triage: 1 buckets (0 compiler-bug buckets in 0 bugs; 1 buckets "
                               "of environment faults), 0 reductions in ")
    assert lines[1] == ("  environment faults (not compiler bugs; the campaign held the backend "
                        "back):")
    assert lines[2].startswith(f"    {env['bucket']}") and lines[2].endswith(fault.line())
    assert BugDb(tmp_path / "db").read() == {}


def test_the_findings_page_lists_unconfirmed_bugs_apart_not_to_write_up(tmp_path):
    from campaign.triage.bugdb.store import Bug
    from campaign.triage.pages.findings_page import Page

    page = Page({}, {"N-new": Bug("N-new", "new", title="a new one"),
                     "U-doubt": Bug("U-doubt", "unconfirmed", title="maybe"),
                     "O-ours": Bug("O-ours", "ours")}).text()
    unnoted = page.split("## In the bug database, without notes")[1]
    assert ("1 bugs to write up (a note in docs/findings/<bug>.md), 1 unconfirmed (below), and "
            "1 ours, 0 limitation, 0 merged not listed.") in unnoted
    listed, doubtful = unnoted.split("### Unconfirmed")
    assert "| N-new | new | a new one | 0 | 0 |  |" in listed and "U-doubt" not in listed
    assert "| U-doubt | unconfirmed | maybe | 0 | 0 |  |" in doubtful


def test_an_unconfirmed_bugs_report_says_so_first(tmp_path):
    from campaign.triage.pages.upstream_report import write_reports

    folder = tmp_path / "bugs" / "b1"
    folder.mkdir(parents=True)
    (folder / "info.json").write_text(json.dumps({"row": {}}))
    row = {**_row("b1", "unconfirmed", "not reproduced"), "artifact_path": "bugs/b1"}
    reports = write_reports(tmp_path, [row])
    assert reports["b1"].read_text().startswith(
        "> **Unconfirmed**: its repro.py did not reproduce the failure when the triage ran it "
        "(a harness or environment failure until it does): not a compiler bug to report yet.")


def test_show_lists_unconfirmed_bugs_apart(tmp_path, capsys):
    from campaign.triage.__main__ import main

    db = BugDb.open(tmp_path / "db")
    record(db, tmp_path / "a", [_row("b1", "unconfirmed", "error"),
                                _row("b2", "new", "reproduced")], versions=lambda b: [])
    assert main(["show", str(db.path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("b2 ") and " new " in out[0]
    assert out[1:] == ["unconfirmed (1: their repro.py did not reproduce):",
                       f"  {'b1':<38} {3:>6} tests {1:>3} campaigns  "
                       "ONNX Runtime: crash during compile: E: b1"]


def _newer_python(tmp_path, name: str, env: str) -> str:
    """An interpreter that stands for a newer release: ours, with `env` set."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{env} exec {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def test_a_bug_fixed_in_a_newer_release_is_named_by_it(tmp_path):
    """A repro.py that reproduces here and not under a newer interpreter: that release fixed
    it; one that errors there (a package missing) or still reproduces says nothing."""
    folder = tmp_path / "bug"
    folder.mkdir()
    (folder / "repro.py").write_text(textwrap.dedent("""\
        import os, sys
        if os.environ.get("STANDIN_BROKEN"):
            raise ImportError("no module named torch")
        if os.environ.get("STANDIN_FIXED"):
            print("NOT REPRODUCED"); sys.exit(0)
        print("REPRODUCED: crash"); sys.exit(1)
        """))
    broken = _newer_python(tmp_path, "broken", "STANDIN_BROKEN=1")
    fixed = _newer_python(tmp_path, "fixed", "STANDIN_FIXED=1")
    logged: list[str] = []
    assert check_repro(folder, "crash")[0] == "reproduced"
    assert fixed_release(folder, "crash", None, 60, [broken, sys.executable], logged.append) is None
    assert logged[0].startswith(f"triage: repro.py of bug under {broken}: error")
    import torch

    assert fixed_release(folder, "crash", None, 60, [broken, fixed], logged.append) == (
        f"torch {torch.__version__}")


def test_the_database_keeps_a_bug_fixed_upstream_out_of_the_new_ones(tmp_path):
    db = BugDb.open(tmp_path / "db")
    row = {**_row("b4", "known-upstream", "reproduced"), "fixed_in": "torch 2.14.1+cu130"}
    done = record(db, tmp_path / "a", [row, _row("b5", "new", "reproduced")],
                  versions=lambda b: [])
    assert done.new == {"b4": "known-upstream", "b5": "new"}
    assert done.text(tmp_path / "db").splitlines() == [
        f"bug database {tmp_path / 'db'}: 1 new compiler bugs (0 new buckets of ours or known "
        "limitations), 0 bugs seen before; 1 fixed in a newer release (known)",
        "  new: b5  ONNX Runtime: crash during compile: E: b5",
        "  fixed upstream: b4  ONNX Runtime: crash during compile: E: b4  (torch 2.14.1+cu130)"]
    bug = db.read()["b4"]
    assert (bug.status, bug.note) == (
        "known-upstream", "fixed in torch 2.14.1+cu130: its repro.py does not reproduce there")
