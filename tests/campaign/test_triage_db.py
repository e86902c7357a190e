"""The bug database across campaigns (campaign/triage/bugdb/store.py, sightings.py, recheck.py,
upstream.py, dbcli.py): two triages into one database, re-check of open bugs, atomic and
concurrent writes, the report.md per bug, and the exact error messages (the findings page and
the notes' import: test_triage_findings.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_triage import PATTERN, WRONG, _bug_folder, _case, campaign_dir

from campaign.triage import TriageConfig
from campaign.triage.__main__ import main
from campaign.triage.bugdb.recheck import recheck
from campaign.triage.bugdb.sightings import record
from campaign.triage.bugdb.store import DB_SCHEMA, TABLE, Bug, BugDb, BugDbError, resolve
from campaign.triage.pipeline.campaign_triage import triage

REPO = Path(__file__).resolve().parents[2]


def _row(bucket: str, count: int = 1, **kw) -> dict:
    """A bugs-table row (campaign.triage.pipeline.buckets.BUGS_SCHEMA's fields the database reads)."""
    return {"bucket": bucket, "backend": "ort", "target": "cpu", "verdict": "crash",
            "stage": "compile", "error_sig": f"E: {bucket}", "pattern": None,
            "backend_config": "", "kind": "bug", "count": count, "first_seen": None,
            "artifact_path": None, "repro": None, "reduced_insts": None, **kw}


# ---- two campaigns into one database -------------------------------------------------------------

def test_the_second_campaigns_known_bugs_are_known_not_new_and_not_reduced_again(tmp_path):
    db = tmp_path / "db"
    cfg = TriageConfig(max_tests=150, budget="5m", check_repro=False, db=str(db))
    out1 = campaign_dir(tmp_path / "run1", [WRONG, PATTERN], [_case(f"a-{i}", i) for i in range(2)])
    first = triage(out1, cfg, log=lambda s: None)
    assert first.reductions == 3  # both mismatch folders (their bucket needs it), one crash
    rows1 = pq.read_table(out1 / "bugs.parquet").to_pylist()
    assert len(rows1) == 2 and all(r["new"] for r in rows1)
    bugs = BugDb(db).read()
    assert {b.status for b in bugs.values()} == {"new"}
    assert set(bugs) == {r["bucket"] for r in rows1}  # no grouping column: a bug per bucket
    assert set(first.recorded.new) == set(bugs) and not first.recorded.known
    assert "2 new compiler bugs" in first.text()

    out2 = campaign_dir(tmp_path / "run2", [WRONG, PATTERN], [_case(f"b-{i}", 10 + i)
                                                             for i in range(2)])
    second = triage(out2, cfg, log=lambda s: None)
    assert second.reductions == 0  # every finding is of a known bug
    rows2 = pq.read_table(out2 / "bugs.parquet").to_pylist()
    assert {r["bucket"] for r in rows2} == set(bugs) and not any(r["new"] for r in rows2)
    assert not second.recorded.new and set(second.recorded.known) == set(bugs)
    after = BugDb(db).read()
    for bug in after.values():
        assert bug.status == "known"
        assert bug.campaigns == 2 and bug.tests == 4
        assert bug.first_run == str(out1.resolve()) and bug.last_run == str(out2.resolve())
        assert bug.first_seen <= bug.last_seen
        assert any(v.startswith("torch==") for v in bug.versions)
        assert bug.graph and bug.graph_insts in (1, 2)  # the reduced graph, from run 1
        assert bug.report and Path(bug.report).is_file()
    # triaging run 2 again counts it once
    triage(out2, cfg, log=lambda s: None)
    assert {b.tests for b in BugDb(db).read().values()} == {4}
    # run 1 triaged again: its bugs are known now (seen in run 2), its reductions stay
    graphs = {r["bucket"]: (out1 / r["artifact_path"] / "graph.gir").read_text() for r in rows1}
    assert triage(out1, cfg, log=lambda s: None).reductions == 0
    rows = pq.read_table(out1 / "bugs.parquet").to_pylist()
    assert {r["bucket"]: r["reduced_insts"] for r in rows} == \
        {r["bucket"]: r["reduced_insts"] for r in rows1}
    assert {r["bucket"]: (out1 / r["artifact_path"] / "graph.gir").read_text()
            for r in rows} == graphs
    # asked to, the triage reduces known bugs again
    again = triage(out2, TriageConfig(max_tests=150, budget="5m", check_repro=False,
                                      db=str(db), reduce_known=True), log=lambda s: None)
    assert again.reductions >= 1


def test_report_md_per_bug(tmp_path):
    out = campaign_dir(tmp_path / "run", [PATTERN], [_case()])
    triage(out, TriageConfig(max_tests=150, budget="5m", check_repro=False),
           log=lambda s: None)
    (row,) = pq.read_table(out / "bugs.parquet").to_pylist()
    text = (out / "bugs" / row["bucket"] / "report.md").read_text()
    assert text.startswith("# buggy_backends:CrashOnPattern")
    assert "crash during compile: PatternError" in text.splitlines()[0]
    # a backend of no known tracker gets PyTorch's torch.compile template, in its order
    parts = ["### 🐛 Describe the bug", "**Expected:**", "**Actual:** crash during compile "
             "(PatternError): `cannot fuse relu", "Not a numerical comparison", "#### Minimal reproducer",
             "torch.relu", "repro", "### Error logs", "### Versions", "- Python: "]
    pos = 0
    for part in parts:
        pos = text.find(part, pos)
        assert pos >= 0, part


def test_a_bug_column_groups_buckets_and_buckets_match_across_tables(tmp_path):
    db = BugDb.open(tmp_path / "db")
    got = record(db, tmp_path / "r1", [_row("a", 2, bug="X"), _row("b", 3, bug="X"),
                                       _row("c", 1, bug="Y")], versions=lambda s: ["v==1"])
    bugs = db.read()
    assert set(bugs) == {"X", "Y"} and bugs["X"].bucket_ids == ["a", "b"]
    assert bugs["X"].tests == 5 and got.new == {"X": "new", "Y": "new"}
    # a table without the column: each bucket alone, matched by id; an unseen one is new
    got = record(db, tmp_path / "r2", [_row("b", 4), _row("d", 1)], versions=lambda s: ["v==2"])
    bugs = db.read()
    assert got.known == {"X": "known"} and got.new == {"d": "new"}
    assert bugs["X"].tests == 9 and bugs["X"].campaigns == 2
    assert bugs["X"].versions == ["v==1", "v==2"] and bugs["Y"].status == "new"
    # a group holding a known bucket adds its other buckets to that bug
    record(db, tmp_path / "r3", [_row("c", 1, bug="Z"), _row("e", 1, bug="Z")])
    assert db.read()["Y"].bucket_ids == ["c", "e"] and "Z" not in db.read()
    # kinds: invalid buckets are ours, unsupported ones limitations
    got = record(db, tmp_path / "r4", [_row("f", kind="ours"), _row("g", kind="known")])
    assert got.new == {"f": "ours", "g": "limitation"}


def test_statuses_merge_and_a_fixed_bug_seen_again(tmp_path):
    db = BugDb.open(tmp_path / "db")
    record(db, tmp_path / "r1", [_row("a"), _row("b")])
    assert main(["mark", str(db.path), "a", "known-upstream", "--note", "pytorch#1"]) == 0
    assert main(["mark", str(db.path), "b", "merged", "--merged-into", "a"]) == 0
    bugs = db.read()
    assert (bugs["a"].status, bugs["a"].note) == ("known-upstream", "pytorch#1")
    assert (bugs["b"].status, bugs["b"].merged_into) == ("merged", "a")
    with pytest.raises(BugDbError, match="needs --merged-into"):
        db.set_status("a", "merged")
    db.set_status("a", "fixed")
    record(db, tmp_path / "r2", [_row("a"), _row("b")])
    bugs = db.read()
    assert bugs["a"].status == "known" and "after it was marked fixed" in bugs["a"].note
    assert bugs["b"].status == "merged"  # a person's status is kept


def test_default_database_lies_under_the_runs_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve(None, tmp_path / "runs" / "cpu_dynamic" / "20260101-000000") == \
        Path("runs/bugdb")
    assert resolve(None, tmp_path / "elsewhere") is None
    assert resolve("off", tmp_path / "runs" / "x") is None
    assert resolve("my/db", None) == Path("my/db")
    # the command line alike: a run under runs/ goes into runs/bugdb unless told otherwise
    out = campaign_dir(tmp_path / "runs" / "c" / "t0", [PATTERN], [_case()])
    assert main([str(out), "--budget", "0", "--no-check-repro", "-q"]) == 0
    assert list(BugDb(Path("runs/bugdb")).read()) == \
        [r["bucket"] for r in pq.read_table(out / "bugs.parquet").to_pylist()]
    out = campaign_dir(tmp_path / "runs" / "c" / "t1", [PATTERN], [_case()])
    assert main([str(out), "--budget", "0", "--no-check-repro", "--db", "off", "-q"]) == 0
    (bug,) = BugDb(Path("runs/bugdb")).read().values()
    assert bug.campaigns == 1  # the second run stayed out of it


# ---- re-check ------------------------------------------------------------------------------------

def test_recheck_marks_a_fixed_bug_fixed_and_an_open_one_open(tmp_path):
    # two ORT bug folders whose repro.py claims a mismatch (expected outputs shifted by 1)
    fixed, still = _bug_folder(tmp_path / "f", 1.0), _bug_folder(tmp_path / "s", 1.0)
    db = BugDb.open(tmp_path / "db")
    for folder, name, status in ((fixed, "ort-fixed", "reproduced"),
                                 (still, "ort-open", "reproduced"),
                                 (fixed, "ort-never", None)):  # its repro was never seen to fail
        record(db, folder.parent, [_row(name, verdict="mismatch", artifact_path=folder.name,
                                        repro=f"{folder.name}/repro.py", reduced_insts=3,
                                        repro_status=status)])
    # "upgrade the compiler": one bug goes away (its expected outputs are what ORT computes)
    with np.load(fixed / "expected.npz") as z:
        np.savez(fixed / "expected.npz", **{k: z[k] - np.asarray(1.0, z[k].dtype) for k in z.files})
    checked = {c.bug: c for c in recheck(db, timeout_s=120, log=lambda s: None)}
    assert checked["ort-fixed"].outcome == "not reproduced"
    assert checked["ort-open"].outcome == "reproduced"
    assert checked["ort-never"].outcome == "not reproduced"
    bugs = db.read()
    assert bugs["ort-fixed"].status == "fixed" and bugs["ort-open"].status == "new"
    assert bugs["ort-never"].status == "new"  # a repro that never failed tells nothing
    for b in bugs.values():
        assert b.checked is not None and b.checked_versions[0].startswith("onnxruntime==")
    assert "fixed: not reproduced on onnxruntime==" in bugs["ort-fixed"].note
    # a fixed bug is not re-run: the command re-checks the one open bug
    r = subprocess.run([sys.executable, "-m", "campaign.triage", "recheck", str(db.path)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "recheck: 2 open bugs re-run, 0 fixed" in r.stdout


# ---- atomic and concurrent writes ----------------------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from campaign.triage.bugdb.sightings import record
    from campaign.triage.bugdb.store import BugDb
    db = BugDb.open(sys.argv[1])
    for i in range(int(sys.argv[3])):
        record(db, Path(sys.argv[2]), [{"bucket": f"{sys.argv[2]}-{i}", "backend": "ort",
               "target": "cpu", "verdict": "crash", "stage": "run", "error_sig": "E",
               "pattern": None, "backend_config": "", "kind": "bug", "count": 1}],
               versions=lambda s: [])
        print(i, flush=True)
""")


def _writer(db: Path, name: str, n: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(db), name, str(n)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def test_a_write_cut_short_loses_nothing(tmp_path, monkeypatch):
    db = BugDb.open(tmp_path / "db")
    record(db, tmp_path / "r1", [_row("a")])
    before = (db.path / TABLE).read_bytes()

    def crash(table, where, **kw):  # half a file, then the process "dies"
        Path(where).write_bytes(b"PAR1" + b"\0" * 100)
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(KeyboardInterrupt):
        record(db, tmp_path / "r2", [_row("b")])
    monkeypatch.undo()
    assert (db.path / TABLE).read_bytes() == before
    assert list(db.read()) == ["a"] and not list(db.path.glob(".*.tmp-*"))


def test_a_writer_killed_with_sigkill_leaves_the_last_complete_table(tmp_path):
    db = tmp_path / "db"
    proc = _writer(db, "k", 10_000)
    assert proc.stdout is not None
    for _ in range(5):  # five complete updates, then kill it mid-way through others
        proc.stdout.readline()
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    bugs = BugDb.open(db).read()  # readable: whole, not torn
    assert len(bugs) >= 5 and set(bugs) == {f"k-{i}" for i in range(len(bugs))}
    record(BugDb(db), tmp_path / "next", [_row("z")])  # the next writer cleans up after it
    assert not list(db.glob(".*.tmp-*")) and len(BugDb(db).read()) == len(bugs) + 1


def test_concurrent_triages_lose_nothing_and_readers_see_whole_tables(tmp_path):
    db = tmp_path / "db"
    BugDb.open(db)
    writers = [_writer(db, f"w{j}", 15) for j in range(3)]
    seen = 0
    while any(w.poll() is None for w in writers):
        seen = max(seen, len(BugDb(db).read()))  # a reader without the lock, mid-writes
    assert all(w.returncode == 0 for w in writers)
    bugs = BugDb(db).read()
    assert set(bugs) == {f"w{j}-{i}" for j in range(3) for i in range(15)}
    assert seen <= 45
    assert pq.read_schema(db / TABLE).equals(DB_SCHEMA, check_metadata=False)


# ---- errors --------------------------------------------------------------------------------------

def test_a_bad_or_corrupt_database_is_a_one_line_error_and_is_left_as_it_is(tmp_path, capsys):
    out = tmp_path / "run"
    (out / "results").mkdir(parents=True)
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main([str(out), "--db", str(afile), "-q"]) == 2
    assert capsys.readouterr().err == \
        f"error: triage.db: {afile} is a file, not a bug database directory\n"
    assert main([str(out), "--db", str(afile / "db"), "-q"]) == 2
    assert capsys.readouterr().err == \
        f"error: triage.db: cannot create {afile / 'db'}: Not a directory\n"
    assert main(["recheck", str(tmp_path / "nodb")]) == 2
    assert capsys.readouterr().err == f"error: triage.db: {tmp_path / 'nodb'}: no such bug database\n"

    db = tmp_path / "db"
    db.mkdir()
    (db / TABLE).write_bytes(b"not parquet at all")
    for argv in (["recheck", str(db)], ["show", str(db)], [str(out), "--db", str(db), "-q"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(
            f"error: triage.db: {db / TABLE} is not a readable bug database (")
        assert err.endswith("); it was left as it is\n")
    assert (db / TABLE).read_bytes() == b"not parquet at all"
    assert not (out / "bugs.parquet").exists()  # nothing was triaged either

    pq.write_table(pa.table({"x": [1]}), db / TABLE)
    assert main(["show", str(db)]) == 2
    assert capsys.readouterr().err == \
        f"error: triage.db: {db / TABLE} is not a bug database (no column 'bug'); it was left as it is\n"


def test_bug_rows_round_trip(tmp_path):
    db = BugDb.open(tmp_path / "db")
    record(db, tmp_path / "r", [_row("a", 3)], versions=lambda s: ["x==1"])
    (bug,) = db.read().values()
    assert isinstance(bug, Bug) and Bug.of_row(bug.row()) == bug


# ---- the campaign's side: its database, and known bugs' triggers from it --------------------------

def test_a_campaign_under_runs_gets_the_default_database_and_a_bad_one_stops_it(tmp_path,
                                                                                 monkeypatch):
    from campaign.config import Config, ConfigError
    from campaign.driver.checks import bug_db

    monkeypatch.chdir(tmp_path)
    conf = Config()
    assert bug_db(conf, tmp_path / "runs" / "cpu_dynamic" / "t0") == Path("runs/bugdb")
    assert conf.triage.db == "runs/bugdb" and (tmp_path / "runs" / "bugdb").is_dir()
    conf = Config()
    assert bug_db(conf, tmp_path / "out") is None and conf.triage.db == "off"
    (tmp_path / "runs" / "bugdb" / TABLE).write_text("torn")
    with pytest.raises(ConfigError, match=r"^triage.db: runs/bugdb/bugdb.parquet is not a "
                                          r"readable bug database \(.*\); it was left as it is$"):
        bug_db(Config(), tmp_path / "runs" / "cpu_dynamic" / "t1")


def test_held_bugs_of_the_database_give_triggers(tmp_path):
    from campaign.known import db_triggers

    folder = tmp_path / "r" / "bugs" / "x"
    folder.mkdir(parents=True)
    (folder / "graph.gir").write_text(
        "graph main(%x: f32[2], %y: f32[2]) {\n  %v = relu(%x) : f32[2]\n"
        "  %w = add(%v, %y) : f32[2]\n  return %w\n}\n")
    db = BugDb.open(tmp_path / "db")
    record(db, tmp_path / "r", [_row("x", artifact_path="bugs/x", reduced_insts=2),
                                _row("y", kind="ours")])
    (t,) = db_triggers(db.path)
    assert (t.bucket, t.backend) == ("x", "ort") and ("relu", "add") in t.edges
    db.set_status("x", "fixed")  # a fixed bug's repeats go through: a regression is seen
    assert db_triggers(db.path) == []


def test_a_budget_that_is_no_duration_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "run"
    (out / "results").mkdir(parents=True)
    assert main([str(out), "--budget", "1200", "--db", "off", "-q"]) == 2
    assert capsys.readouterr().err == (
        "error: triage.budget: a duration like 10m or a share like 25%, got '1200'\n")
