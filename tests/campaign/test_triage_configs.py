"""The triage of findings that ran in a drawn compiler configuration: it re-runs the configured
compiler, reduces the configuration along with the graph (options back to their defaults while
the failure stays), keys buckets on the reduced configuration, and writes a repro.py that sets
exactly the options left."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_triage import SMALL, _bug_folder, _case, campaign_dir

from campaign.backends import make_backend
from campaign.backends.configs import config_text, parse_config, with_config
from campaign.testcase import npz_bytes
from campaign.triage import TriageConfig
from campaign.triage.pipeline.buckets import BUGS_SCHEMA, BucketKey, config_covers, crash_key
from campaign.triage.pipeline.campaign_triage import triage
from campaign.triage.pipeline.reduction import (
    BackendRunner,
    FindingCase,
    Reduction,
    load_finding,
    reduce_finding,
)
from campaign.triage.pipeline.repro import check_repro, write_bug_folder
from ir.shrink.options import OPTION_PASSES

#: a compiler whose injected bug needs `vectorize=true` (tests/campaign/buggy_backends.py)
CRASH = "buggy_backends:BuggyWithOption?op=tanh"
WRONG = "buggy_backends:BuggyWithOption?op=tanh&wrong=true"

TEXT = """graph main(%x0: f32[2,3], %x1: f32[2,3]) {
  %v2 = add(%x0, %x1) : f32[2,3]
  %v3 = tanh(%v2) : f32[2,3]
  %v4 = sigmoid(%v3) : f32[2,3]
  %v5 = mul(%v4, %x1) : f32[2,3]
  return %v5
}"""


def _seeds(spec: str, n: int, other: bool = True) -> list[int]:
    """The first `n` test seeds whose drawn configurations set `vectorize=true` and, when
    `other`, another option as well (options the failure does not need), each another."""
    b = make_backend(spec)
    b.sample_configs = 1.0
    out, seen = [], set()
    for seed in range(1000):
        c = b.config_of(seed)
        if c.get("vectorize") is True and (len(c) > 1) == other and config_text(c) not in seen:
            seen.add(config_text(c))
            out.append(seed)
            if len(out) == n:
                return out
    raise AssertionError("no such seeds")


def _ops(g) -> list[str]:
    return sorted(inst.op.name for inst, _ in g.walk())


@pytest.mark.parametrize("spec,verdict", [(CRASH, "crash"), (WRONG, "mismatch")])
def test_the_reducer_drops_options_the_failure_does_not_need_and_keeps_the_one_it_needs(
        tmp_path, spec, verdict):
    (seed,) = _seeds(spec, 1)
    out = campaign_dir(tmp_path / "run", [spec], [_case("run-000000", seed, TEXT)],
                       configs={spec: 1.0})
    (folder,) = [p.parent for p in (out / "findings").glob("*/*/*/info.json")]
    case = load_finding(folder)
    # the finding says which configuration ran (worker.make_finding's info.json)
    drawn = parse_config(case.config)
    assert case.verdict == verdict and drawn["vectorize"] is True and len(drawn) >= 2
    assert case.spec == with_config(spec, case.config)
    assert make_backend(case.spec).vectorize is True
    runner = BackendRunner(spec, timeout_s=30)
    try:
        red = reduce_finding(case, runner, max_tests=100)
        assert red.status == "reduced" and red.config == "vectorize=true"
        assert _ops(red.graph) == ["tanh"]
        assert red.row["verdict"] == verdict
        # only the reduced configuration's sandbox is left running
        assert set(runner.workers) == {"", "vectorize=true"}
        # the option it needs: without it, the reduced test passes
        row, _, _ = runner.run("again", seed, red.graph, red.values, red.extra_sets)
        assert row["verdict"] == "pass"
    finally:
        runner.close()
    # the reduction's log holds the option steps beside the graph's
    steps = red.summary["steps"]
    dropped = [s for s in steps if s["pass"] in OPTION_PASSES]
    assert dropped and dropped[-1]["config"] == "vectorize=true"
    assert all("vectorize" not in s["desc"] for s in dropped)
    assert any(s["pass"] not in OPTION_PASSES for s in steps)
    assert red.summary["config"]["original"] == case.config
    assert red.summary["config"]["reduced"] == "vectorize=true"
    assert red.summary["tests"] >= red.summary["config"]["tests"] >= len(dropped)


def test_a_finding_in_the_backends_own_configuration_reduces_as_before(tmp_path):
    spec = f"{CRASH}&vectorize=true"  # the spec's own option: never reduced
    out = campaign_dir(tmp_path / "run", [spec], [_case("run-000000", 0, TEXT)])
    case = load_finding(next((out / "findings").glob("*/*/*")))
    assert case.config == "" and case.spec == spec
    runner = BackendRunner(spec, timeout_s=30)
    try:
        red = reduce_finding(case, runner, max_tests=100)
    finally:
        runner.close()
    assert red.config == "" and _ops(red.graph) == ["tanh"]
    assert red.summary["config"] == {"original": "", "reduced": "", "tests": 0}


def test_a_finding_whose_configuration_the_backend_no_longer_has_fails_with_its_message(
        tmp_path):
    (seed,) = _seeds(CRASH, 1)
    out = campaign_dir(tmp_path / "run", [CRASH], [_case("run-000000", seed, TEXT)],
                       configs={CRASH: 1.0})
    (info,) = (out / "findings").glob("*/*/*/info.json")
    data = json.loads(info.read_text())
    data["backend_config"] = "vectorise=true"
    info.write_text(json.dumps(data))
    runner = BackendRunner(CRASH, timeout_s=30)
    try:
        with pytest.raises(ValueError) as e:
            reduce_finding(load_finding(info.parent), runner, max_tests=10)
    finally:
        runner.close()
    assert str(e.value) == (f"backend '{CRASH}&vectorise=true': unknown option 'vectorise' "
                            "(known: op, wrong, vectorize, unroll, fuse)")


# ---- bucket keys ---------------------------------------------------------------------------------

def test_the_configuration_is_part_of_the_key_and_the_default_keeps_old_ids():
    row = {"backend": "ort", "target": "cpu", "verdict": "crash", "stage": "compile",
           "error_sig": "Fail: x"}
    plain = crash_key(row)
    assert plain == crash_key({**row, "backend_config": ""}) and plain.config == ""
    # a key without a configuration hashes as before configurations (earlier bugs tables)
    assert plain.text() == json.dumps(["ort", "cpu", "crash", "compile", "Fail: x", None])
    configured = crash_key({**row, "backend_config": "opt_level=basic"})
    assert configured.config == "opt_level=basic" and configured.id != plain.id
    assert configured.base() == plain
    assert BucketKey(*json.loads(configured.text())) == configured  # the index's round trip
    assert config_covers("", "opt_level=basic")
    assert config_covers("threads=2", "opt_level=basic&threads=2")
    assert not config_covers("threads=2", "opt_level=basic")
    assert not config_covers("opt_level=basic", "opt_level=extended")


def test_findings_whose_configurations_reduce_alike_share_one_bucket(tmp_path):
    seeds = _seeds(CRASH, 2)
    cases = [_case(f"run-{i:06d}", s, TEXT) for i, s in enumerate(seeds)]
    out = campaign_dir(tmp_path / "run", [CRASH], cases, configs={CRASH: 1.0})
    fresh = tmp_path / "fresh"
    shutil.copytree(out, fresh)
    drawn = {r["test_id"]: r["backend_config"] for r in
             pq.read_table(out / "results").to_pylist()}
    assert len(set(drawn.values())) == 2 and all("vectorize=true" in c for c in drawn.values())

    # both reduced, to the same option: one bucket, keyed by it
    report = triage(out, TriageConfig(max_tests=100, reduce_first=2, check_repro=False),
                    log=lambda s: None)
    assert report.reductions == 2
    (b,) = report.buckets
    assert b.key.config == "vectorize=true" and b.count == 2
    table = pq.read_table(out / "bugs.parquet")
    assert table.schema.equals(BUGS_SCHEMA)
    (row,) = table.to_pylist()
    assert row["backend_config"] == "vectorize=true" and row["bucket"] == b.key.id
    assert row["reduced_insts"] == 1 and row["confirmed"]
    info = json.loads((out / row["artifact_path"] / "info.json").read_text())
    assert info["backend_config"] == "vectorize=true"
    assert info["spec"] == f"{CRASH}&vectorize=true"
    assert info["original_config"] in drawn.values()
    assert any(s["pass"] in OPTION_PASSES for s in info["reduction"]["steps"])
    index = json.loads((out / "bugs" / "reduced.json").read_text())
    assert {e["key"][6] for e in index.values()} == {"vectorize=true"}

    # one reduced: the other finding holds its option, so joins its bucket unreduced
    report = triage(fresh, TriageConfig(max_tests=100, reduce_first=1, check_repro=False),
                    log=lambda s: None)
    assert report.reductions == 1
    (b1,) = report.buckets
    assert b1.key == b.key and b1.count == 2

    # again with the first table known: the same bucket, not new, nothing reduced
    again = triage(fresh, TriageConfig(max_tests=100, known=[str(out)], check_repro=False),
                   log=lambda s: None)
    assert again.reductions == 0
    (b2,) = again.buckets
    assert b2.key == b.key and not b2.new


def test_a_row_no_reduced_configuration_explains_keeps_its_own(tmp_path):
    """Two findings of one failure: the second's configuration lacks the option the first
    reduced to (here: made so by editing its info, as a second bug with the same message
    would be), so it is a bucket of its own configuration."""
    seeds = _seeds(CRASH, 2)
    cases = [_case(f"run-{i:06d}", s, TEXT) for i, s in enumerate(seeds)]
    out = campaign_dir(tmp_path / "run", [CRASH], cases, configs={CRASH: 1.0})
    rows = pq.read_table(out / "results").to_pylist()
    second = rows[1]
    shutil.rmtree(out / "results")  # rows from the finding folders (info.json)
    info_path = out / second["finding_dir"] / "info.json"
    info = json.loads(info_path.read_text())
    drawn = parse_config(info["backend_config"])
    info["backend_config"] = config_text({**drawn, "fuse": False, "unroll": 4, "vectorize": True})
    info_path.write_text(json.dumps(info))
    report = triage(out, TriageConfig(max_tests=100, reduce_first=1, check_repro=False),
                    log=lambda s: None)
    # the second holds vectorize=true too: explained by the first's reduction
    assert [b.key.config for b in report.buckets] == ["vectorize=true"]
    assert report.reductions == 1

    info["backend_config"] = "fuse=false&unroll=4"
    info_path.write_text(json.dumps(info))
    shutil.rmtree(out / "bugs")
    report = triage(out, TriageConfig(max_tests=100, reduce_first=1, check_repro=False),
                    log=lambda s: None)
    keys = sorted(b.key.config for b in report.buckets)
    assert keys == ["fuse=false&unroll=4", "vectorize=true"]
    own = next(b for b in report.buckets if b.key.config == "fuse=false&unroll=4")
    # re-run as it ran (it cannot fail without vectorize): not confirmed
    assert own.confirmed is False and own.count == 1


# ---- repro.py ------------------------------------------------------------------------------------

def _folder_without_running(tmp_path: Path, spec: str, text: str = SMALL) -> str:
    """The repro.py a mismatch bucket of backend spec `spec` gets (the compiler is not run)."""
    tc = _case(text=text)
    from campaign.artifacts import Materialized
    from campaign.reference import run_reference

    ref = run_reference(Materialized(tc)).outputs
    row = {"verdict": "mismatch", "stage": "compare", "error_class": "Mismatch"}
    case = FindingCase(tmp_path, {"backend": spec, "verdict": "mismatch"}, tc.graph, tc.values,
                       [])
    red = Reduction(case, "reduced", tc.graph, tc.values, [], row,
                    {"expected.npz": npz_bytes({f"out{i}": o for i, o in enumerate(ref)})}, tc)
    written = write_bug_folder(tmp_path / "bug", spec, "x-mismatch-x", {"verdict": "mismatch"},
                               red, 0)
    assert written["repro"], written
    src = (tmp_path / "bug" / "repro.py").read_text()
    body = src.split('"""', 2)[2]
    assert not any(f"{w} {m}" in body for w in ("import", "from") for m in ("ir", "campaign"))
    compile(src, "repro.py", "exec")
    return src


@pytest.mark.parametrize("spec,present", [
    ("inductor?simdlen=0",
     ["FLAGS = {'cpp.simdlen': 0}", "MODE = None", "COMPILER = 'inductor'", "FULLGRAPH = True"]),
    ("inductor?mode=max-autotune-no-cudagraphs&dynamic=none&fullgraph=false&cpp_wrapper=true",
     ["FLAGS = {}", "MODE = 'max-autotune-no-cudagraphs'", "FULLGRAPH = False", "DYNAMIC = None",
      "CPP_WRAPPER = True"]),
    ("inductor", ["FLAGS = {}", "MODE = None", "FULLGRAPH = True", "DYNAMIC = False",
                  "CPP_WRAPPER = False", "TRAINING_FLAGS = {}"]),
    ("tvm?mcpu=haswell&opt_level=0&pipeline=default",
     ["TARGET = 'llvm'", "MCPU = 'haswell'", "OPT_LEVEL = 0", "PIPELINE = 'default'"]),
    ("tvm", ["TARGET = 'llvm'", "MCPU = None", "OPT_LEVEL = 3", "PIPELINE = 'fused'"]),
    ("onnx_export?dynamo=false&opset=21", ["DYNAMO = False", "OPSET = 21"]),
    ("onnx_export?optimize=false&opset=20", ["DYNAMO = True", "OPTIMIZE = False", "OPSET = 20"]),
    ("onnx_export", ["DYNAMO = True", "OPTIMIZE = True", "OPSET = None"]),
    ("ort?disabled_optimizers=ConstantFolding,TransposeOptimizer&execution_mode=parallel"
     "&threads=2&opt_level=basic",
     ["DISABLED_OPTIMIZERS = ['ConstantFolding', 'TransposeOptimizer']",
      "EXECUTION_MODE = 'parallel'", "THREADS = 2", "OPT_LEVEL = 'basic'"]),
    ("ort", ["THREADS = 1", "DISABLED_OPTIMIZERS = []", "EXECUTION_MODE = 'sequential'",
             "OPT_LEVEL = 'all'"]),
])
def test_repro_sets_exactly_the_options_of_its_configuration(tmp_path, spec, present):
    """The configuration's options are the script's per-test values (its body's constants),
    one line each."""
    src = _folder_without_running(tmp_path, spec)
    for text in present:
        assert f"\n{text}\n" in src, text


def test_an_ort_repro_in_a_configuration_runs_it_and_judges_the_outputs(tmp_path):
    spec = "ort?disabled_optimizers=ConstantFolding&execution_mode=parallel&threads=2"
    dest = _bug_folder(tmp_path / "a", 0.0, spec)
    src = (dest / "repro.py").read_text()
    assert "DISABLED_OPTIMIZERS = ['ConstantFolding']" in src
    assert "EXECUTION_MODE = 'parallel'" in src
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=120)
    assert outcome == "not reproduced", out
    assert ("graph optimizations 'all', disabled_optimizers ['ConstantFolding'], the parallel "
            "executor, 2 intra-op threads") in out
    dest = _bug_folder(tmp_path / "b", 1.0, spec)
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=120)
    assert outcome == "reproduced" and "REPRODUCED: mismatch" in out, out


@pytest.mark.slow
def test_an_inductor_repro_with_simdlen_0_runs(tmp_path):
    dest = _bug_folder(tmp_path / "a", 0.0, "inductor?simdlen=0")
    outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=600)
    assert outcome == "not reproduced" and "patches: {'cpp.simdlen': 0}" in out, out


@pytest.mark.slow
def test_a_real_tvm_bug_found_in_a_configuration_reduces_to_the_options_it_needs(tmp_path):
    """TVM 0.27 cannot build `Equal` on bool tensors (test_triage.py) at any opt level, pipeline
    or -mcpu: found in a drawn configuration, the configuration reduces away entirely, and the
    repro.py (no option set) reproduces it."""
    text = """graph main(%x0: f32[2,3], %x1: f32[2,3], %x2: f32[2,3]) {
      %v3 = tanh(%x0) : f32[2,3]
      %v4 = gt(%v3, %x1) : b8[2,3]
      %v5 = lt(%x1, %x2) : b8[2,3]
      %v6 = eq(%v4, %v5) : b8[2,3]
      %v7 = cast[to=f32](%v6) : f32[2,3]
      %v8 = add(%v7, %v3) : f32[2,3]
      return %v8
    }"""
    b = make_backend("tvm")
    b.sample_configs = 1.0
    seed = next(s for s in range(1000) if len(b.config_of(s)) >= 2)
    out = campaign_dir(tmp_path / "run", ["tvm"], [_case(text=text, seed=seed)],
                       configs={"tvm": 1.0})
    (row,) = pq.read_table(out / "results").to_pylist()
    assert row["verdict"] == "crash" and len(parse_config(row["backend_config"])) >= 2
    # F04's note knows this bug: without the notes it is new, and reduced
    report = triage(out, TriageConfig(max_tests=100, findings=None), log=lambda s: None)
    (bug,) = [x for x in report.buckets if x.key.kind == "bug"]
    assert bug.key.config == "" and bug.reduced_insts == 1
    assert bug.repro_status == "reproduced"
    info = json.loads((out / bug.artifact_path / "info.json").read_text())
    assert info["original_config"] == row["backend_config"] and info["spec"] == "tvm"
    assert info["reduction"]["steps"][0]["pass"] == "drop_options"
