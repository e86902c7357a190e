"""docs/findings.md generated from the notes (campaign/triage/pages/notes.py, findings_page.py,
the `findings` command of dbcli.py): the committed page is what the committed notes make, the
notes keep every row of the old hand-written table, merged notes fold into the bug they repeat,
statuses and a database's bugs without notes are shown, and a bad field is one exact line."""
from __future__ import annotations

import re
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from campaign.triage.__main__ import main
from campaign.triage.bugdb.matrix import MATRIX_FILE, Matrix
from campaign.triage.bugdb.store import Bug, BugDb
from campaign.triage.pages.findings_page import PAGE, Page
from campaign.triage.pages.notes import NOTES_DIR, Note, Tracker, dump_note, load_notes

REPO = Path(__file__).resolve().parents[2]
#: docs/findings.md as it was last written by hand, before the notes replaced it
HANDWRITTEN = Path(__file__).parent / "data" / "findings_handwritten.md"


def _note(path: Path, **kw: object) -> None:
    """Write a valid note at `path`, `kw` replacing its fields."""
    fields: dict = dict(status="known", project="pytorch", version="2.13",
                        compiler="torch 2.13 torch.compile", what=f"what of {path.stem}",
                        how_found=f"how {path.stem} was found",
                        reproducer=f"`docs/bugs/{path.stem}.py`", tracker=Tracker(False))
    fields.update(kw)
    path.write_text(dump_note(Note(bug=path.stem, path=path, **fields)))


# ---- the committed page --------------------------------------------------------------------------

def test_the_committed_page_is_what_the_committed_notes_make(monkeypatch, capsys):
    matrix = Matrix.read(REPO / NOTES_DIR / MATRIX_FILE)
    text = Page(load_notes(REPO / NOTES_DIR), matrix=matrix).text()
    assert (REPO / PAGE).read_text(encoding="utf-8") == text, (
        "docs/findings.md is stale: run python -m campaign.triage findings")
    monkeypatch.chdir(REPO)
    assert main(["findings", "--check"]) == 0
    assert capsys.readouterr().out == "findings: docs/findings.md is up to date\n"


def _rows(text: str) -> list[list[str]]:
    """The hand-written table's rows, four cells each."""
    return [[c.strip() for c in line.strip().strip("|").split(" | ")]
            for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| compiler")]


#: rows whose diagnosis a later look replaced (issue 30: F30 is apache/tvm#20191, a memory-planning
#: bug, not the importer the row guessed)
REWRITTEN = {"F30-tvm_if_topk_segfault"}


def test_the_notes_keep_every_row_of_the_hand_written_table_and_issue_20s_statuses():
    rows = _rows(HANDWRITTEN.read_text())
    notes = load_notes(REPO / NOTES_DIR)
    assert len(rows) == 30 and len(notes) >= 30  # notes added since are checked below
    for n, (compiler, what, how, repro) in enumerate(rows, 1):
        (note,) = [v for k, v in notes.items() if k.startswith(f"F{n:02d}-")]
        t = note.tracker
        if note.bug in REWRITTEN:  # a later look replaced the row's diagnosis; its repro stays
            assert repro.split()[0] in note.reproducer and t.looked_up and t.result, note.bug
            continue
        # a lookup the row recorded carries over word for word; the other rows had none, and
        # their notes' lookups came later (issue 20's check, the session-28 lookup of all rows)
        recorded = "Searched in the tracker" in what
        kept = note.what + (f" Searched in the tracker ({t.searched}): {t.result}"
                            if recorded else "")
        assert (note.compiler, kept, note.how_found, note.reproducer) == (
            compiler, what, how, repro), note.bug
        # every bug says whether it was looked up in its compiler's tracker (all were)
        assert t.looked_up and t.result, note.bug
    status = {k: v.status for k, v in notes.items() if int(k[1:3]) <= 30}
    assert Counter(status.values()) == {"known": 23, "known-upstream": 3, "limitation": 2,
                                        "merged": 2}
    assert all(n.tracker.looked_up and n.tracker.result for n in notes.values())
    assert sorted(k for k, s in status.items() if s == "known-upstream") == [
        "F05-export_fails_when_a_torch", "F06-torch_functionalize_views-case1",
        "F30-tvm_if_topk_segfault"]
    assert "apache/tvm#20191" in (notes["F30-tvm_if_topk_segfault"].tracker.result or "")
    assert "FunctionalTensor on its own" in notes["F05-export_fails_when_a_torch"].what
    assert "with gaps" in notes["F06-torch_functionalize_views-case1"].what
    assert sorted(k for k, s in status.items() if s == "limitation") == [
        "F02-hardswish_on_float64_is_only", "F16-tvm_broadcast_distinct_symbolic_dims"]
    assert "float32 attribute" in (notes["F02-hardswish_on_float64_is_only"].tracker.result or "")
    assert {k: v.merged_into for k, v in notes.items() if v.merged_into} == {
        "F19-torch_compile_unfold_single_window_overlap": "F07-torch_functionalize_views-case2",
        "F20-torch_onnx_export_bool_write_through_expand": "F08-torch_functionalize_views-case3",
        "F52-nested_scan_bool_saved_backward": "F32-cond_backward_non_float_output",
        "F56-functionalize_expand_view_bool_write": "F08-torch_functionalize_views-case3",
        "F60-nested_compile_region_closure_reuse": "F58-dynamo_region_reuse_closure_code_key"}


# ---- generation ----------------------------------------------------------------------------------

def test_a_page_from_a_small_database_and_notes(tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    _note(notes / "B-tvm.md", project="tvm", compiler="TVM 0.27", version="0.27",
          tracker=Tracker(True, "If, TopK", "not found"))
    _note(notes / "A-inductor.md")
    _note(notes / "C-repeat.md", status="merged", merged_into="A-inductor",
          compiler="torch 2.13 torch.onnx.export")
    _note(notes / "D-limit.md", status="limitation", project="onnxruntime",
          tracker=Tracker(True, None, "not a bug: the spec says so"))
    _note(notes / "E-upstream.md", status="known-upstream",
          tracker=Tracker(True, "unfold", "pytorch#1"))
    db = BugDb.open(tmp_path / "db")
    db.update(lambda bugs: bugs.update({
        "A-inductor": Bug("A-inductor", "fixed"), "N-new": Bug("N-new", "new", title="a new one"),
        "O-ours": Bug("O-ours", "ours"), "L-lim": Bug("L-lim", "limitation")}))
    out = tmp_path / "findings.md"
    assert main(["findings", str(db.path), "--notes", str(notes), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"findings: {out} written from 5 notes and {db.path}\n"
    page = out.read_text()
    assert "Generated: do not edit" in page and "python -m campaign.triage findings" in page
    heads = re.findall(r"^## (.*)$", page, re.M)
    assert heads == ["Bugs", "Already reported upstream", "Limitations, not bugs",
                     "In the bug database, without notes"]
    assert "2 open bugs, 1 already reported upstream, 1 limitations; 1 more repeat" in page
    bugs = page.split("## Bugs")[1].split("##")[0]
    rows = [ln for ln in bugs.splitlines() if ln.startswith("| [")]
    # ordered by project: pytorch before tvm; the merged note folded into A's row, no row of its own
    assert [r.split("]")[0] for r in rows] == ["| [A-inductor", "| [B-tvm"]
    assert "[C-repeat](notes/C-repeat.md) (torch 2.13 torch.onnx.export): what of C-repeat" in rows[0]
    assert "**C-repeat:** how C-repeat was found" in rows[0] and "| [C-repeat" not in page
    assert "**Database status:** fixed (the note says known)" in rows[0]
    assert rows[0].endswith("| not looked up<br>**Database status:** fixed (the note says known) |")
    assert rows[1].endswith("| searched (If, TopK): not found |")
    assert "| looked up: not a bug: the spec says so |" in page
    assert "| searched (unfold): pytorch#1 |" in page
    unnoted = page.split("## In the bug database, without notes")[1]
    assert "1 bugs to write up" in unnoted and "1 ours, 1 limitation, 0 merged not listed" in unnoted
    assert "| N-new | new | a new one | 0 | 0 |  |" in unnoted and "O-ours" not in unnoted
    # without the database: the notes alone
    assert main(["findings", "--notes", str(notes), "--out", str(out)]) == 0
    page = out.read_text()
    assert "## In the bug database" not in page and "Database status" not in page
    assert main(["findings", "--notes", str(notes), "--out", str(out), "--check"]) == 0
    _note(notes / "B-tvm.md", what="changed")
    assert main(["findings", "--notes", str(notes), "--out", str(out), "--check"]) == 1
    assert "is not what" in capsys.readouterr().out


def test_import_findings_puts_the_notes_statuses_in_the_database(tmp_path, capsys):
    db = tmp_path / "db"
    assert main(["import-findings", str(db), str(REPO / NOTES_DIR)]) == 0
    n = len(load_notes(REPO / NOTES_DIR))
    assert capsys.readouterr().out == f"import-findings: {n} bugs added to {db}\n"
    bugs = BugDb(db).read()
    assert Counter(b.status for b in bugs.values())["merged"] == 5
    assert bugs["F19-torch_compile_unfold_single_window_overlap"].merged_into == (
        "F07-torch_functionalize_views-case2")
    # the note's tracker lookup goes into the database's note of the bug
    f01 = bugs["F01-ort_f16_rnn_transpose_segfault"].note or ""
    assert "tracker: searched (onnxruntime segfault float16" in f01 and "not found" in f01
    assert main(["import-findings", str(db), str(REPO / NOTES_DIR)]) == 0
    assert "0 bugs added" in capsys.readouterr().out


# ---- a bad notes file ----------------------------------------------------------------------------

GOOD = """\
---
status: known
project: pytorch
version: '2.13'
compiler: torch
what: it fails
how_found: a campaign
reproducer: none
tracker:
  looked_up: false
---
"""
STATUSES = "new, unconfirmed, known, fixed, ours, known-upstream, limitation, merged"


@pytest.mark.parametrize("old,new,message", [
    ("status: known", "status: fixd", f"status: 'fixd' is not one of {STATUSES}"),
    ("version: '2.13'", "version: 2.10", "version: expected text (quote it), got float 2.1"),
    ("what: it fails\n", "", "what: missing"),
    ("what: it fails", "wat: it fails", "wat: unknown field (known: status, merged_into, project, "
                                        "version, compiler, what, how_found, reproducer, tracker, "
                                        "triggers, repro, cause)"),
    ("status: known", "status: merged", "merged_into: missing (status merged names the bug it "
                                        "repeats)"),
    ("status: known", "status: known\nmerged_into: A", "merged_into: given, but the status is "
                                                       "known (only merged takes it)"),
    ("status: known", "status: merged\nmerged_into: nobody", "merged_into: no other note for "
                                                             "'nobody'"),
    ("looked_up: false", "looked_up: maybe", "tracker.looked_up: expected true or false, got 'maybe'"),
    ("looked_up: false", "looked_up: true", "tracker.result: missing"),
    ("looked_up: false", "looked_up: false\n  result: x", "tracker.result: given, but looked_up "
                                                          "is false"),
    ("looked_up: false", "looked_up: false\n  link: x", "tracker.link: unknown field (known: "
                                                        "looked_up, result, searched)"),
    ("what: it fails", "what: [it, fails]", "what: expected text, got list ['it', 'fails']"),
    ("what: it fails", "what: it: fails", "the front matter is not YAML (line 6): mapping values "
                                          "are not allowed here"),
])
def test_a_bad_field_is_one_line_naming_the_file_and_the_field(tmp_path, capsys, old, new, message):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "A.md").write_text(GOOD)
    bad = notes / "B.md"
    assert old in GOOD
    bad.write_text(GOOD.replace(old, new))
    out = tmp_path / "findings.md"
    assert main(["findings", "--notes", str(notes), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {bad}: {message}\n"
    assert not out.exists()
    db = tmp_path / "db"
    assert main(["import-findings", str(db), str(notes)]) == 2  # nothing imported either
    assert BugDb(db).read() == {}


def test_a_file_without_front_matter_and_a_missing_notes_dir(tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "X.md").write_text(textwrap.dedent("""\
        # just markdown
        """))
    assert main(["findings", "--notes", str(notes), "--out", str(tmp_path / "o.md")]) == 2
    assert capsys.readouterr().err == (f"error: {notes / 'X.md'}: no front matter (the file must "
                                       f"start with a '---' line)\n")
    assert main(["findings", "--notes", str(tmp_path / "none"), "--out", str(tmp_path / "o.md")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'none'}: no such notes directory\n"
