"""Dynamic-shape findings in the triage (docs/dynshape.md, docs/triage.md): a recompile is named
by the torch code whose guard failed (`shape_guards.recompile_cause`), a dynamic-shape bug
folder's repro.py runs every shape on one model (TVM: the ONNX model with `dim_param`s; torch:
the program computing its shapes from its inputs' sizes) and reproduces, its localization names
the stage, and the triage confirms such a finding without reducing it. On real compilers, with
the notes' triggers of F14 (TVM's ONNX Expand) and F18 (torch's max_pool1d specialization)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign.backends.inductor.shape_guards import AddedGuard, recompile_cause
from campaign.triage.pages.notes import load_notes
from campaign.triage.pipeline.localization import localize_folder
from campaign.triage.pipeline.note_known import ROOT
from campaign.triage.pipeline.note_runs import trigger_folder
from campaign.triage.pipeline.repro import check_repro

NOTES = ROOT / "docs" / "findings"


def _trigger(finding: str):
    """The note's first dynamic-shape trigger (F14's: Expand of a bare symbol's dim)."""
    (note,) = [n for n in load_notes(NOTES).values() if n.bug.startswith(f"{finding}-")]
    return next(t for t in note.triggers if t.dynshape is not None)


# ---- the cause of a recompile ----------------------------------------------------------------

def test_a_failing_symbolic_guard_names_the_function_that_added_it():
    reason = ("0/0: (5 % x.size()[3]) != 0  # return x.reshape(w, 5 * h).sin()  # m.py:15 in f "
              "(_refs/__init__.py:3971 in _reshape_view_helper_core_alg)")
    sig, detail = recompile_cause([reason], [])
    assert sig == "Recompile: a shape guard of _reshape_view_helper_core_alg (_refs/__init__.py)"
    assert detail.startswith("the guard `(5 % x.size()[3]) != 0` was added by "
                             "_refs/__init__.py:3971 in _reshape_view_helper_core_alg")


def test_a_size_mismatch_names_the_function_that_specialized_the_size():
    added = [AddedGuard("Ne(s0, 1)", "", "a.py", 1, "other"),
             AddedGuard("Eq(s53, 7)", "", "b.py", 2, "not_this_one"),
             AddedGuard("Eq(s53, 6)", "y = F.max_pool1d(x, 2)", "nn/functional.py", 747,
                        "_max_pool1d")]
    sig, detail = recompile_cause(
        ["0/0: tensor 'x' size mismatch at index 2. expected 6, actual 9"], added)
    assert sig == "Recompile: a size specialized by _max_pool1d (nn/functional.py)"
    assert "Eq(s53, 6) was added by nn/functional.py:747 in _max_pool1d" in detail


def test_a_recompile_without_a_recorded_reason_says_so():
    assert recompile_cause([], [])[0] == "Recompile: no guard failure recorded"
    sig, _ = recompile_cause(["0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4"],
                             [])
    assert sig == "Recompile: a size specialized (no guard added names where)"


# ---- bug folders of dynamic-shape findings, on real compilers ---------------------------------

def test_a_dynamic_shape_crash_on_tvm_reproduces_from_its_dynamic_model(tmp_path):
    folder, why = trigger_folder(_trigger("F14"), NOTES, tmp_path / "F14")
    assert folder is not None, why
    dyn = json.loads((folder / "dynshape.json").read_text())
    assert dyn["symbols"] == {"L": "seq"} and len(list(folder.glob("inputs_set*.npz"))) == 3
    outcome, tail = check_repro(folder, "crash", "AttributeError", 300)
    assert outcome == "reproduced", tail
    assert "'Var' object has no attribute 'value'" in tail
    loc = localize_folder(folder, 300)
    assert loc.culprit == "tvm: ONNX frontend (from_onnx)", loc.why


def test_a_recompile_repro_names_the_guard_that_failed(tmp_path):
    folder, why = trigger_folder(_trigger("F18"), NOTES, tmp_path / "F18")
    assert folder is not None, why
    src = (folder / "repro.py").read_text()
    assert "        L = x0.size(2)\n" in src and "DYNAMIC_DIMS = [[2]]" in src
    outcome, tail = check_repro(folder, "recompile", "Recompile", 300)
    assert outcome == "reproduced", tail
    assert ("REPRODUCED: recompile: Recompile: a size specialized by _max_pool1d "
            "(nn/functional.py): compiled again for input set 1 (L=9)") in tail


@pytest.mark.slow  # four runs of the script, each a torch.compile
def test_a_recompile_is_localized_to_the_stage_that_adds_the_guard(tmp_path):
    folder, why = trigger_folder(_trigger("F18"), NOTES, tmp_path / "F18")
    assert folder is not None, why
    loc = localize_folder(folder, 600)
    assert loc.culprit == "dynamo: a size specialized by _max_pool1d (nn/functional.py)", loc.why
    assert [s.what for s in loc.steps][:3] == [
        "as it failed (the configuration the triage found)",
        "no torch.compile (COMPILER=none: run eagerly)", "COMPILER=eager"]


def test_the_triage_confirms_a_dynamic_shape_finding_and_does_not_reduce_it(tmp_path):
    from campaign.triage.config import TriageConfig
    from campaign.triage.pipeline.buckets import read_bugs_table
    from campaign.triage.pipeline.campaign_triage import triage

    finding, why = trigger_folder(_trigger("F14"), NOTES, tmp_path / "finding")
    assert finding is not None, why
    out = tmp_path / "triaged"
    triage(finding, TriageConfig(localize=False, findings=""), out=out, log=lambda s: None)
    (row,) = read_bugs_table(out / "bugs.parquet").to_pylist()
    assert row["verdict"] == "crash" and row["repro_status"] == "reproduced"
    assert row["reduced_insts"] is None
    info = json.loads((out / row["artifact_path"] / "info.json").read_text())
    assert info["status"] == "confirmed"
    assert info["note"] == "a dynamic-shape test: confirmed, not reduced"
    assert (out / row["artifact_path"] / "dynshape.json").is_file()


@pytest.fixture(autouse=True)
def _no_stray_inductor_cache(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
