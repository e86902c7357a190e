"""The version matrix (campaign/triage/bugdb/matrix.py, runner.py, pages/note_repro.py): fake
findings whose scripts reproduce, are fixed, fail to import a package or hang, run under this
interpreter, give the right cells; a missing interpreter gives `errors`, not a crash; columns
merge into one file; docs/findings.md gets one column per version and marks what a version
fixed; the bug database's re-check runs a note's repro through the same code; a bad `repro:`
field is one exact line."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from campaign.triage.__main__ import main
from campaign.triage.bugdb import matrix as matrix_mod
from campaign.triage.bugdb.matrix import Cell, Column, Matrix, run_matrix, save
from campaign.triage.bugdb.recheck import recheck
from campaign.triage.bugdb.runner import Interpreter, probe
from campaign.triage.bugdb.store import Bug, BugDb
from campaign.triage.pages.findings_page import Page
from campaign.triage.pages.note_repro import NoteRepro
from campaign.triage.pages.notes import Note, Tracker, dump_note, load_notes

SCRIPTS = {
    "A-reproduces": "print('case 1: BUG (wrong values)')\n",
    "B-fixed": "print('case 1: ok')\n",
    "C-import": "import no_such_package_dynsmith\nprint('case 1: ok')\n",
    "D-hangs": "import time\ntime.sleep(60)\n",
    "E-other": "print('case 1: odd')\nraise SystemExit(3)\n",
}


def _notes(tmp_path: Path, status: str = "known") -> Path:
    """A notes dir with one finding per script of `SCRIPTS`, each reading `BUG` as the bug and
    `ok` as fixed."""
    notes, bugs = tmp_path / "findings", tmp_path / "bugs"
    notes.mkdir()
    bugs.mkdir()
    for name, code in SCRIPTS.items():
        (bugs / f"{name}.py").write_text(code)
        path = notes / f"{name}.md"
        path.write_text(dump_note(Note(
            bug=name, path=path, status=status, project="pytorch", version="2.13",
            compiler="torch", what=f"what of {name}", how_found="by hand",
            reproducer=f"`{name}.py`", tracker=Tracker(False),
            repro=NoteRepro(f"../bugs/{name}.py", "BUG", "^case 1: ok$"))))
    return notes


def _fake_probe(version: str):
    return lambda python: Interpreter(python, {"python": "3.11", "torch": version})


def test_cells_of_fake_findings_under_this_interpreter(tmp_path, monkeypatch):
    notes_dir = _notes(tmp_path)
    notes = load_notes(notes_dir)
    assert notes["A-reproduces"].repro is not None
    monkeypatch.setattr(matrix_mod, "probe", _fake_probe("2.99.0"))
    monkeypatch.setattr(matrix_mod, "TIMEOUT_S", 2.0)
    out = tmp_path / "matrix.json"
    lines: list[str] = []
    ran = run_matrix(notes, notes_dir, [sys.executable], out, timeout_s=3.0, jobs=2,
                     log=lines.append)
    (col,) = ran.columns
    assert col.label == "torch 2.99.0" and col.python == sys.executable
    got = {b: (c.outcome, c.why) for b, c in col.cells.items()}
    assert got == {
        "A-reproduces": ("reproduces", "case 1: BUG (wrong values)"),
        "B-fixed": ("fixed", "case 1: ok"),
        "C-import": ("errors", "ModuleNotFoundError: No module named 'no_such_package_dynsmith'"),
        "D-hangs": ("errors", "timed out after 3 s"),
        "E-other": ("errors", "case 1: odd"),
    }
    assert col.cells["D-hangs"].seconds < 20  # killed at its limit, not waited for
    saved = json.loads(out.read_text())
    assert [c["label"] for c in saved["columns"]] == ["torch 2.99.0"]
    assert saved["columns"][0]["cells"]["C-import"]["outcome"] == "errors"
    assert len(lines) == 1 + len(SCRIPTS) and lines[0].startswith(f"matrix: {sys.executable}: ")


def test_a_missing_interpreter_is_errors_with_the_reason(tmp_path):
    notes_dir = _notes(tmp_path)
    notes = load_notes(notes_dir)
    ran = run_matrix(notes, notes_dir, ["/nonexistent/python"], None, only=["A-reproduces"],
                     log=lambda s: None)
    (col,) = ran.columns
    assert col.label == "/nonexistent/python (no torch)"
    assert col.errors == {"python": "FileNotFoundError: [Errno 2] No such file or directory: "
                                    "'/nonexistent/python'"}
    assert col.cells == {"A-reproduces": Cell(
        "errors", "/nonexistent/python: FileNotFoundError: No such file or directory")}


def test_probe_reads_versions_and_says_why_a_package_is_missing():
    import numpy

    got = probe(sys.executable, packages=("numpy", "no_such_package_dynsmith"))
    assert got.versions == {"python": ".".join(map(str, sys.version_info[:3])),
                            "numpy": numpy.__version__, "no_such_package_dynsmith": None}
    assert got.errors == {"no_such_package_dynsmith":
                          "ModuleNotFoundError: No module named 'no_such_package_dynsmith'"}
    assert got.label == f"{sys.executable} (no torch)" and got.stack() == []


def test_columns_merge_and_the_page_has_one_column_per_version(tmp_path):
    notes_dir = _notes(tmp_path)
    notes = load_notes(notes_dir)
    out = tmp_path / "matrix.json"
    new = Column("torch 2.14.1", "/v214/python", {"torch": "2.14.1"}, ran="2026-12-07T02:00:00Z",
                 cells={"A-reproduces": Cell("fixed", "case 1: ok"),
                        "C-import": Cell("errors", "ModuleNotFoundError: No module named 'x'")})
    old = Column("torch 2.13.0", "/v213/python", {"torch": "2.13.0"}, ran="2026-12-07T01:00:00Z",
                 cells={"A-reproduces": Cell("reproduces", "BUG"), "B-fixed": Cell("fixed")})
    save(out, [new])
    save(out, [old])
    # a later run of one finding keeps the column's other cells
    save(out, [Column("torch 2.13.0", "/v213/python", {"torch": "2.13.0"},
                      cells={"E-other": Cell("reproduces", "BUG")})])
    m = Matrix.read(out)
    assert [c.label for c in m.columns] == ["torch 2.13.0", "torch 2.14.1"]  # oldest first
    assert sorted(m.columns[0].cells) == ["A-reproduces", "B-fixed", "E-other"]
    assert m.fixed_in("A-reproduces") == ["torch 2.14.1"] and m.fixed_in("B-fixed") == []
    page = Page(notes, notes_dir=notes_dir, page=tmp_path / "findings.md", matrix=m).text()
    head = ("| bug | compiler | what | how found | reproducer | tracker | torch 2.13.0 | "
            "torch 2.14.1 |\n|---|---|---|---|---|---|---|---|\n")
    assert head in page
    rows = {ln.split("]")[0][3:]: ln for ln in page.splitlines() if ln.startswith("| [")}
    assert rows["A-reproduces"].endswith("| reproduces | **fixed** |")
    assert rows["B-fixed"].endswith("| fixed |  |")
    assert rows["C-import"].endswith("|  | errors: `ModuleNotFoundError: No module named 'x'` |")
    assert rows["D-hangs"].endswith("| not looked up |  |  |")
    assert "## Versions tested" in page
    assert ("| torch 2.14.1 | `/v214/python` | torch 2.14.1 | 2026-12-07 | 0 | 1 | 1 | A |"
            in page)
    # without a matrix: no version columns
    bare = Page(notes, notes_dir=notes_dir, page=tmp_path / "findings.md").text()
    assert "| bug | compiler | what | how found | reproducer | tracker |\n" in bare
    assert "Versions tested" not in bare


def test_the_findings_command_reads_the_matrix_beside_the_notes(tmp_path, capsys):
    notes_dir = _notes(tmp_path)
    save(notes_dir / "matrix.json", [Column("torch 2.13.0", "/p", {"torch": "2.13.0"},
                                            cells={"A-reproduces": Cell("reproduces")})])
    out = tmp_path / "findings.md"
    assert main(["findings", "--notes", str(notes_dir), "--out", str(out)]) == 0
    assert "| tracker | torch 2.13.0 |" in out.read_text()


def test_recheck_runs_an_imported_findings_note_repro(tmp_path, monkeypatch):
    from campaign.triage.bugdb import runner

    monkeypatch.setattr(runner, "probe", lambda python: Interpreter(python, {"torch": "2.99"}))
    notes_dir = _notes(tmp_path)
    db = BugDb.open(tmp_path / "db")
    db.update(lambda bugs: bugs.update({"A-reproduces": Bug("A-reproduces", "known"),
                                        "B-fixed": Bug("B-fixed", "known"),
                                        "C-import": Bug("C-import", "known")}))
    done = recheck(db, 20.0, ["A-reproduces", "B-fixed", "C-import"], log=lambda s: None,
                   notes_dir=notes_dir, python=sys.executable)
    assert {c.bug: (c.outcome, c.status) for c in done} == {
        "A-reproduces": ("reproduced", "known"), "B-fixed": ("not reproduced", "known"),
        "C-import": ("error", "known")}
    assert done[2].tail == "ModuleNotFoundError: No module named 'no_such_package_dynsmith'"
    assert done[0].versions == ["torch==2.99"]
    bugs = db.read()
    assert bugs["A-reproduces"].repro_status == "reproduced"
    assert bugs["B-fixed"].status == "known"  # it never reproduced: no evidence of a fix
    # now it reproduced once: a later re-check that no longer sees it marks it fixed
    (notes_dir.parent / "bugs" / "A-reproduces.py").write_text("print('case 1: ok')\n")
    (again,) = recheck(db, 20.0, ["A-reproduces"], log=lambda s: None, notes_dir=notes_dir)
    assert (again.outcome, again.status) == ("not reproduced", "fixed")


@pytest.mark.parametrize("block, message", [
    ("repro: x\n", "repro: expected a mapping (script, args, shows, fixed), got str"),
    ("repro:\n  script: ../bugs/A-reproduces.py\n", "repro.shows: missing"),
    ("repro:\n  script: ../bugs/nope.py\n  shows: BUG\n",
     "repro.script: ../bugs/nope.py is not a file under {notes}"),
    ("repro:\n  script: ../bugs/A-reproduces.py\n  shows: '('\n",
     "repro.shows: not a regular expression: missing ), unterminated subpattern at position 0"),
    ("repro:\n  script: ../bugs/A-reproduces.py\n  shows: BUG\n  when: now\n",
     "repro.when: unknown field (known: script, args, shows, fixed)"),
])
def test_a_bad_repro_field_is_one_line(tmp_path, capsys, block, message):
    notes_dir = _notes(tmp_path)
    path = notes_dir / "A-reproduces.md"
    text = path.read_text()
    start = text.index("repro:")
    path.write_text(text[:start] + block + "---\n" + text.split("---\n", 2)[2])
    assert main(["findings", "--notes", str(notes_dir), "--out", str(tmp_path / "f.md")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: {message.format(notes=notes_dir)}\n"


def test_the_judge_reads_a_signal_and_a_clean_exit(tmp_path):
    from campaign.triage.bugdb.runner import Run
    from campaign.triage.pages.note_repro import judge

    seg = NoteRepro("x.py", "killed by SIGSEGV")
    assert judge(seg, Run(-11, "compiled, running\n", "", False, 1.0), 9) == (
        "reproduces", "[killed by SIGSEGV]")
    assert judge(seg, Run(0, "tvm: [1]\n", "", False, 1.0), 9) == (
        "fixed", "exit 0 without the failure")
    assert judge(seg, Run(1, "", textwrap.dedent("""\
        Traceback (most recent call last):
          File "x.py", line 1, in <module>
        ValueError: other
        """), False, 1.0), 9) == ("errors", "ValueError: other")
