"""Dynamic-shape tests in the campaign (docs/dynshape.md): rows record the symbolic dims and
the shapes run, backends compile once and run every shape, and a crash on a later shape, a
mismatch on some shapes only and a recompile are findings of their own kind."""
from __future__ import annotations

import json

import numpy as np
import pytest

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult
from campaign.dynamic_shapes import classify, generic, unexpected_recompile
from campaign.reference import run_reference
from campaign.schema import COLUMNS
from campaign.testcase import TestCase
from campaign.verdict import Stage
from campaign.worker import FuzzWorker, WorkerConfig, make_dyn_test
from ir.core.text import parse
from ir.gen.builder import GenConfig
from ir.materialize.dynshape import DynShape
from mutators import MutationConfig

GEN = GenConfig(p_dynshape=1.0, nodes=6)


def _cfg(backends, sandbox=True) -> WorkerConfig:
    return WorkerConfig(generator=GEN, backends=backends, sandbox=sandbox,
                        mutation=MutationConfig(rate=0.0, weights={}))


# ---- injected bugs on later shapes (loaded by dotted path, as the triage's test doubles) ----

class _Reference(Backend):
    """The reference's own outputs, set after set, except what a subclass changes."""

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        ref = run_reference(m)
        n = len(m.tc.graph.outputs)
        sets = [ref.outputs[k * n:(k + 1) * n] for k in range(m.tc.n_sets)]
        return self.run_sets(list(enumerate(sets)), lambda ks: self.one(*ks), result)

    def one(self, k: int, outs: list) -> list:
        return outs


class CrashOnLaterShape(_Reference):
    def one(self, k, outs):
        if k == 1:
            raise RuntimeError("shape guard failed")
        return outs


class WrongOnLaterShape(_Reference):
    def one(self, k, outs):
        return [o + 1 if k == 1 and o.dtype.kind in "iuf" else o for o in outs]


class RecompilesGeneric(_Reference):
    """Claims a compile on every set (like a backend specializing each shape)."""

    def _evaluate(self, m, result):
        out = super()._evaluate(m, result)
        result.compiles = [1] * m.tc.n_sets
        return out


def _dyn_case(seed0: int = 0) -> TestCase:
    for seed in range(seed0, seed0 + 50):
        tc = make_dyn_test(_cfg(["ort"]), f"d{seed}", seed)
        if tc.dynshape is not None and not run_reference(Materialized(tc)).problem:
            return tc
    raise AssertionError("no valid dynamic-shape test in 50 seeds")


def test_rows_record_symbolic_dims_shapes_and_one_compile():
    tc = _dyn_case()
    with FuzzWorker(_cfg(["ort", "ort_noopt", "eager"])) as w:
        report = w.run_case(tc)
    assert set(report.rows[0]) <= set(COLUMNS)
    for row in report.rows:
        assert row["verdict"] == "pass", row["error_msg"]
        assert row["dyn_dims"] == tc.dynshape.input_dims(tc.graph) and row["dyn_dims"]
        assert row["dyn_shapes"] == tc.dynshape.shape_labels()
        assert len(row["dyn_shapes"]) == tc.n_sets == row["n_input_sets"]
        assert row["n_compiles"] == 1 and row["dyn_finding"] is None


def test_static_tests_have_empty_dynamic_columns():
    cfg = WorkerConfig(generator=GenConfig(nodes=4), backends=["ort"], sandbox=False,
                       mutation=MutationConfig(rate=0.0, weights={}))
    with FuzzWorker(cfg) as w:
        report = w.run("s0", 3)
    row = report.rows[0]
    assert row["dyn_dims"] == [] and row["dyn_shapes"] == [] and row["dyn_finding"] is None


@pytest.mark.parametrize("spec,verdict,kind", [
    ("test_dynshape_campaign:CrashOnLaterShape", "crash", "later_shape_crash"),
    ("test_dynshape_campaign:WrongOnLaterShape", "mismatch", "shape_mismatch"),
])
def test_failures_on_a_later_shape_are_findings_of_their_own(spec, verdict, kind):
    tc = _dyn_case()
    with FuzzWorker(_cfg([spec])) as w:
        report = w.run_case(tc)
    row = report.rows[0]
    assert (row["verdict"], row["dyn_finding"]) == (verdict, kind), row["error_msg"]
    if verdict == "crash":
        assert row["failed_input_set"] == 1 and row["stage"] == "run"
    else:
        assert row["mismatch_input_set"] == 1
    (finding,) = report.findings
    assert json.loads(finding.files["dynshape.json"])["symbols"] == tc.dynshape.symbols
    assert "inputs_set1.npz" in finding.files


def test_a_recompile_for_a_generic_shape_is_a_finding():
    tc = _dyn_case()
    with FuzzWorker(_cfg(["test_dynshape_campaign:RecompilesGeneric"], sandbox=False)) as w:
        row = w.run_case(tc).rows[0]
    first = unexpected_recompile(tc, [1] * tc.n_sets)
    if first is None:  # every later shape has a 0/1 size: an expected specialization
        assert row["verdict"] == "pass" and row["n_compiles"] == tc.n_sets
    else:
        assert row["verdict"] == "recompile" and row["dyn_finding"] == "recompile"
        assert row["recompile_input_set"] == first and row["n_compiles"] == tc.n_sets


def test_recompile_rules():
    dyn = DynShape({"L": "seq"}, {"x0": ("L",), "v1": ("L + -2",)}, {},
                   [{"L": 5}, {"L": 3}, {"L": 8}, {"L": 1}], [0, 1, 2, 3])
    g = parse("graph main(%x0: f32[5]) {\n  %v1 = relu(%x0) : f32[5]\n  return %v1\n}")
    tc = TestCase("t", 0, g, {}, dynshape=dyn)
    assert generic(dyn, {"L": 5}) and not generic(dyn, {"L": 3})  # L - 2 == 1
    assert unexpected_recompile(tc, [1, 1, 0, 1]) is None  # 0/1 sizes: by design
    assert unexpected_recompile(tc, [1, 0, 1, 0]) == 2
    row = {"verdict": "pass", "stage": None}
    out = classify(tc, row, BackendResult(outputs=[], compiles=[1, 0, 1, 0]), None)
    assert out["verdict"] == "recompile" and out["recompile_input_set"] == 2
    assert out["n_compiles"] == 2
    assert out["error_sig"] == "Recompile: a later shape with every symbolic dim >= 2"
    # the backend said why (campaign/backends/inductor/shape_guards.py): the signature names the cause
    cause = ("Recompile: a size specialized by _max_pool1d (nn/functional.py)",
             "Eq(s53, 5) was added by nn/functional.py:747 in _max_pool1d")
    out = classify(tc, row, BackendResult(outputs=[], compiles=[1, 0, 1, 0],
                                          recompile_cause=cause), None)
    assert out["error_sig"] == cause[0]
    assert out["error_msg"] == ("compiled again for input set 2 (L=8); graphs compiled per "
                                f"input set: [1, 0, 1, 0]; {cause[1]}")
    out = classify(tc, {"verdict": "crash", "stage": "run"},
                   BackendResult(stage=Stage.RUN, input_set=2), None)
    assert out == {"failed_input_set": 2, "dyn_finding": "later_shape_crash"}
    out = classify(tc, {"verdict": "mismatch", "stage": "compare"}, BackendResult(), [0, 1, 2, 3])
    assert "dyn_finding" not in out  # wrong on every shape: a plain mismatch


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "onnx_export", "tvm"])
def test_compilers_compile_once_and_run_every_shape(backend):
    """A dynamic-shape test without control flow on each compiler: passes, one compile
    (Inductor: counted; its compile count covers every shape with a generic size)."""
    tc = _dyn_case(7)
    with FuzzWorker(_cfg([backend])) as w:
        row = w.run_case(tc).rows[0]
    assert row["verdict"] in ("pass", "unsupported"), row["error_msg"]
    if row["verdict"] == "pass":
        assert row["recompile_input_set"] is None
