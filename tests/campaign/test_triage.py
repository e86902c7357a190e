"""Triage: bucket keys, the bugs table, reduction on injected-bug backends (wrong answer on one
op, crash on a pattern, segfault on an op; each candidate evaluated in a sandbox), bug folders,
and standalone reproducers run in a process where importing dynsmith fails."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import ir
from campaign.findings import FindingStore
from campaign.sandbox import SandboxConfig
from campaign.storage import ResultSink
from campaign.testcase import TestCase, npz_bytes
from campaign.triage import TriageConfig
from campaign.triage.pipeline.buckets import BUGS_SCHEMA, crash_key, mismatch_key, op_pattern, pattern_ops
from campaign.triage.pipeline.campaign_triage import triage
from campaign.triage.pipeline.reduction import BackendRunner, load_finding, reduce_finding
from campaign.triage.pipeline.repro import check_repro, write_bug_folder
from campaign.worker import FuzzWorker, WorkerConfig
from ir.numerics.input_search import make_valid

GRAPH = """graph main(%x0: f32[2,3,4], %x1: f32[4,5], %x20: f32[], %w2: param f32[2,3,5]) {
  %v3 = matmul(%x0, %x1) : f32[2,3,5]
  %v4 = relu(%v3) : f32[2,3,5]
  %v5 = add(%v4, %w2) : f32[2,3,5]
  %v6 = tanh(%v5) : f32[2,3,5]
  %v7 = atan(%v6) : f32[2,3,5]
  %v8 = mul(%v7, %v4) : f32[2,3,5]
  %v9 = reduce_sum[axis=2, keepdim=false](%v8) : f32[2,3]
  %v10 = sigmoid(%v9) : f32[2,3]
  %v11 = reduce_sum[axis=1, keepdim=false](%v10) : f32[2]
  %v12 = reduce_sum[axis=0, keepdim=false](%v11) : f32[]
  %v13 = gt(%v12, %x20) : b8[]
  %v14 = if(%v13, %v8) : f32[2,3,5] {
    graph then(%t0: f32[2,3,5]) {
      %t1 = neg(%t0) : f32[2,3,5]
      return %t1
    }
    graph else(%e0: f32[2,3,5]) {
      %e1 = abs(%e0) : f32[2,3,5]
      %e2 = exp(%e1) : f32[2,3,5]
      return %e2
    }
  }
  return %v14, %v10
}"""

WRONG = "buggy_backends:WrongOnOp?op=atan"
PATTERN = "buggy_backends:CrashOnPattern?producer=relu&consumer=add"
SEGV = "buggy_backends:SegfaultOnOp?op=tanh"


def _case(test_id: str = "run-000000", seed: int = 0, text: str = GRAPH) -> TestCase:
    g = ir.verify(ir.parse(text))
    valid = make_valid(g, seed)
    assert valid is not None and valid.graph == g
    return TestCase(test_id, seed, g, valid.search.values, [{"seed": seed}])


def campaign_dir(root: Path, specs: list[str], cases: list[TestCase],
                 limits: SandboxConfig | None = None,
                 configs: dict[str, float] | None = None) -> Path:
    """A campaign's output (results/ and findings/) made without Ray; `configs`: backend ->
    the fraction of tests run in a drawn configuration."""
    store = FindingStore(root, 5)
    sink = ResultSink(root, "run", "triage-test", flush_rows=1000)
    limits = limits or SandboxConfig(timeout_s=30)
    with FuzzWorker(WorkerConfig(backends=specs, limits=limits, configs=configs or {})) as w:
        for tc in cases:
            rep = w.run_case(tc)
            dirs = {}
            for f in rep.findings:
                d = store.add(f)
                if d:
                    dirs.setdefault(f.backend, d)
            for row in rep.rows:
                sink.add({**row, "finding_dir": dirs.get(row["backend"])})
    sink.close()
    return root


def _ops(g) -> list[str]:
    return sorted(inst.op.name for inst, _ in g.walk())


# ---- keys ----------------------------------------------------------------------------------------

def test_crash_keys_use_the_normalized_signature():
    row = {"backend": "tvm", "target": "cpu", "verdict": "crash", "stage": "compile",
           "error_sig": "InternalError: bad shape [N, N] @ build.codegen"}
    assert crash_key(row) == crash_key(dict(row))
    assert crash_key({**row, "stage": "run"}) != crash_key(row)
    assert crash_key(row).id.startswith("tvm-crash-") and crash_key(row).kind == "bug"
    assert crash_key({**row, "verdict": "invalid"}).kind == "ours"
    weird = crash_key({**row, "backend": "mypkg.mod:B?x=1"})
    assert "/" not in weird.id and "?" not in weird.id


def test_timeouts_bucket_without_the_frames_they_were_killed_in():
    from campaign.triage.pipeline.reduction import same_failure

    a = {"backend": "inductor", "target": "cpu", "verdict": "timeout", "stage": "compile",
         "error_sig": "Timeout: during compile @ symbolic_convert.step < symbolic_convert.run"}
    b = {**a, "error_sig": "Timeout: during compile @ compile_fx.compile_fx < __init__.__call__"}
    assert crash_key(a) == crash_key(b) and crash_key(a).error_sig == "Timeout: during compile"
    assert same_failure(a, b) and not same_failure(a, {**b, "stage": "run"})
    crash = {**a, "verdict": "crash", "error_sig": "RuntimeError: x @ f.g"}
    assert not same_failure(crash, {**crash, "error_sig": "RuntimeError: x @ f.h"})


def test_mismatch_pattern_ignores_names_shapes_and_attributes_but_not_dtypes():
    a = ir.parse("""graph main(%x0: f32[2,3]) {
      %v1 = reduce_sum[axis=1, keepdim=false](%x0) : f32[2]
      %v2 = atan(%v1) : f32[2]
      return %v2
    }""")
    b = ir.parse("""graph main(%a: f32[5,7]) {
      %q = reduce_sum[axis=0, keepdim=false](%a) : f32[7]
      %r = atan(%q) : f32[7]
      return %r
    }""")
    c = ir.parse("""graph main(%x0: f64[2,3]) {
      %v1 = reduce_sum[axis=1, keepdim=false](%x0) : f64[2]
      %v2 = atan(%v1) : f64[2]
      return %v2
    }""")
    assert op_pattern(a) == op_pattern(b) != op_pattern(c)
    d = ir.parse("""graph main(%y: f32[2], %x: f32[2]) {
      %v = relu(%x) : f32[2]
      %w = add(%v, %y) : f32[2]
      return %w
    }""")
    e = ir.parse("""graph main(%x: f32[2], %y: f32[2]) {
      %v = relu(%x) : f32[2]
      %w = add(%v, %y) : f32[2]
      return %w
    }""")
    assert op_pattern(d) == op_pattern(e)  # the order inputs are declared in is incidental
    assert pattern_ops(op_pattern(a)) == {"reduce_sum", "atan"}
    assert mismatch_key("ort", "cpu", a) == mismatch_key("ort", "cpu", b)
    assert "atan" in mismatch_key("ort", "cpu", a).pattern


# ---- reduction with injected bugs ---------------------------------------------------------------

def _finding_folder(tmp_path: Path, spec: str, tc: TestCase) -> Path:
    out = campaign_dir(tmp_path / "run", [spec], [tc])
    (folder,) = [p.parent for p in (out / "findings").glob("*/*/*/info.json")]
    return folder


def test_wrong_answer_on_one_op_is_isolated_and_stays_a_mismatch(tmp_path):
    folder = _finding_folder(tmp_path, WRONG, _case())
    case = load_finding(folder)
    assert case.verdict == "mismatch" and case.graph.num_insts() == 15
    runner = BackendRunner(WRONG, timeout_s=30)
    try:
        red = reduce_finding(case, runner, max_tests=150)
        assert red.status == "reduced"
        assert _ops(red.graph) == ["atan"]  # the op, alone
        assert red.reduced_insts <= 0.3 * red.original_insts
        assert red.row["verdict"] == "mismatch"
        # the bucket is kept: the reduced test, run afresh, is still a mismatch
        row, _, _ = runner.run("again", case.seed, red.graph, red.values, red.extra_sets)
        assert row["verdict"] == "mismatch"
    finally:
        runner.close()
    key = mismatch_key(case.backend, "cpu", red.graph)
    assert pattern_ops(key.pattern) == {"atan"}


def test_crash_on_a_pattern_is_isolated_with_its_signature(tmp_path):
    folder = _finding_folder(tmp_path, PATTERN, _case())
    case = load_finding(folder)
    assert case.verdict == "crash" and case.info["stage"] == "compile"
    runner = BackendRunner(PATTERN, timeout_s=30)
    try:
        red = reduce_finding(case, runner, max_tests=150)
    finally:
        runner.close()
    assert _ops(red.graph) == ["add", "relu"]
    (add,) = [i for i in red.graph.insts if i.op.name == "add"]
    relu_out = {i.results[0].name for i in red.graph.insts if i.op.name == "relu"}
    assert relu_out & set(add.args)  # the pattern itself: add reads relu's result
    assert crash_key(red.row) == crash_key(case.info)  # same bucket: same signature
    assert "0x" not in crash_key(red.row).error_sig


def test_segfault_is_reduced_safely_in_the_sandbox(tmp_path):
    folder = _finding_folder(tmp_path, SEGV, _case())
    case = load_finding(folder)
    assert case.verdict == "signal" and case.info["error_class"] == "SIGSEGV"
    runner = BackendRunner(SEGV, timeout_s=30)
    try:
        red = reduce_finding(case, runner, max_tests=150)
    finally:
        runner.close()
    assert _ops(red.graph) == ["tanh"]
    assert red.row["verdict"] == "signal" and red.row["stage"] == "compile"


# ---- the whole triage ---------------------------------------------------------------------------

def test_triage_buckets_reduces_writes_folders_and_the_bugs_table(tmp_path):
    cases = [_case(f"run-{i:06d}", i) for i in range(2)]
    out = campaign_dir(tmp_path / "run", [WRONG, PATTERN, "ort"], cases)
    cfg = TriageConfig(max_tests=150, budget="5m")
    report = triage(out, cfg, log=lambda s: None)
    table = pq.read_table(out / "bugs.parquet")
    assert table.schema.equals(BUGS_SCHEMA)
    rows = {r["bucket"]: r for r in table.to_pylist()}
    by_backend = {r["backend"]: r for r in rows.values()}
    assert set(by_backend) == {WRONG, PATTERN}  # ort passed: no bucket
    wrong, crash = by_backend[WRONG], by_backend[PATTERN]
    assert wrong["verdict"] == "mismatch" and pattern_ops(wrong["pattern"]) == {"atan"}
    assert wrong["count"] == 2 and wrong["example_test_ids"] == ["run-000000", "run-000001"]
    assert crash["count"] == 2 and crash["stage"] == "compile" and crash["new"]
    assert crash["reduced_insts"] == 2 and crash["original_insts"] == 15
    assert crash["first_seen"] is not None
    for r in (wrong, crash):
        folder = out / r["artifact_path"]
        for name in ("graph.gir", "original.gir", "model.onnx", "inputs.npz", "expected.npz",
                     "info.json"):
            assert (folder / name).is_file(), name
        assert r["repro_status"] == "none"  # a test double: no standalone library to call
        ir.verify(ir.load(folder / "graph.gir") if hasattr(ir, "load") else
                  ir.parse((folder / "graph.gir").read_text()))
    assert report.reductions == 3  # both mismatch folders (buckets need it), one crash member
    assert "atan" in report.text()

    # again, with the first table as known: nothing new, and the reductions are reused
    again = triage(out, TriageConfig(max_tests=150, known=[str(out)], check_repro=False),
                   log=lambda s: None)
    assert again.reductions == 0
    rows2 = pq.read_table(out / "bugs.parquet").to_pylist()
    assert {r["bucket"] for r in rows2} == set(rows) and not any(r["new"] for r in rows2)


def test_findings_dir_and_single_folder_from_the_command_line(tmp_path, capsys):
    from campaign.triage.__main__ import main

    out = campaign_dir(tmp_path / "run", [PATTERN], [_case()])
    assert main([str(out / "findings"), "--max-tests", "100", "--no-check-repro", "-q"]) == 0
    assert "CrashOnPattern" in capsys.readouterr().out
    (bug,) = (out / "bugs").glob("*/graph.gir")
    assert _ops(ir.parse(bug.read_text())) == ["add", "relu"]
    folder = next((out / "findings").glob("*/*/*"))
    assert main([str(folder), "--max-tests", "100", "--no-check-repro", "-q"]) == 0
    assert list((folder / "reduced" / "bugs").glob("*/graph.gir"))


def test_unreduced_mismatches_join_the_bucket_whose_ops_they_contain(tmp_path):
    cases = [_case(f"run-{i:06d}", i) for i in range(3)]
    out = campaign_dir(tmp_path / "run", [WRONG], cases)
    triage(out, TriageConfig(max_tests=150, reduce_mismatches=1, check_repro=False),
           log=lambda s: None)
    (row,) = pq.read_table(out / "bugs.parquet").to_pylist()
    assert row["count"] == 3 and pattern_ops(row["pattern"]) == {"atan"}
    assert row["reduced_insts"] == 1


def test_findings_without_a_static_graph_are_bucketed_not_reduced(tmp_path):
    root = tmp_path / "run"
    folder = root / "findings" / "ort" / "crash" / "run-000007"
    folder.mkdir(parents=True)
    (folder / "info.json").write_text(json.dumps(
        {"test_id": "run-000007", "seed": 7, "verdict": "crash", "error_class": "WorkerDied"}))
    dyn = root / "findings" / "inductor" / "recompile" / "run-000008"  # a dynamic-shape test
    dyn.mkdir(parents=True)
    (dyn / "info.json").write_text(json.dumps(
        {"test_id": "run-000008", "seed": 8, "verdict": "recompile", "stage": "run",
         "error_sig": "Recompile: input set 1"}))
    (dyn / "graph.gir").write_text(SMALL)
    (dyn / "dynshape.json").write_text("{}")
    report = triage(root / "findings", TriageConfig(), log=lambda s: None)
    by = {b.key.verdict: b for b in report.buckets}
    b = by["crash"]
    assert b.count == 1 and b.reduced_insts is None
    assert b.artifact_path == "findings/ort/crash/run-000007"  # the finding itself
    r = by["recompile"]
    assert r.key.kind == "bug" and r.reduced_insts is None
    assert r.artifact_path == "findings/inductor/recompile/run-000008"


# ---- timeouts: confirmed findings only -----------------------------------------------------------

def test_only_a_confirmed_timeout_is_a_finding_and_the_triage_re_runs_it_at_that_limit(tmp_path):
    """A backend hanging on every attempt gives a confirmed timeout (the first attempt ran past
    1 s, its re-run in a fresh process past 2 s), bucketed as a bug that the triage's own re-run
    (at the confirmed 2 s) confirms; a backend slow only on its first attempt gives its real
    verdict and no bucket."""
    marks = tmp_path / "marks"
    marks.mkdir()
    hang, slow = "buggy_backends:HangOnOp?op=tanh", f"buggy_backends:SlowOnce?marks={marks}"
    out = campaign_dir(tmp_path / "run", [hang, slow], [_case()],
                       SandboxConfig(timeout_s=1.0, confirm_timeout_factor=2.0))
    rows = {r["backend"]: r for r in pq.read_table(out / "results").to_pylist()}
    assert (rows[hang]["verdict"], rows[hang]["timeout_confirmed"]) == ("timeout", True)
    assert (rows[hang]["timeout_limit_s"], rows[hang]["confirm_limit_s"]) == (1.0, 2.0)
    assert (rows[slow]["verdict"], rows[slow]["timeout_confirmed"]) == ("pass", False)
    assert rows[slow]["finding_dir"] is None
    report = triage(out, TriageConfig(budget="1m"), log=lambda s: None)
    (b,) = report.buckets
    assert (b.key.backend, b.key.verdict, b.key.stage, b.key.kind) == (
        hang, "timeout", "compile", "bug")
    assert b.key.error_sig == "Timeout: during compile"
    assert b.confirmed is True and b.count == 1
    assert b.repro_status == "none"  # a test double: no standalone library to call
    info = json.loads((out / b.artifact_path / "info.json").read_text())
    assert info["status"] == "confirmed" and info["row"]["timeout_limit_s"] == 2.0
    assert info["repro_wait_s"] == {"confirmed_limit_s": 2.0, "cold_start_s": 30.0}


LOOP = """graph main(%x0: f32[4], %x1: i64[]) {
  %v2 = loop(%x1, %x0) : f32[4] {
    graph body(%i0: i64[], %b0: f32[4]) {
      %b1 = sin(%b0) : f32[4]
      return %b1
    }
  }
  return %v2
}"""


def _timeout_finding(root: Path, trips: int) -> Path:
    """An output dir holding what the campaign writes for an ORT test whose loop runs `trips`
    times, recorded as a timeout confirmed at 1 s (ORT runs ~1e6 trips a second)."""
    from campaign.artifacts import Materialized
    from ir.core.text import print_graph

    g = ir.verify(ir.parse(LOOP))
    values = {"x0": np.linspace(0.1, 0.4, 4, dtype=np.float32), "x1": np.array(trips, np.int64)}
    folder = root / "findings" / "ort" / "timeout" / f"run-{trips}"
    folder.mkdir(parents=True)
    (folder / "graph.gir").write_text(print_graph(g))
    (folder / "inputs.npz").write_bytes(npz_bytes(values))
    tc = TestCase(folder.name, 0, g, values, [{"seed": 0}])
    (folder / "model.onnx").write_bytes(Materialized(tc).onnx_bytes)
    (folder / "info.json").write_text(json.dumps({
        "test_id": folder.name, "seed": 0, "backend": "ort", "target": "cpu",
        "verdict": "timeout", "stage": "run", "error_class": "Timeout",
        "error_sig": "Timeout: during run", "timeout_confirmed": True, "timeout_limit_s": 0.5,
        "confirm_limit_s": 1.0, "confirm_s": 1.0}))
    return root


@pytest.mark.parametrize("trips, status", [(10**10, "reproduced"), (3, "not reproduced")])
def test_a_timeouts_repro_waits_for_its_confirmed_limit_and_a_cold_start(tmp_path, trips,
                                                                         status):
    """The repro.py of a timeout bucket (ORT, a loop of 10^10 trips: a real hang) reproduces
    when run fresh: still no result after the limit the campaign confirmed it at (1 s) plus
    the cold-start allowance (1 s). The same test with 3 trips finishes: not reproduced."""
    out = _timeout_finding(tmp_path / "run", trips)
    cfg = TriageConfig(budget="0", repro_cold_start_s=1.0)  # budget 0: no re-run, the repro only
    (b,) = triage(out, cfg, log=lambda s: None).buckets
    src = (out / b.repro).read_text()
    assert "import onnxruntime" in src and "'timeout_s': 2.0" in src
    assert b.repro_status == status
    if status == "reproduced":
        outcome, text = check_repro(out / b.artifact_path, "timeout", "Timeout", timeout_s=60)
        assert outcome == "reproduced"
        assert "REPRODUCED: timeout: no result within 2 s (during run)" in text, text


# ---- reproducers --------------------------------------------------------------------------------

SMALL = """graph main(%x0: f32[3,4], %w1: param f32[4,2]) {
  %v2 = matmul(%x0, %w1) : f32[3,2]
  %v3 = tanh(%v2) : f32[3,2]
  return %v3
}"""


def _bug_folder(tmp_path: Path, expected_delta: float, spec: str = "ort",
                text: str = SMALL) -> Path:
    """A bug folder for `spec` claiming a mismatch; the backend really agrees with the
    reference unless the expected outputs are shifted by `expected_delta`."""
    from campaign.triage.pipeline.reduction import FindingCase, Reduction

    tc = _case(text=text)
    runner = BackendRunner(spec, timeout_s=300)
    try:
        row, _, _ = runner.run("t", 0, tc.graph, tc.values)
    finally:
        runner.close()
    assert row["verdict"] == "pass", row
    from campaign.artifacts import Materialized
    from campaign.reference import run_reference

    ref = run_reference(Materialized(tc)).outputs
    expected = {f"out{i}": o + np.asarray(expected_delta, o.dtype) for i, o in enumerate(ref)}
    row = {**row, "verdict": "mismatch", "stage": "compare", "error_class": "Mismatch"}
    case = FindingCase(tmp_path, {"backend": spec, "verdict": "mismatch"}, tc.graph, tc.values,
                       [])
    red = Reduction(case, "reduced", tc.graph, tc.values, [], row,
                    {"expected.npz": npz_bytes(expected)}, tc)
    dest = tmp_path / "bug"
    written = write_bug_folder(dest, spec, "x-mismatch-x", {"verdict": "mismatch"}, red, 0)
    assert written["repro"], written
    assert (dest / "truth.npz").is_file()  # the float64 shadow: a mismatch must be off it too
    if expected_delta:
        (dest / "truth.npz").unlink()
    return dest


_ort_bug_folder = _bug_folder


def test_ort_repro_is_standalone_and_judges_the_outputs(tmp_path):
    dest = _ort_bug_folder(tmp_path / "a", 0.0)
    src = (dest / "repro.py").read_text()
    assert "import onnxruntime" in src and "campaign" not in src.split('"""', 2)[2]
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=120)
    assert outcome == "not reproduced", out
    dest = _ort_bug_folder(tmp_path / "b", 1.0)
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=120)
    assert outcome == "reproduced" and "REPRODUCED: mismatch" in out, out


def test_torch_codegen_computes_what_the_interpreter_computes():
    from ir.materialize.torch_source import check_source, torch_source

    text = """graph main(%x0: f32[3,4], %x1: i64[], %x2: f32[2,4], %x3: f32[]) {
      %v4 = reduce_sum[axis=0, keepdim=false](%x0) : f32[4]
      %v5 = reduce_sum[axis=0, keepdim=false](%v4) : f32[]
      %v6 = gt(%v5, %x3) : b8[]
      %v7 = if(%v6, %x0) : f32[3,4] {
        graph then(%t0: f32[3,4]) {
          %t1 = slice[axis=0, start=1, end=3, step=1](%t0) : f32[2,4]
          %t2 = pad_constant[pads=[1,0,0,0], value=0.5](%t1) : f32[3,4]
          return %t2
        }
        graph else(%e0: f32[3,4]) {
          %e1 = softmax[axis=1](%e0) : f32[3,4]
          return %e1
        }
      }
      %v8 = loop(%x1, %v7) : f32[3,4] {
        graph body(%i0: i64[], %b0: f32[3,4]) {
          %b1 = tanh(%b0) : f32[3,4]
          return %b1
        }
      }
      %v9, %v10 = scan[num_carries=1, reverse=true](%v4, %x2) : f32[4], f32[2,4] {
        graph body(%c0: f32[4], %s0: f32[4]) {
          %c1 = add(%c0, %s0) : f32[4]
          %c2 = mul(%c1, %s0) : f32[4]
          return %c1, %c2
        }
      }
      return %v8, %v10
    }"""
    tc = _case(text=text)
    for dialect in ("python", "hop"):
        src = torch_source(tc.graph, dialect)
        assert "dynsmith" not in src and "import ir" not in src
        assert check_source(src, tc.graph, tc.values) is None, src
    assert "torch.cond(" in torch_source(tc.graph, "hop")
    assert "if bool(" in torch_source(tc.graph, "python")


CONTROL = """graph main(%x0: f32[3,4], %x1: i64[], %x3: f32[]) {
  %v4 = reduce_sum[axis=0, keepdim=false](%x0) : f32[4]
  %v5 = reduce_sum[axis=0, keepdim=false](%v4) : f32[]
  %v6 = gt(%v5, %x3) : b8[]
  %v7 = if(%v6, %x0) : f32[3,4] {
    graph then(%t0: f32[3,4]) {
      %t1 = tanh(%t0) : f32[3,4]
      return %t1
    }
    graph else(%e0: f32[3,4]) {
      %e1 = sigmoid(%e0) : f32[3,4]
      return %e1
    }
  }
  %v8 = loop(%x1, %v7) : f32[3,4] {
    graph body(%i0: i64[], %b0: f32[3,4]) {
      %b1 = mul(%b0, %b0) : f32[3,4]
      return %b1
    }
  }
  return %v8
}"""


#: CONTROL without the loop: TVM 0.27's torch frontend converts torch.cond, not while_loop
IF_ONLY = """graph main(%x0: f32[3,4], %x3: f32[], %w1: param f32[4,2]) {
  %v4 = reduce_sum[axis=0, keepdim=false](%x0) : f32[4]
  %v5 = reduce_sum[axis=0, keepdim=false](%v4) : f32[]
  %v6 = gt(%v5, %x3) : b8[]
  %v7 = if(%v6, %x0) : f32[3,4] {
    graph then(%t0: f32[3,4]) {
      %t1 = tanh(%t0) : f32[3,4]
      return %t1
    }
    graph else(%e0: f32[3,4]) {
      %e1 = sigmoid(%e0) : f32[3,4]
      return %e1
    }
  }
  %v8 = matmul(%v7, %w1) : f32[3,2]
  return %v8
}"""


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["inductor", "inductor?dialect=python&fullgraph=false",
                                  "inductor?cpp_wrapper=true", "onnx_export", "tvm",
                                  "tvm_torch?opt_level=2"])
def test_each_backend_kind_gets_a_repro_that_judges_its_outputs(tmp_path, spec):
    # TVM 0.27 has no ONNX Loop, nor a converter for torch's while_loop
    text = SMALL if spec == "tvm" else IF_ONLY if spec.startswith("tvm_torch") else CONTROL
    dest = _bug_folder(tmp_path / "a", 0.0, spec, text)
    if spec.startswith("inductor"):  # the backend's options, replayed
        wrapper = "cpp_wrapper=true" in spec
        assert f"CPP_WRAPPER = {wrapper}" in (dest / "repro.py").read_text()
    if spec.startswith("tvm_torch"):  # exported, imported by the torch frontend, opt_level 2
        src = (dest / "repro.py").read_text()
        assert "torch.export.export(model, args)" in src and "from_exported_program(" in src
        assert "torch.cond(" in src and "OPT_LEVEL = 2" in src
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=600)
    assert outcome == "not reproduced", out
    dest = _bug_folder(tmp_path / "b", 1.0, spec, text)
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=600)
    assert outcome == "reproduced", out


@pytest.mark.slow
def test_real_tvm_bug_is_reduced_and_its_repro_reproduces(tmp_path):
    """TVM 0.27 cannot build `Equal` on bool tensors (LLVM FCmp on i1): a real bug, found by
    dynsmith, reduced from a graph of 8 instructions to the comparison."""
    text = """graph main(%x0: f32[2,3], %x1: f32[2,3], %x2: f32[2,3]) {
      %v3 = tanh(%x0) : f32[2,3]
      %v4 = gt(%v3, %x1) : b8[2,3]
      %v5 = lt(%x1, %x2) : b8[2,3]
      %v6 = eq(%v4, %v5) : b8[2,3]
      %v7 = cast[to=f32](%v6) : f32[2,3]
      %v8 = add(%v7, %v3) : f32[2,3]
      %v9 = sigmoid(%v8) : f32[2,3]
      %v10 = mul(%v9, %x2) : f32[2,3]
      return %v10
    }"""
    out = campaign_dir(tmp_path / "run", ["tvm"], [_case(text=text)])
    # F04's note knows this bug: without the notes it is new, and reduced
    report = triage(out, TriageConfig(max_tests=100, findings=None), log=lambda s: None)
    (b,) = [b for b in report.buckets if b.key.kind == "bug"]
    assert b.key.verdict == "crash" and b.key.stage == "compile"
    assert b.reduced_insts == 1 and b.repro_status == "reproduced"
    g = ir.parse((out / b.artifact_path / "graph.gir").read_text())
    assert _ops(g) == ["eq"] and g.inputs[0].type.dtype.short == "b8"


@pytest.mark.slow
def test_real_tvm_torch_bug_is_reduced_and_its_repro_reproduces(tmp_path):
    """TVM 0.27's torch frontend turns `clamp(int tensor, max=k)`, which the decomposition of a
    linear resize makes for its indices, into a clip with lower bound -inf that cannot be
    legalized for an integer: a compile crash found by dynsmith, reduced to the resize, and
    replayed by a repro.py that exports the torch code and imports it with the frontend."""
    text = """graph main(%x0: f32[2,3,5], %x1: f32[2,3,10]) {
      %v2 = tanh(%x0) : f32[2,3,5]
      %v3 = resize_linear[scales=[2]](%v2) : f32[2,3,10]
      %v4 = add(%v3, %x1) : f32[2,3,10]
      %v5 = sigmoid(%v4) : f32[2,3,10]
      return %v5
    }"""
    out = campaign_dir(tmp_path / "run", ["tvm_torch"], [_case(text=text)])
    # a note knows this bug: without the notes it is new, and reduced
    report = triage(out, TriageConfig(max_tests=100, findings=None), log=lambda s: None)
    (b,) = [b for b in report.buckets if b.key.kind == "bug"]
    assert b.key.verdict == "crash" and b.key.stage == "compile"
    assert b.reduced_insts == 1 and b.repro_status == "reproduced"
    g = ir.parse((out / b.artifact_path / "graph.gir").read_text())
    assert _ops(g) == ["resize_linear"]
    assert "from_exported_program(" in (out / b.artifact_path / "repro.py").read_text()


@pytest.mark.slow
def test_a_campaign_ends_with_its_triage(tmp_path):
    """`python run.py` with an injected-bug backend: the campaign's own triage reduces the
    mismatch to the op and writes the bugs table."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(Path(__file__).parent)])}
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "run.py", "campaign=smoke", "campaign.budget=60", "campaign.workers=1",
         f"campaign.backends=[ort,\"{WRONG}\"]", f"output.dir={out}", "ray.temp_dir=/tmp/dsray-tri",
         "triage.max_tests=80"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "triage:" in proc.stdout
    rows = [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]
    assert rows and all(r["verdict"] == "mismatch" and r["backend"] == WRONG for r in rows)
    assert {op for r in rows for op in pattern_ops(r["pattern"])} == {"atan"}


def test_a_hard_deadline_leaves_what_does_not_fit_for_later(tmp_path):
    """Under a campaign's wall-clock budget the triage ends by its deadline: with none left,
    nothing is reduced or re-run, every bucket is still in the table, the skipped steps are
    counted and the text says how to go on; a later triage without a deadline does them."""
    cases = [_case(f"run-{i:06d}", i) for i in range(2)]
    out = campaign_dir(tmp_path / "run", [WRONG, PATTERN], cases)
    t0 = time.monotonic()
    report = triage(out, TriageConfig(max_tests=150), log=lambda s: None,
                    deadline=time.monotonic() + 0.5)
    assert time.monotonic() - t0 < 10  # no reduction started: each needs MIN_REDUCTION_S
    assert report.reductions == 0 and report.skipped >= 2
    rows = {r["backend"]: r for r in pq.read_table(out / "bugs.parquet").to_pylist()}
    assert set(rows) == {WRONG, PATTERN} and rows[PATTERN]["reduced_insts"] is None
    assert f"continue with `python -m campaign.triage {out}`" in report.text()
    journal = json.loads((out / "bugs" / "steps.json").read_text())
    assert {s["name"]: s["status"] for s in journal["steps"]}["reduce"] == "partial"
    logged: list[str] = []
    later = triage(out, TriageConfig(max_tests=150, check_repro=False), log=logged.append)
    assert later.reductions == 3 and later.skipped == 0
    assert logged[0].startswith("triage: resuming: the last triage of this output left work "
                                "in reduce"), logged[:2]
    journal = json.loads((out / "bugs" / "steps.json").read_text())
    assert {s["status"] for s in journal["steps"]} == {"done"}
