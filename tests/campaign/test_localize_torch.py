"""Localization (docs/triage.md, "Where the fault is"): torch.compile's plan (stages, torch's
CompilerBisector, the smallest configuration) and the torch.onnx exporter's (its steps, the
optimizer's passes), run by `repro.py --localize` on real compilers and small known-bad
graphs from docs/bugs and docs/findings.

Each test builds a bug folder from GraphIR text (its repro.py as the triage writes it; the
compiler is not run to build it) and checks `localize_folder`'s culprit. Inductor compiles
take 5-30 s each: the stage tests run by default, the CompilerBisector and flags tests are
slow."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ir
from campaign.testcase import TestCase, npz_bytes
from campaign.triage.pipeline.localization import localize_folder
from campaign.triage.pipeline.reduction import FindingCase, Reduction
from campaign.triage.pipeline.repro import write_bug_folder
from ir.numerics.input_search import make_valid


def _folder(tmp_path: Path, spec: str, text: str, row: dict[str, Any],
            expected_delta: float = 0.0) -> Path:
    """The bug folder of `text` on backend `spec`, claiming the failure `row` (verdict,
    stage, error_class); the expected outputs are the torch eager reference, shifted by
    `expected_delta`."""
    from campaign.artifacts import Materialized
    from campaign.reference import run_reference

    g = ir.verify(ir.parse(text))
    valid = make_valid(g, 0)
    assert valid is not None
    tc = TestCase("t", 0, g, valid.search.values, [{"seed": 0}])
    ref = run_reference(Materialized(tc)).outputs
    assert ref is not None
    expected = {f"out{i}": o + np.asarray(expected_delta, o.dtype) for i, o in enumerate(ref)}
    case = FindingCase(tmp_path, {"backend": spec, "verdict": row["verdict"]}, g, tc.values, [])
    red = Reduction(case, "reduced", g, tc.values, [], row,
                    {"expected.npz": npz_bytes(expected)}, tc)
    dest = tmp_path / "bug"
    written = write_bug_folder(dest, spec, "x", {"verdict": row["verdict"]}, red, 0)
    assert written["repro"], written
    if expected_delta:
        (dest / "truth.npz").unlink(missing_ok=True)
    return dest


MISMATCH = {"verdict": "mismatch", "stage": "compare", "error_class": "Mismatch"}


def _ablation(loc) -> str:
    return "\n".join(f"{s.what}: {s.outcome}" for s in loc.steps) + f"\n-> {loc.text}"


def test_a_shifted_reference_fails_without_the_compiler_and_is_not_localized(tmp_path):
    """Negative: expected.npz shifted, so every stage fails the same way, torch eager itself
    included: no stage of the compiler is named."""
    dest = _folder(tmp_path, "inductor", """graph main(%x0: f32[3,4]) {
  %v1 = tanh(%x0) : f32[3,4]
  return %v1
}""", MISMATCH, expected_delta=1.0)
    loc = localize_folder(dest, budget_s=300)
    assert loc.culprit is None, _ablation(loc)
    assert loc.why == ("it fails the same way without torch.compile (this program run eagerly): "
                       "no stage of the compiler is at fault; torch eager itself computes it so, "
                       "or the reference (expected.npz, with no float64 truth beside it) is not "
                       "what torch computes here"), _ablation(loc)
    assert [s.values for s in loc.steps] == [{}, {"COMPILER": "none"}]


@pytest.mark.parametrize("spec", [pytest.param("inductor", marks=pytest.mark.slow),
                                  "aot_eager"])
def test_a_write_aot_autograd_loses_is_localized_at_the_aot_eager_stage(tmp_path, spec):
    """F42 (docs/findings): sigmoid_ on a 0-d float64 input, the input returned; eager and
    backend='eager' are right, 'aot_eager' loses the write (on the aot_eager backend itself
    that is the run that failed)."""
    dest = _folder(tmp_path, spec, """graph main(%x0: f64[], %x1: f32[3]) {
  %v0 = sigmoid_(%x0) : f64[]
  %v1 = tanh(%x1) : f32[3]
  return %x0, %v1
}""", MISMATCH)
    loc = localize_folder(dest, budget_s=400)
    assert loc.culprit == "aot_eager: AOT autograd (functionalization, the joint graph)", \
        _ablation(loc)
    assert [(s.values, s.outcome) for s in loc.steps[1:]] == [
        ({"COMPILER": "none"}, "passes"), ({"COMPILER": "eager"}, "passes"),
        ({"COMPILER": "aot_eager"}, "fails the same way")][:3 if spec == "inductor" else 2]


@pytest.mark.parametrize("finding,culprit,runs", [
    pytest.param("F38", "torch: torch.while_loop run eagerly (its autograd rule or eager "
                 "forward)", 2, marks=pytest.mark.slow),  # the same step as F32's, 18 s
    ("F32", "torch: torch.cond run eagerly (its autograd rule or eager forward)", 1),
])
def test_a_higher_order_ops_own_autograd_is_named_when_eager_fails_alike(tmp_path, finding,
                                                                          culprit, runs):
    """F38 (aot_eager: a zero-trip while_loop's gradient) and F32 (the eager hop-dialect
    backend: torch.cond with a bool output beside a float one), from their notes' triggers:
    run eagerly, the program fails the same way, the reference ran Python control flow and
    the one higher-order op the program calls is named (F32's repro runs eagerly already: no
    second run)."""
    from campaign.triage.pages.notes import load_notes
    from campaign.triage.pipeline.note_known import ROOT
    from campaign.triage.pipeline.note_runs import trigger_folder
    from campaign.triage.pipeline.repro import check_repro

    notes = ROOT / "docs" / "findings"
    trigger = next(n for n in load_notes(notes).values() if n.bug.startswith(f"{finding}-")
                   ).triggers[0]
    dest, why = trigger_folder(trigger, notes, tmp_path / finding)
    assert dest is not None, why
    outcome, out = check_repro(dest, trigger.verdict, None, 300)
    assert outcome == "reproduced", out
    loc = localize_folder(dest, budget_s=300)
    assert loc.culprit == culprit, _ablation(loc)
    assert len(loc.steps) == runs, _ablation(loc)


# F46 (docs/findings): aten_bitwise_or_scalar with a SymInt, a loop's counter (a Python int in
# the `scalars=number` form) or-ed into its int64 carry (lead L3's graph, reduced by hand)
BITWISE_OR_COUNTER = """graph main(%x0: i64[], %x1: i64[2]) {
  %v2 = loop(%x0, %x1) : i64[2] {
    graph body(%i3: i64[], %b4: i64[2]) {
      %v5 = bitwise_or(%b4, %i3) : i64[2]
      return %v5
    }
  }
  return %v2
}"""


@pytest.mark.slow
def test_the_exporter_fails_in_its_onnx_translation(tmp_path):
    """F46: torch.export and the decompositions run right; the ONNX translation fails."""
    row = {"verdict": "crash", "stage": "import", "error_class": "GraphConstructionError"}
    dest = _folder(tmp_path, "onnx_export?scalars=number", BITWISE_OR_COUNTER, row)
    loc = localize_folder(dest, budget_s=400)
    assert loc.culprit == "torch.onnx: ONNX translation", _ablation(loc)
    assert [(s.values, s.outcome) for s in loc.steps[1:]] == [
        ({"UNTIL": "export"}, "passes"), ({"UNTIL": "decompositions"}, "passes"),
        ({"UNTIL": "translation"}, "fails the same way")]  # the import's crash: no ORT step


# F22 (docs/bugs/inductor_cond_conv_layout.py): a conv2d's result as a torch.cond operand
COND_CONV = """graph main(%x0: f32[1,3,1,1], %x1: b8[], %w2: param f32[8,3,2,1]) {
  %v3 = conv2d[stride=[1,1], padding=[1,1], dilation=[1,1], groups=1](%x0, %w2) : f32[1,8,2,3]
  %v4 = if(%x1, %v3) : f32[1,8,1,1] {
    graph then(%b5: f32[1,8,2,3]) {
      %v6 = maxpool2d[kernel=[2,2], stride=[2,2], padding=[0,0]](%b5) : f32[1,8,1,1]
      return %v6
    }
    graph else(%b7: f32[1,8,2,3]) {
      %v8 = maxpool2d[kernel=[1,3], stride=[2,1], padding=[0,0]](%b7) : f32[1,8,1,1]
      return %v8
    }
  }
  return %v4
}"""


@pytest.mark.slow
def test_the_compiler_bisector_names_layout_optimization_for_a_conv_into_cond(tmp_path):
    """F22: only Inductor fails (a stride assertion); CompilerBisector's config change
    layout_optimization=False makes it pass."""
    row = {"verdict": "crash", "stage": "compile", "error_class": "AssertionError"}
    dest = _folder(tmp_path, "inductor?dialect=hop", COND_CONV, row)
    loc = localize_folder(dest, budget_s=900)
    assert loc.culprit == "inductor: layout_optimization", _ablation(loc)


# F28 (docs/bugs/inductor_cpp_wrapper_reverse_scan.py): a reverse scan returning its carry
REVERSE_SCAN = """graph main(%x0: i64[], %x1: i64[1]) {
  %v2, %v3 = scan[num_carries=1, reverse=true](%x0, %x1) : i64[], i64[1] {
    graph body(%b4: i64[], %b5: i64[]) {
      return %b4, %b4
    }
  }
  return %v3
}"""


@pytest.mark.slow
def test_a_cpp_wrapper_bug_is_localized_to_the_cpp_wrapper_option(tmp_path):
    """F28: the C++ wrapper alone is needed, no subsystem of the bisector is at fault."""
    row = {"verdict": "crash", "stage": "compile", "error_class": "InductorError"}
    dest = _folder(tmp_path, "inductor?dialect=hop&cpp_wrapper=true", REVERSE_SCAN, row)
    loc = localize_folder(dest, budget_s=1200)
    assert loc.culprit == "inductor: cpp_wrapper", _ablation(loc)
    assert loc.steps[-1].values == {"CPP_WRAPPER": False}


# F13 (docs/findings): a while_loop whose body holds a cond; onnx_ir's InlinePass raises a
# PassError in the opset conversion 18 -> 20 (onnxscript's version_converter)
LOOP_WITH_COND = """graph main(%x0: i64[], %x1: f32[3], %x2: f32[]) {
  %v3, %v14 = loop(%x0, %x1, %x2) : f32[3], f32[] {
    graph body(%i4: i64[], %b5: f32[3], %b13: f32[]) {
      %v6 = reduce_sum[axis=0, keepdim=false](%b5) : f32[]
      %v7 = gt(%v6, %b13) : b8[]
      %v8 = if(%v7, %b5) : f32[3] {
        graph then(%b9: f32[3]) {
          %v10 = neg(%b9) : f32[3]
          return %v10
        }
        graph else(%b11: f32[3]) {
          %v12 = abs(%b11) : f32[3]
          return %v12
        }
      }
      return %v8, %b13
    }
  }
  return %v3
}"""


@pytest.mark.slow
def test_the_exporter_pass_at_fault_in_the_opset_conversion_is_named(tmp_path):
    """F13: export, decompositions and translation pass; the opset conversion fails, and
    switching off onnx_ir's InlinePass alone makes it pass."""
    row = {"verdict": "crash", "stage": "import", "error_class": "PassError"}
    dest = _folder(tmp_path, "onnx_export?dialect=hop", LOOP_WITH_COND, row)
    loc = localize_folder(dest, budget_s=600)
    assert loc.culprit == "torch.onnx: opset conversion: onnx_ir InlinePass", _ablation(loc)
    assert loc.steps[-1].values == {"SKIP_PASSES": ["InlinePass"]}
    assert loc.steps[-1].outcome == "passes"
