"""The findings' notes' machine-readable triggers (campaign/triage/pages/note_triggers.py,
campaign/triage/pipeline/note_known.py, note_runs.py): every committed trigger graph parses,
verifies and has a skeleton; each one fails on its compiler as its note says (the fast
compilers in the default suite, the torch ones `slow`); wrong fields are one-line errors; and a
campaign knows the notes' bugs: not new, not reduced, named by the finding, held back."""
from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_triage import PATTERN, WRONG, _case, campaign_dir

from campaign.known import skeleton
from campaign.triage import TriageConfig
from campaign.triage.pages.note_triggers import NoteTrigger
from campaign.triage.pages.notes import NotesError, load_notes, parse_note, replace_triggers
from campaign.triage.pipeline.campaign_triage import triage
from campaign.triage.pipeline.note_known import (
    ROOT,
    findings_dir,
    known_note_keys,
    note_keys,
    note_triggers,
)
from campaign.triage.pipeline.note_runs import as_noted, observed, run_trigger
from campaign.triage.pipeline.note_runs import main as findings_triggers
from ir.core.verify import verify

NOTES = ROOT / "docs" / "findings"
#: backends whose trigger runs take a few seconds (the rest compile with torch: slow)
FAST = ("tvm", "ort")

_HEAD = """---
status: known
project: tvm
version: '0.27'
compiler: TVM 0.27 Relax
what: a bug
how_found: a campaign
reproducer: a script
tracker:
  looked_up: false
"""


def _all() -> list[tuple[str, NoteTrigger]]:
    return [(n.bug, t) for n in load_notes(NOTES).values() for t in n.triggers]


def test_the_tours_bugs_have_triggers():
    have = {bug.split("-")[0] for bug, _ in _all()}
    assert {"F04", "F05", "F13", "F21"} <= have


def test_every_trigger_graph_parses_verifies_and_has_a_skeleton():
    keys = note_keys(NOTES)
    assert keys
    for k in keys:
        verify(k.graph)
        sigs, _ = skeleton(k.graph)
        assert sigs, k.finding
        t = k.trigger
        if t.crash_like:
            assert t.stage and t.error_sig and "\n" not in t.error_sig
            assert k.key.error_sig == t.error_sig or t.verdict == "timeout"
        else:
            assert k.key.pattern and k.key.pattern.startswith("graph(")


def test_no_two_notes_claim_one_bucket():
    owner: dict[str, str] = {}
    for k in note_keys(NOTES):
        assert owner.setdefault(k.key.id, k.finding) == k.finding, k.key.id


def test_the_default_notes_dir_is_the_repositorys_from_any_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert findings_dir("docs/findings") == NOTES
    assert findings_dir("") is None and findings_dir(None) is None
    assert findings_dir(str(tmp_path)) == tmp_path
    assert len(known_note_keys(findings_dir(TriageConfig().findings))) == len(_all())


_RUNNERS: dict = {}


@pytest.fixture(scope="module")
def runners():
    yield _RUNNERS
    for r in _RUNNERS.values():
        r.close()
    _RUNNERS.clear()


@pytest.mark.parametrize("bug,trigger", [
    pytest.param(b, t, id=f"{b.split('-')[0]}-{Path(t.graph).stem}-{t.backend}",
                 marks=() if t.backend.partition("?")[0] in FAST else pytest.mark.slow)
    for b, t in _all()])
def test_each_trigger_graph_fails_as_its_note_says(bug, trigger, runners):
    row = run_trigger(trigger, NOTES, runners)
    assert as_noted(trigger, observed(trigger, row)), (bug, row.get("verdict"),
                                                       row.get("error_sig"))


#: F56's trigger graph on aot_eager, measured: torch 2.13.0 (the note's) and 2.14.1 (and 2.15.0)
SUBTRACTION = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
               "`^` or `logical_xor()` operator instead.")
F56_ON_213, F56_ON_2141 = f"RuntimeError: {SUBTRACTION}", f"NotImplementedError: {SUBTRACTION}"


def test_a_run_in_another_releases_form_is_the_note_and_keeps_it(tmp_path, monkeypatch):
    """`findings-triggers` on torch 2.14.1: F56's graph fails as a NotImplementedError, its note
    says RuntimeError (2.13). That is the trigger (`--check` passes) and the note keeps its
    form; another message differs and is written."""
    t = NoteTrigger("g.gir", "aot_eager", "crash", "compile", F56_ON_213)
    row = {"verdict": "crash", "stage": "compile", "target": "cpu", "error_sig": F56_ON_2141}
    assert observed(t, row).error_sig == F56_ON_2141
    assert as_noted(t, observed(t, row))
    assert not as_noted(t, replace(t, error_sig=f"NotImplementedError: {SUBTRACTION[:40]}"))
    assert not as_noted(t, replace(t, error_sig=f"AssertionError: {SUBTRACTION}"))
    assert not as_noted(t, replace(t, error_sig=F56_ON_2141, stage="run"))
    path = _note(tmp_path, f"""\
        triggers:
        - graph: g.gir
          backend: aot_eager
          config: ''
          verdict: crash
          stage: compile
          error_sig: '{F56_ON_213}'
        """)
    text = path.read_text()
    monkeypatch.setattr("campaign.triage.pipeline.note_runs.run_trigger",
                        lambda *a, **k: dict(row))
    assert findings_triggers(["--notes", str(tmp_path), "--check"]) == 0
    assert findings_triggers(["--notes", str(tmp_path)]) == 0
    assert path.read_text() == text
    row["error_sig"] = "NotImplementedError: Subtraction of two bools"
    assert findings_triggers(["--notes", str(tmp_path), "--check"]) == 1
    assert findings_triggers(["--notes", str(tmp_path)]) == 0
    assert load_notes(tmp_path)["F99-x"].triggers[0].error_sig == row["error_sig"]


# ---- the schema's one-line errors --------------------------------------------------------------

def _note(tmp_path: Path, triggers: str, name: str = "F99-x.md") -> Path:
    (tmp_path / "g.gir").write_text("graph main(%x: f32[2]) {\n  %y = atan(%x) : f32[2]\n"
                                    "  return %y\n}\n")
    path = tmp_path / name
    path.write_text(_HEAD + textwrap.dedent(triggers) + "---\nbody\n")
    return path


@pytest.mark.parametrize("triggers,message", [
    ("triggers: {graph: g.gir}\n", "triggers: expected a list of entries, got dict"),
    ("triggers:\n- g.gir\n", "triggers[0]: expected a mapping (graph, backend, verdict, ...), "
                            "got str"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: crash, stag: x}\n",
     "triggers[0].stag: unknown field (known: graph, backend, verdict, stage, error_sig, config, "
     "target, inputs, grad, dynshape, transform)"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, grad: y}\n",
     "triggers[0].grad: 'y' is not an input or param of g.gir"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, grad: x x}\n",
     "triggers[0].grad: 'x x' is not distinct leaf names, space-separated"),
    ("triggers:\n- {graph: g.gir, verdict: crash}\n", "triggers[0].backend: missing"),
    ("triggers:\n- {graph: h.gir, backend: tvm, verdict: crash}\n",
     "triggers[0].graph: no such file 'h.gir' under {dir}"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: crashed}\n",
     "triggers[0].verdict: 'crashed' is not one of crash, signal, timeout, mismatch, recompile"),
    ("triggers:\n- {graph: g.gir, backend: inductor, verdict: recompile, stage: run, "
     "error_sig: 'Recompile: x'}\n",
     "triggers[0].verdict: a recompile needs several shapes (`dynshape`)"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, dynshape: other.json}\n",
     "triggers[0].dynshape: 'other.json' is not the dynamic shapes of g.gir: ExprError: symbol "
     "L is not a dim of any graph input"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: crash, stage: import}\n",
     "triggers[0].error_sig: missing (a crash keys on it)"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, stage: compare}\n",
     "triggers[0].stage: given, but a mismatch keys on its graph's op pattern"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, config: b=1&a=2}\n",
     "triggers[0].config: 'b=1&a=2' is not canonical (write 'a=2&b=1')"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, config: 3}\n",
     "triggers[0].config: expected text, got int 3"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, transform: other.json}\n",
     "triggers[0].transform: no arrays 'other.npz' beside it"),
    ("triggers:\n- {graph: g.gir, backend: tvm, verdict: mismatch, transform: t.json, grad: x}\n",
     "triggers[0].transform: given with grad (a transform test draws its own leaves)"),
])
def test_a_wrong_trigger_is_a_one_line_error(tmp_path, triggers, message):
    path = _note(tmp_path, triggers)
    (tmp_path / "other.json").write_text(  # the dims of another graph's input
        '{"symbols": {"L": "seq"}, "dims": {"y0": ["L"]}, "assignments": [{"L": 2}], '
        '"set_assignment": [0]}')
    (tmp_path / "t.json").write_text("{}")  # a transform spec, with its arrays
    (tmp_path / "t.npz").write_bytes(b"")
    with pytest.raises(NotesError) as e:
        parse_note(path, path.read_text())
    assert str(e.value) == f"{path}: {message.format(dir=tmp_path)}"


def test_a_triggers_inputs_hold_one_set_or_several(tmp_path):
    import numpy as np

    from campaign.triage.pipeline.note_runs import trigger_sets

    one, several = tmp_path / "one.npz", tmp_path / "several.npz"
    np.savez(one, x=np.zeros(2, np.float32))
    np.savez(several, **{"s1/x": np.ones(2, np.float32), "s0/x": np.zeros(2, np.float32),
                         "s2/x": np.full(2, 2.0, np.float32)})
    got = trigger_sets(NoteTrigger("g.gir", "tvm", "crash", inputs="one.npz"), tmp_path, None)
    assert [sorted(s) for s in got] == [["x"]]
    got = trigger_sets(NoteTrigger("g.gir", "tvm", "crash", inputs="several.npz"), tmp_path,
                       None)
    assert [float(s["x"][0]) for s in got] == [0.0, 1.0, 2.0]


def test_replace_triggers_keeps_every_other_line_and_reads_back(tmp_path):
    path = _note(tmp_path, "")
    text = path.read_text()
    t = NoteTrigger("g.gir", "tvm", "crash", "import",
                    "TypeError: it's 'quoted': # not a comment @ a.b < c.d", "a=1&b=x")
    m = NoteTrigger("g.gir", "buggy_backends:WrongOnOp?op=atan", "mismatch")
    once = replace_triggers(text, (t, m))
    assert parse_note(path, once).triggers == (t, m)
    assert once.replace("".join(once.partition("triggers:\n")[1:]), "") != once
    assert once.startswith(text.split("---\nbody")[0])
    twice = replace_triggers(once, (m,))
    assert parse_note(path, twice).triggers == (m,)
    assert replace_triggers(twice, ()) == text


# ---- a campaign knows the notes' bugs ----------------------------------------------------------

def _notes_with_triggers(tmp_path: Path) -> Path:
    """A notes dir with one note: a mismatch of WRONG (atan) and a crash of PATTERN (relu ->
    add, rank 3 as the campaign's graph: the message quotes it), their fields written by the
    command from runs of the graphs."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "graphs").mkdir()
    (notes / "graphs" / "atan.gir").write_text(
        "graph main(%x: f32[2]) {\n  %y = atan(%x) : f32[2]\n  return %y\n}\n")
    (notes / "graphs" / "relu_add.gir").write_text(
        "graph main(%x0: f32[2,3,5], %w1: f32[2,3,5]) {\n  %v2 = relu(%x0) : f32[2,3,5]\n"
        "  %v3 = add(%v2, %w1) : f32[2,3,5]\n  return %v3\n}\n")
    (notes / "F98-two_bugs.md").write_text(_HEAD + "---\n")
    for graph, spec in (("graphs/atan.gir", WRONG), ("graphs/relu_add.gir", PATTERN)):
        assert findings_triggers(["F98", "--notes", str(notes), "--add", graph,
                                  "--backend", spec]) == 0
    assert findings_triggers(["--notes", str(notes), "--check"]) == 0
    return notes


def test_a_campaign_on_a_fresh_clone_knows_the_notes_bugs(tmp_path):
    notes = _notes_with_triggers(tmp_path)
    (trig_m, trig_c) = load_notes(notes)["F98-two_bugs"].triggers
    assert trig_m.verdict == "mismatch" and trig_c.verdict == "crash"
    out = campaign_dir(tmp_path / "run", [WRONG, PATTERN], [_case(f"a-{i}", i) for i in range(2)])
    cfg = TriageConfig(max_tests=150, budget="5m", check_repro=False, db="off",
                       findings=str(notes))
    rep = triage(out, cfg, log=lambda s: None)
    assert rep.reductions == 0
    rows = pq.read_table(out / "bugs.parquet").to_pylist()
    assert {r["backend"] for r in rows} == {WRONG, PATTERN}
    assert all(r["finding"] == "F98-two_bugs" and r["new"] is False for r in rows)
    assert "known F98:" in rep.text()
    reports = [f.read_text() for f in (out / "bugs").glob("*/report.md")]
    assert reports and all(r.startswith("> **Known bug**: docs/findings/F98-two_bugs.md")
                           for r in reports)
    # without the notes, the same output is new and reduced
    off = triage(out, TriageConfig(max_tests=150, budget="5m", check_repro=False, db="off",
                                   findings=""), log=lambda s: None)
    assert off.reductions >= 1
    assert all(r["new"] and r["finding"] is None
               for r in pq.read_table(out / "bugs.parquet").to_pylist())


#: PATTERN's crash in another form: the consumer's value names differ, so its message (and its
#: bucket) does too, but not its cause signature (names stripped)
RENAMED = """graph main(%a: f32[2,3,5], %b: f32[2,3,5]) {
  %r = relu(%a) : f32[2,3,5]
  %out = add(%r, %b) : f32[2,3,5]
  return %out
}"""


def test_a_notes_cause_in_another_form_is_known_and_not_reduced(tmp_path):
    notes = _notes_with_triggers(tmp_path)
    trigger = load_notes(notes)["F98-two_bugs"].triggers[1]
    out = campaign_dir(tmp_path / "run", [PATTERN], [_case("a-0", 0, RENAMED)])
    cfg = TriageConfig(max_tests=150, budget="5m", check_repro=False, db="off",
                       findings=str(notes))
    rep = triage(out, cfg, log=lambda s: None)
    rows = pq.read_table(out / "bugs.parquet").to_pylist()
    assert len(rows) == 1 and rows[0]["error_sig"] != trigger.error_sig  # another bucket
    assert "%out = add(%r)" in rows[0]["error_sig"], rows[0]["error_sig"]
    assert rep.reductions == 0
    assert rows[0]["finding"] == "F98-two_bugs" and rows[0]["new"] is False
    # reduce_known (reduce what is known too): the same output is reduced
    again = triage(out, replace(cfg, reduce_known=True), log=lambda s: None)
    assert again.reductions == 1


def test_the_notes_triggers_hold_back_and_the_database_stays_on_top(tmp_path):
    from campaign.triage.bugdb.store import Bug, BugDb

    notes = _notes_with_triggers(tmp_path)
    held = note_triggers(notes)
    assert {t.backend for t in held} == {WRONG, PATTERN}
    assert all(t.sigs for t in held)
    db = BugDb.open(tmp_path / "db")
    keys = {k.key.backend: k.key for k in note_keys(notes)}

    def fixed(bugs):
        k = keys[WRONG]
        bugs["F98"] = Bug("F98", "fixed", buckets=[{
            "bucket": k.id, "backend": k.backend, "target": k.target, "verdict": k.verdict,
            "stage": k.stage, "error_sig": k.error_sig, "pattern": k.pattern,
            "backend_config": k.config, "kind": "bug"}])

    db.update(fixed)
    assert {t.backend for t in note_triggers(notes, tmp_path / "db")} == {PATTERN}


def test_a_notes_bucket_joins_the_notes_bug_in_the_database(tmp_path):
    from campaign.triage.bugdb.findings_import import import_findings
    from campaign.triage.bugdb.sightings import record
    from campaign.triage.bugdb.store import BugDb

    def row(bucket: str, finding: str | None) -> dict:
        return {"bucket": bucket, "backend": "tvm", "target": "cpu", "verdict": "crash",
                "stage": "import", "error_sig": f"E: {bucket}", "pattern": None,
                "backend_config": "", "kind": "bug", "count": 2, "first_seen": None,
                "artifact_path": None, "repro": None, "reduced_insts": None,
                "finding": finding}

    notes = _notes_with_triggers(tmp_path)
    db = BugDb.open(tmp_path / "db")
    rows = [row("tvm-crash-a", "F98-two_bugs"), row("tvm-crash-b", "F97-other"),
            row("tvm-crash-c", None)]
    done = record(db, tmp_path / "run", rows, versions=lambda b: [])
    bugs = db.read()
    assert bugs["F97-other"].status == "known" and bugs["F97-other"].bucket_ids == ["tvm-crash-b"]
    assert bugs["F98-two_bugs"].status == "known"
    assert bugs["tvm-crash-c"].status == "new"
    assert set(done.known) == {"F97-other", "F98-two_bugs"} and set(done.new) == {"tvm-crash-c"}
    # a note imported first: the bucket joins it, its status stays the note's
    db2 = BugDb.open(tmp_path / "db2")
    import_findings(db2, notes)
    record(db2, tmp_path / "run", rows[:1], versions=lambda b: [])
    assert db2.read()["F98-two_bugs"].bucket_ids == ["tvm-crash-a"]
    assert db2.read()["F98-two_bugs"].status == "known"
