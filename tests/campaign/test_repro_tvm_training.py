"""The repro.py of a TVM gradient test trains as the `tvm` backend does (issue 30 point 5): the
ONNX model with its leaf params as inputs, the loss over the fixed cotangents,
`relax.transform.Gradient`, compile and run of `loss_adjoint` (campaign/backends/tvm/relax_training.py,
the backend's own code), judged outputs then gradients. Real TVM gradient bugs of
docs/findings reproduce from their bug folders; a test TVM trains right does not; the
localization names the Gradient pass when the compile stops inside it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ir
from campaign.testcase import TestCase, npz_bytes
from campaign.triage.pipeline.reduction import FindingCase, Reduction
from campaign.triage.pipeline.repro import check_repro, write_bug_folder
from ir.materialize.grad import GradSpec
from ir.numerics.grad import draw_grad
from ir.numerics.values import random_values

#: docs/findings F34 (docs/bugs/tvm_gradient_conv2d_dilation.py): conv2d's registered gradient
#: ignores the dilation, so x0's gradient comes back 8x8 for a 7x7 input, silently
F34 = """graph main(%x0: f32[1,1,7,7], %w1: param f32[1,1,2,2]) {
  %v2 = conv2d[stride=[2,2], padding=[0,0], dilation=[2,2], groups=1](%x0, %w1) : f32[1,1,3,3]
  return %v2
}"""

#: docs/findings F35 (docs/bugs/tvm_gradient_triu_offset_arg.py): triu's registered gradient
#: returns one partial for its two arguments, and the Gradient pass fails its own check
F35 = """graph main(%x0: f32[3,3]) {
  %v1 = triu[k=0](%x0) : f32[3,3]
  %v2 = tanh(%v1) : f32[3,3]
  return %v2
}"""
F35_ROW = {"verdict": "crash", "stage": "compile", "error_class": "InternalError",
           "error_sig": "InternalError: Check failed: (partials.size() == call->args.size()) is "
                        "false: partials number != inputs number"}

#: a linear layer TVM trains right (leaves: an input and both params)
LINEAR = """graph main(%x0: f32[3,4], %w1: param f32[5,4], %b2: param f32[5]) {
  %v3 = linear(%x0, %w1, %b2) : f32[3,5]
  %v4 = tanh(%v3) : f32[3,5]
  return %v4
}"""


def grad_folder(tmp_path: Path, text: str, leaves: tuple[str, ...], row: dict[str, Any],
                spec: str = "tvm", expected: list[np.ndarray] | None = None) -> Path:
    """The bug folder of the gradient test of `text` (these leaves, drawn cotangents) on
    backend `spec` as the triage writes it, for a failing `row`; `expected`: the reference
    outputs and gradients to write instead of eager's."""
    g = ir.verify(ir.parse(text))
    values = random_values(g, 0)
    drawn = draw_grad(g, 0, [g])
    assert drawn is not None
    grad = GradSpec(leaves, drawn.cotangents)
    tc = TestCase("t", 0, g, values, [{"seed": 0}], grad=grad)
    files = {} if expected is None else {
        "expected.npz": npz_bytes({f"out{i}": o for i, o in enumerate(expected)})}
    case = FindingCase(tmp_path, {"backend": spec, "verdict": row["verdict"]}, g, values, [],
                       grad=grad)
    red = Reduction(case, "reduced", g, values, [], row, files, tc)
    dest = tmp_path / "bug"
    written = write_bug_folder(dest, spec, f"tvm-{row['verdict']}-x",
                               {"verdict": row["verdict"], "stage": row["stage"]}, red, 0)
    assert written["repro"], written
    src = (dest / "repro.py").read_text()
    assert "def train_relax(" in src and "\nGRADIENTS = True\n" in src
    assert f"\nLEAVES = {list(leaves)!r}\n" in src
    return dest


def test_f34_dilated_conv2d_gradient_reproduces_and_is_the_gradient_pass(tmp_path):
    """A silent wrong gradient (mismatch): the script trains, and x0's gradient has the wrong
    shape, as in the campaign. The localization reads the adjoint's declared types: the
    Gradient pass typed x0's gradient unlike x0, its own error, after one recording run."""
    from campaign.triage.pipeline.localization import localize_folder

    row = {"verdict": "mismatch", "stage": "compare", "error_class": "Mismatch",
           "error_sig": "Mismatch: grad %x0"}
    folder = grad_folder(tmp_path, F34, ("x0", "w1"), row)
    outcome, out = check_repro(folder, "mismatch", "Mismatch")
    assert outcome == "reproduced", out
    assert "REPRODUCED: mismatch: grad %x0: float32[1, 1, 8, 8], expected float32[1, 1, 7, 7]" \
        in out, out
    loc = localize_folder(folder, budget_s=300)
    assert loc.culprit == "tvm: relax.transform.Gradient", (loc.text, loc.table())
    assert "declares the gradient of %x0 as R.Tensor((1, 1, 8, 8)" in loc.why, loc.why
    assert "and %x0 is R.Tensor((1, 1, 7, 7)" in loc.why, loc.why
    assert len(loc.steps) == 2, loc.table()  # as it failed; the types recorded


@pytest.mark.slow
def test_a_gradient_test_tvm_trains_right_is_not_reproduced(tmp_path):
    """The expected outputs and gradients are TVM's own: nothing to reproduce."""
    from campaign.artifacts import Materialized
    from campaign.backends import make_backend

    g = ir.verify(ir.parse(LINEAR))
    drawn = draw_grad(g, 0, [g])
    assert drawn is not None
    tc = TestCase("t", 0, g, random_values(g, 0), [{"seed": 0}],
                  grad=GradSpec(("x0", "w1", "b2"), drawn.cotangents))
    result = make_backend("tvm").evaluate(Materialized(tc))
    assert not result.failed and result.outputs is not None, result.error_msg
    assert len(result.outputs) == 4  # the output, then three gradients
    row = {"verdict": "mismatch", "stage": "compare", "error_class": "Mismatch",
           "error_sig": "Mismatch: grad %w1"}
    folder = grad_folder(tmp_path, LINEAR, ("x0", "w1", "b2"), row, expected=result.outputs)
    outcome, out = check_repro(folder, "mismatch", "Mismatch")
    assert outcome == "not reproduced", out


@pytest.mark.slow
def test_f35_triu_gradient_reproduces_and_is_the_gradient_pass(tmp_path):
    """A crash inside relax.transform.Gradient (stage compile) reproduces, and the
    localization names the pass after two runs (as it failed; the pass log)."""
    from campaign.triage.pipeline.localization import localize_folder

    folder = grad_folder(tmp_path, F35, ("x0",), F35_ROW, spec="tvm?opt_level=2")
    outcome, out = check_repro(folder, "crash", "InternalError")
    assert outcome == "reproduced", out
    assert "partials number != inputs number" in out, out
    loc = localize_folder(folder, budget_s=300)
    assert loc.culprit == "tvm: relax.transform.Gradient", (loc.text, loc.table())
    assert len(loc.steps) == 2, loc.table()


def test_localization_names_the_gradient_pass_when_the_compile_stops_inside_it(monkeypatch):
    """On a stand-in probe: a gradient test's compile that stops inside `Gradient` (the pass
    log's entry for the differentiation) blames it after one logged run; one that stops
    before it (making the loss) names nothing; one that stops in the build goes on to the
    usual plan, where `Gradient` is no candidate."""
    from campaign.backends.repro_scripts.localize import PASSES, SAME
    from campaign.backends.tvm import relax

    class Probe:
        def __init__(self, log: list[str]):
            self.log, self.runs = log, []
            self.deadline, self.run_limit_s = float("inf"), None

        def __call__(self, what: str, **values: Any) -> str:
            return self.run(what, values)

        def run(self, what: str, values: dict[str, Any], env: dict[str, str] | None = None):
            self.runs.append(values)
            if env and relax.PASS_LOG_ENV in env:
                Path(env[relax.PASS_LOG_ENV]).write_text("\n".join(self.log) + "\n")
            if env and relax.GRAD_TYPES_ENV in env:
                Path(env[relax.GRAD_TYPES_ENV]).write_text("[]")
            return PASSES if "FuseOps" in values.get("DISABLED_PASS", []) else SAME

    monkeypatch.setattr(relax, "GRADIENTS", True)
    monkeypatch.setitem(relax.EXPECT, "stage", "compare")  # gradients typed as their leaves
    probe: Any = Probe(["0 Gradient", "0 /Gradient", "0 _pipeline", "1 FuseOps", "1 /FuseOps"])
    culprit, why = relax.ablate_relax(probe, "ONNX frontend (from_onnx)")
    assert culprit == "tvm: relax.transform.FuseOps", why
    monkeypatch.setitem(relax.EXPECT, "stage", "compile")
    probe = Probe(["0 Gradient"])
    culprit, why = relax.ablate_relax(probe, "ONNX frontend (from_onnx)")
    assert culprit == "tvm: relax.transform.Gradient" and "differentiates" in why
    assert probe.runs == [{"OPT_LEVEL": relax.OPT_LEVEL}]
    probe = Probe([])  # the loss failed: nothing began
    culprit, why = relax.ablate_relax(probe, "ONNX frontend (from_onnx)")
    assert culprit is None and "before relax.transform.Gradient" in why and len(probe.runs) == 1
    probe = Probe(["0 Gradient", "0 /Gradient", "0 _pipeline", "1 FuseOps", "1 /FuseOps",
                   "1 StaticPlanBlockMemory"])
    culprit, why = relax.ablate_relax(probe, "ONNX frontend (from_onnx)")
    assert culprit == "tvm: relax.transform.FuseOps", why
    assert not any("Gradient" in v.get("DISABLED_PASS", []) for v in probe.runs)
