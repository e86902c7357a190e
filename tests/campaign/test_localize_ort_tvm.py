"""The localization plans of ONNX Runtime (campaign/backends/ort/repro.py) and TVM Relax
(campaign/backends/tvm/relax.py), on real compilers and small known-bad graphs of docs/bugs: each bug
folder's `repro.py --localize` (`localize_folder`) must name the culprit a run showed, or say
honestly why it names none."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ir
from campaign.backends.ort import ORT_BODIES
from campaign.testcase import TestCase, npz_bytes
from campaign.triage.pipeline.localization import Localization, localize_folder
from campaign.triage.pipeline.reduction import BackendRunner, FindingCase, Reduction
from campaign.triage.pipeline.repro import write_bug_folder
from ir.numerics.input_search import make_valid

#: F12 (docs/bugs/ort_transpose_pad_axes.py): the transpose optimizer moves the transposes
#: through a Pad with `axes` and permutes its pads as if they held 2 x rank entries: the Gather
#: it inserts fails at run time
F12 = """graph main(%x0: f32[2,8,3]) {
  %v1 = transpose[perm=[1,0,2]](%x0) : f32[8,2,3]
  %v2 = pad_constant[pads=[3,0], value=0.5](%v1) : f32[8,2,6]
  %v3 = transpose[perm=[1,0,2]](%v2) : f32[2,8,6]
  return %v3
}"""

#: F30 (docs/bugs/tvm_if_topk_segfault.py, apache/tvm#20191): an If whose branches hold a
#: TopK; the else branch crashes the Relax VM (StaticPlanBlockMemory)
F30 = """graph main(%p0: b8[], %x1: f32[1]) {
  %v2 = if(%p0, %x1) : f32[1] {
    graph then(%t0: f32[1]) {
      %t1, %t2 = topk[axis=0, k=1, largest=true](%t0) : f32[1], i64[1]
      return %t1
    }
    graph else(%e0: f32[1]) {
      %e1, %e2 = topk[axis=0, k=1, largest=true](%e0) : f32[1], i64[1]
      return %e1
    }
  }
  return %v2
}"""

#: a graph every compiler gets right (made to "fail" by shifting its expected outputs)
SMALL = """graph main(%x0: f32[3,4], %w1: param f32[4,2]) {
  %v2 = matmul(%x0, %w1) : f32[3,2]
  %v3 = tanh(%v2) : f32[3,2]
  return %v3
}"""


def bug_folder(tmp_path: Path, spec: str, text: str, values: dict[str, Any] | None = None,
               expected_delta: float = 0.0) -> Path:
    """The bug folder of `text` on backend `spec` as the triage writes it: the row is the
    backend's own (a crash or a signal); a graph the backend gets right is made a mismatch by
    shifting its expected outputs by `expected_delta`."""
    g = ir.verify(ir.parse(text))
    if values is None:
        valid = make_valid(g, 0)
        assert valid is not None
        values = valid.search.values
    tc = TestCase("t", 0, g, values, [{"seed": 0}])
    runner = BackendRunner(spec, timeout_s=300)
    try:
        row, _, _ = runner.run("t", 0, g, values)
    finally:
        runner.close()
    files: dict[str, bytes] = {}
    if expected_delta:
        from campaign.artifacts import Materialized
        from campaign.reference import run_reference

        assert row["verdict"] == "pass", row
        ref = run_reference(Materialized(tc)).outputs
        assert ref is not None
        files["expected.npz"] = npz_bytes({f"out{i}": o + np.asarray(expected_delta, o.dtype)
                                           for i, o in enumerate(ref)})
        row = {**row, "verdict": "mismatch", "stage": "compare", "error_class": "Mismatch"}
    assert row["verdict"] != "pass", row
    case = FindingCase(tmp_path, {"backend": spec, "verdict": row["verdict"]}, g, values, [])
    red = Reduction(case, "reduced", g, values, [], row, files, tc)
    dest = tmp_path / "bug"
    written = write_bug_folder(dest, spec, f"x-{row['verdict']}-x",
                               {"verdict": row["verdict"], "stage": row.get("stage")}, red, 0)
    assert written["repro"], written
    if expected_delta:
        (dest / "truth.npz").unlink(missing_ok=True)
    return dest


def show(loc: Localization) -> str:
    return f"{loc.text}\n{loc.table()}"


def test_ort_names_the_transpose_optimizer_for_f12(tmp_path):
    loc = localize_folder(bug_folder(tmp_path, "ort", F12), budget_s=300)
    assert loc.culprit == "ort: TransposeOptimizer", show(loc)
    assert "'basic'" in loc.why, show(loc)
    # the run that shows it: basic, with the transpose optimizer alone switched off, passes
    assert any(s.values.get("DISABLED_OPTIMIZERS") == ["TransposeOptimizer"]
               and s.outcome == "passes" for s in loc.steps), show(loc)
    # and optimizations disabled pass
    assert any(s.values == {"OPT_LEVEL": "disabled"} and s.outcome == "passes"
               for s in loc.steps), show(loc)


def test_ort_failing_with_optimizations_disabled_blames_no_transformer(tmp_path):
    """Every run fails the same way (a stand-in mismatch: the expected outputs are shifted),
    optimizations disabled too: the fault is no graph rewrite."""
    loc = localize_folder(bug_folder(tmp_path, "ort", SMALL, expected_delta=1.0), budget_s=300)
    assert loc.culprit is None or "kernel" in loc.culprit, show(loc)
    assert "disabled" in loc.why and "no graph rewrite" in loc.why, show(loc)
    assert not any("DISABLED_OPTIMIZERS" in s.values for s in loc.steps), show(loc)


def test_ort_names_the_kernel_when_the_error_names_its_node(monkeypatch):
    from campaign.backends.ort import repro as part

    monkeypatch.setitem(part.EXPECT, "error_sig", "RuntimeException: [ONNXRuntimeError] : 6 : "
                        "RUNTIME_EXCEPTION : Non-zero status code returned while running "
                        "ScatterND node. Name:'n3' Status Message: ...")
    assert part.kernel_op() == "ScatterND"
    monkeypatch.setitem(part.EXPECT, "error_sig", None)
    assert part.kernel_op() is None


#: F21 (docs/findings/graphs/F21-if_batchnorm_relu.gir): TVM's ONNX importer keeps the tuple
#: of a BatchNormalization inside an If branch, and the relu after the If fails while importing
F21 = (Path(__file__).parents[2] / "docs/findings/graphs/F21-if_batchnorm_relu.gir").read_text()


@pytest.mark.slow
def test_tvm_failing_while_importing_is_the_frontends(tmp_path):
    loc = localize_folder(bug_folder(tmp_path, "tvm", F21), budget_s=300)
    assert loc.culprit == "tvm: ONNX frontend (from_onnx)", show(loc)
    assert "importing" in loc.why and len(loc.steps) == 1, show(loc)


def onnx_folder(tmp_path: Path, model: Any, expect: dict[str, Any],
                options: dict[str, Any]) -> Path:
    """An ORT bug folder of a hand-made ONNX model (as docs/bugs scripts build them): inputs of
    ones, expected outputs those of ORT with optimizations disabled, the repro.py ORT's body
    makes with `options`."""
    from types import SimpleNamespace

    import onnx
    import onnxruntime as ort

    from campaign.backends.base import ReproSpec
    from campaign.triage.pipeline.repro_source import repro_source

    dest = tmp_path / "bug"
    dest.mkdir()
    onnx.save(model, dest / "model.onnx")
    feeds = {i.name: np.ones([d.dim_value for d in i.type.tensor_type.shape.dim],
                             onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
             for i in model.graph.input}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    outs = ort.InferenceSession(str(dest / "model.onnx"), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    (dest / "inputs.npz").write_bytes(npz_bytes(feeds))
    (dest / "expected.npz").write_bytes(npz_bytes({f"out{i}": o for i, o in enumerate(outs)}))
    graph = SimpleNamespace(inputs=[SimpleNamespace(name=n) for n in feeds], params=[],
                            outputs=list(range(len(outs))))
    (dest / "repro.py").write_text(repro_source(ReproSpec("ort", options, bodies=ORT_BODIES), graph, expect,
                                                [(1e-2, 1e-2)] * len(outs), "F01"))
    return dest


def test_ort_names_the_fp16_initializer_fusion_for_f01(tmp_path):
    """F01 (docs/bugs/ort_f16_rnn_transpose_segfault.py): the session of a float16 Transpose ->
    MatMul -> GRU segfaults at optimizations 'all' only; the transformer is a level-'all' one."""
    import runpy

    model = runpy.run_path(str(Path(__file__).parents[2] / "docs/bugs/"
                               "ort_f16_rnn_transpose_segfault.py"))["model"]()
    options = {"opt_level": "all", "device": "cpu", "disabled_optimizers": [],
               "execution_mode": "sequential", "threads": 1}
    expect = {"verdict": "signal", "stage": "compile", "error_class": "SIGSEGV",
              "error_sig": None}
    loc = localize_folder(onnx_folder(tmp_path, model, expect, options), budget_s=300)
    assert loc.culprit == "ort: FuseFp16InitializerToFp32NodeTransformer", show(loc)
    assert [s.outcome for s in loc.steps[:4]] == ["fails the same way"] + ["passes"] * 3, \
        show(loc)  # as it failed; disabled, basic, extended pass


F30_VALUES = {"p0": np.array(False), "x1": np.array([-0.3], np.float32)}


@pytest.mark.slow
def test_tvm_names_static_plan_block_memory_for_f30(tmp_path):
    loc = localize_folder(bug_folder(tmp_path, "tvm", F30, F30_VALUES), budget_s=600)
    assert loc.culprit == "tvm: relax.transform.StaticPlanBlockMemory", show(loc)
    assert any(s.values.get("DISABLED_PASS") == ["StaticPlanBlockMemory"]
               and s.outcome == "passes" for s in loc.steps), show(loc)


@pytest.mark.slow
def test_tvm_no_single_pass_at_fault_is_not_localized(tmp_path):
    """Expected outputs shifted: every run fails the same way, every optional pass switched
    off too: no culprit, and the why says so."""
    loc = localize_folder(bug_folder(tmp_path, "tvm", SMALL, expected_delta=1.0), budget_s=600)
    assert loc.culprit is None, show(loc)
    assert "still fails the same way" in loc.why, show(loc)


class FakeProbe:
    """A probe whose build runs `PASSES_RUN` and fails the same way unless `culprit` is
    switched off; switching off a lowering pass fails otherwise (as TVM's build does)."""

    PASSES_RUN = ["0 _pipeline", "1 sequential", "2 LegalizeOps", "2 FuseOps",
                  "3 DeadCodeElimination", "2 StaticPlanBlockMemory", "2 KillAfterLastUse",
                  "2 VMShapeLower", "0 tirx.BindTarget", "2 tirx.VectorizeLoop",
                  "2 tirx.MakePackedAPI"]

    def __init__(self, culprit: str | None):
        self.culprit = culprit
        self.deadline, self.run_limit_s = float("inf"), None
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, what: str, **values: Any) -> str:
        return self.run(what, values)

    def run(self, what: str, values: dict[str, Any], env: dict[str, str] | None = None) -> str:
        from campaign.backends.repro_scripts.localize import PASSES, SAME
        from campaign.backends.tvm.relax import PASS_LOG_ENV

        self.runs.append((what, values))
        if env and PASS_LOG_ENV in env:
            Path(env[PASS_LOG_ENV]).write_text("\n".join(self.PASSES_RUN) + "\n")
        off = values.get("DISABLED_PASS", [])
        if {"LegalizeOps", "VMShapeLower", "tirx.MakePackedAPI"} & set(off):
            return "fails otherwise: a lowering pass is off"
        return PASSES if self.culprit in off else SAME


@pytest.mark.parametrize("culprit, named", [
    ("StaticPlanBlockMemory", "tvm: relax.transform.StaticPlanBlockMemory"),
    ("tirx.VectorizeLoop", "tvm: tirx.VectorizeLoop"),
    (None, None)])
def test_tvm_plan_bisects_the_optional_passes_the_build_ran(monkeypatch, culprit, named):
    """The plan's steps on a stand-in probe: the stage, the lowest opt_level, the recorded
    passes less the lowering ones (and those nested in others), then the TIR ones."""
    from campaign.backends.tvm import relax

    monkeypatch.setitem(relax.EXPECT, "stage", "run")
    probe: Any = FakeProbe(culprit)
    found, why = relax.ablate_relax(probe, "ONNX frontend (from_onnx)")
    assert found == named, (why, probe.runs)
    assert [v for _, v in probe.runs[:2]] == [{"OPT_LEVEL": 0}] * 2  # opt_level 0, the pass log
    switched = [set(v.get("DISABLED_PASS", ())) for _, v in probe.runs]
    assert {"StaticPlanBlockMemory", "FuseOps", "KillAfterLastUse"} in switched
    assert not any({"LegalizeOps", "DeadCodeElimination", "VMShapeLower"} & s for s in switched)
    if culprit is None:
        assert "with all 3 switched off it still fails the same way" in why
        assert "with all 1 switched off it still fails the same way" in why  # tirx.VectorizeLoop
    if culprit is None:  # a compile that fails: where it stops (a pass begun, never ended)
        monkeypatch.setitem(relax.EXPECT, "stage", "compile")
        probe = FakeProbe(None)
        probe.PASSES_RUN = ["0 _pipeline", "1 sequential", "2 FuseOps", "2 /FuseOps",
                            "2 StaticPlanBlockMemory"]
        found, why = relax.ablate_relax(probe, "ONNX frontend (from_onnx)")
        assert found is None and "the build stops inside pass StaticPlanBlockMemory" in why
    monkeypatch.setitem(relax.EXPECT, "stage", "import")
    probe = FakeProbe(None)
    assert relax.ablate_relax(probe, "ONNX frontend (from_onnx)")[0] == \
        "tvm: ONNX frontend (from_onnx)" and not probe.runs
    # the stage before TVM's frontend fails alone: torch.export is named
    assert relax.ablate_relax(probe, "x", lambda: "torch.export.export fails: E")[0] == \
        "torch: torch.export (before TVM)" and not probe.runs


#: F23 (docs/bugs/tvm_torch_frontend.py): TVM's torch frontend drops selu's scale (its elu
#: converter ignores `scale`): every output off by 1/1.0507, whatever the passes
F23 = """graph main(%x: f32[4]) {
  %y = selu(%x) : f32[4]
  return %y
}"""


@pytest.mark.slow
def test_tvm_torch_frontend_is_named_when_the_onnx_frontend_gets_the_program_right(tmp_path):
    folder = bug_folder(tmp_path, "tvm_torch", F23)
    loc = localize_folder(folder, budget_s=900)
    assert loc.culprit == "tvm: torch frontend (from_exported_program)", show(loc)
    assert loc.steps[-1].values == {"FRONTEND": "onnx"} and loc.steps[-1].outcome == "passes"
    assert "with all" in loc.why and "still fails the same way" in loc.why, show(loc)
