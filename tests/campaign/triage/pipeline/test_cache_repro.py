"""A cache test's standalone repro.py (campaign/triage/pipeline/cache_repro.py, docs/extensions.md):
the test's program and its near-twin's as torch code, both compile caches on as the Inductor
backend turns them on, the twin compiled first in a fresh cache directory, then the test warm
there and cold in another, each judged against eager. Run in a fresh Python where dynsmith
cannot be imported, on torch's real caches: a finding of the test double `StaleWarmCache` (a
`schema` twin) does not reproduce there, since the real keys tell the twin from the test, and
does once both keys are made one constant (a simulated key that misses everything); a self
pair hits both caches and agrees. The triage reaches it: a cache finding's folder holds its
near-twin (the rename included), the triage's re-run rebuilds it (the twin compiled first, then
the test warm and cold), confirms the finding without reducing it, and the bug folder's
repro.py is this script.

Each script run compiles with Inductor four times (about 18 s on 2 cores): one runs by default
(the simulated key bug), the others are `slow`, its localization (`--localize`: one cache's key
made constant, or a fault the caches do not cause) among them."""
from __future__ import annotations

import ast
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from buggy_backends import WRITES, StaleWarmCache

from campaign.backends import make_backend
from campaign.backends.base import ReproSpec
from campaign.findings import FindingStore
from campaign.modes.cache import CACHE, CacheSpec, draw_twin, schema_twin
from campaign.testcase import TestCase, random_values
from campaign.triage import TriageConfig
from campaign.triage.bugdb.runner import run_process
from campaign.triage.pipeline.buckets import read_bugs_table
from campaign.triage.pipeline.cache_repro import cache_repro_source
from campaign.triage.pipeline.campaign_triage import triage
from campaign.triage.pipeline.reduction import (
    BackendRunner,
    FindingCase,
    Reduction,
    load_finding,
    reduce_finding,
)
from campaign.triage.pipeline.repro import _BLOCK_DYNSMITH, run_fresh, write_bug_folder
from campaign.worker import FuzzWorker, WorkerConfig
from ir import parse
from ir.ops.custom import Custom

#: a pure custom op: its `schema` twin returns one more result
PURE = """graph main(%x: f32[3,2]) {
  %r = custom[label=p, mutates=[]](%x) : f32[3,2] {
    graph p(%x1: f32[3,2]) {
      %e = exp(%x1) : f32[3,2]
      return %e
    }
  }
  return %r
}
"""

#: both caches' keys made one constant before the script runs: every lookup finds what was
#: written last, whatever it was compiled from (a cache key bug, simulated)
CONSTANT_KEYS = """
import torch._functorch._aot_autograd.autograd_cache as aot_cache
import torch._inductor.codecache as codecache


def constant(key_of):
    def key(*args, **kwargs):
        found, lines = key_of(*args, **kwargs)
        return found[0] + "0" * (len(found) - 1), lines
    return key


codecache.compiled_fx_graph_hash = constant(codecache.compiled_fx_graph_hash)
aot_cache.autograd_cache_key = constant(aot_cache.autograd_cache_key)
"""

NOT_REPRODUCED = "NOT REPRODUCED: every output matches the reference"
#: the test double as a campaign names it (its findings reproduced as Inductor's)
STALE = "buggy_backends:StaleWarmCache"


def _how() -> ReproSpec:
    how = make_backend("inductor").repro_spec()
    assert how is not None and how.bodies is not None
    return how


def _op_name(tc: TestCase) -> str:
    """The name the printed programs register the test's custom op under."""
    (inst,) = [i for i, _ in tc.graph.walk() if isinstance(i.op, Custom)]
    assert isinstance(inst.op, Custom)
    return inst.op.qualname(inst.blocks[0]).partition("::")[2]


def _cache_test(text: str, cache: CacheSpec | None = None) -> TestCase:
    g = parse(text)
    tc = TestCase("t0", 0, g, random_values(g, 0))
    tc.cache = cache if cache is not None else schema_twin(g, random.Random(0))
    return tc


def _bug_folder(dest: Path, tc: TestCase) -> tuple[Path, dict[str, Any]]:
    """The bug folder of `tc` run on `StaleWarmCache` (its warm outputs the twin's), written
    for Inductor as a mismatch (the row's own verdict when it is one); its row."""
    worker = FuzzWorker(WorkerConfig(backends=[], sandbox=False))
    worker.backends = [StaleWarmCache()]
    row: dict[str, Any] = dict(worker.run_case(tc).rows[0])
    assert row["mode"] == "cache", row
    if row["verdict"] != "mismatch":  # a pair that agrees: claimed to fail
        row = {**row, "verdict": "mismatch", "stage": "compare", "error_class": "Mismatch"}
    case = FindingCase(dest.parent / "finding", {"backend": "inductor", "verdict": "mismatch"},
                       tc.graph, tc.values, [])
    red = Reduction(case, "confirmed", tc.graph, tc.values, [], row, {}, tc)
    written = write_bug_folder(dest, "inductor", "c-mismatch-c", {"verdict": "mismatch"}, red, 0)
    assert written["repro"], written
    return dest, row


def _lines(stdout: str) -> list[str]:
    return stdout.strip().splitlines()


@pytest.fixture(scope="module")
def stale_schema(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    return _bug_folder(tmp_path_factory.mktemp("schema") / "bug", _cache_test(WRITES))


@pytest.fixture(autouse=True)
def _inductor_cache_here(tmp_path: Path, monkeypatch):
    # the scripts' fresh cache directories go under it (and are removed)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def test_the_script_holds_both_programs_the_twins_op_under_the_tests_name(stale_schema):
    folder, row = stale_schema
    assert (row["verdict"], row["mismatch_output"]) == ("mismatch", 0)  # warm output 0
    src = (folder / "repro.py").read_text()
    code = src.split('"""', 2)[2]
    assert "campaign" not in code
    imported = {a.name for node in ast.walk(ast.parse(src)) if isinstance(node, ast.Import)
                for a in node.names}
    imported |= {node.module for node in ast.walk(ast.parse(src))
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert {m.split(".")[0] for m in imported} <= {"__future__", "faulthandler", "os", "sys",
                                                  "typing", "numpy", "torch", "json", "re",
                                                  "signal", "subprocess", "tempfile", "time",
                                                  "collections", "dataclasses", "contextlib",
                                                  "linecache", "shutil", "threading", "types"}, imported
    name = _op_name(_cache_test(WRITES))
    test_part, twin_part = code.split("\nTEST_PROGRAM = ", 1)[1].split("\nTWIN_PROGRAM = ", 1)
    assert f"torch.library.custom_op('dynsmith_src::{name}'" in test_part
    assert "schema='(Tensor(a0!) x0, Tensor x1) -> ()'" in test_part
    assert f"torch.library.custom_op('dynsmith_src::{name}'" in twin_part
    assert "schema='(Tensor x0, Tensor x1) -> Tensor'" in twin_part
    assert f"\nTWIN_RENAMED = ['dynsmith_src::{name}']\n" in code
    assert "\nTWIN = 'schema'\n" in code and "\nTWIN_VALUES = 'inputs.npz'\n" in code
    assert "\nLABELS = ['warm output 0', 'cold output 0']\n" in code
    assert "\nFULLGRAPH = False\n" in code  # the python dialect breaks the graph
    for name in ("cache_twin.json", "twin.gir", "expected.npz", "inputs.npz"):
        assert (folder / name).is_file(), name


@pytest.mark.slow  # 18 s: the script compiles with Inductor four times
def test_a_stale_warm_cache_finding_is_not_reproduced_by_the_real_caches(stale_schema):
    folder, _ = stale_schema
    code, stdout, stderr, expired = run_fresh(folder, [], 300)
    lines = _lines(stdout)
    assert (code, expired) == (0, False), stdout + stderr
    assert lines[-1] == NOT_REPRODUCED
    assert lines[-2] == ("[repro] the warm compile was served 0 cache entries; warm and cold "
                         "outputs agree")
    assert ("[repro] warm compile: fxgraph_cache_hit 0, fxgraph_cache_miss 1, "
            "fxgraph_cache_bypass 0, autograd_cache_hit 0, autograd_cache_miss 1, "
            "autograd_cache_bypass 0") in lines


def test_a_key_that_misses_everything_serves_the_twin_to_the_warm_compile(stale_schema):
    folder, row = stale_schema
    run = run_process([sys.executable, "-c", CONSTANT_KEYS + _BLOCK_DYNSMITH], folder, 300)
    lines = _lines(run.stdout)
    assert (run.code, run.expired) == (1, False), run.stdout + run.stderr
    # the elements the test double's stale outputs (the twin's) got wrong, no more, no fewer
    (wrong,) = re.findall(r"warm output 0: (\d+/10) elements differ", row["error_msg"])
    assert lines[-1].startswith(f"REPRODUCED: mismatch: warm output 0 (input set 0): {wrong} "
                                "elements differ"), (lines[-1], row["error_msg"])
    assert lines[-2] == ("[repro] the warm compile was served 2 cache entries; warm and cold "
                         "outputs differ")


@pytest.mark.slow  # 18 s: the script compiles with Inductor four times
def test_a_self_pair_hits_both_caches_and_agrees(tmp_path):
    folder, _ = _bug_folder(tmp_path / "bug", _cache_test(WRITES, CacheSpec("self")))
    assert "\nTWIN_PROGRAM = TEST_PROGRAM\n" in (folder / "repro.py").read_text()
    code, stdout, stderr, _ = run_fresh(folder, [], 300)
    lines = _lines(stdout)
    assert code == 0, stdout + stderr
    assert lines[-2:] == ["[repro] the warm compile was served 2 cache entries; warm and cold "
                          "outputs agree", NOT_REPRODUCED]
    assert ("[repro] warm compile: fxgraph_cache_hit 1, fxgraph_cache_miss 0, "
            "fxgraph_cache_bypass 0, autograd_cache_hit 1, autograd_cache_miss 0, "
            "autograd_cache_bypass 0") in lines


def test_each_twin_kind_writes_what_its_compile_needs():
    how = _how()
    expect = {"verdict": "mismatch", "stage": "compare", "error_class": None, "error_sig": None}
    tc = _cache_test(WRITES)
    seen: dict[str, str] = {}
    for seed in range(60):
        spec = draw_twin(tc, seed)
        if spec is not None and spec.twin not in seen:
            tc.cache = spec
            seen[spec.twin] = cache_repro_source(how, tc, tc.graph, expect, "doc", seed)
    assert set(seen) == {"self", "dtype", "stride", "config", "schema"}, set(seen)
    for twin, src in seen.items():
        compile(src, f"repro.py ({twin})", "exec")
        assert f"\nTWIN = {twin!r}\n" in src
    assert "\nTWIN_STRIDED = True\n" in seen["stride"]
    assert "\nTWIN_CONFIG = {}\n" not in seen["config"]
    assert "\nTWIN_VALUES = 'twin_inputs.npz'\n" in seen["dtype"]
    for twin in ("self", "stride", "config"):  # the test's own graph
        assert "\nTWIN_PROGRAM = TEST_PROGRAM\n" in seen[twin]
    for twin in ("dtype", "schema"):  # a graph of its own
        assert "\nTWIN_PROGRAM = TEST_PROGRAM\n" not in seen[twin]


def test_a_pure_ops_twin_returns_one_more_result_under_the_tests_name():
    tc = _cache_test(PURE)
    expect = {"verdict": "crash", "stage": "compile", "error_class": "RuntimeError",
              "error_sig": None}
    src = cache_repro_source(_how(), tc, tc.graph, expect, "doc")
    name = _op_name(tc)
    test_part, twin_part = src.split("\nTEST_PROGRAM = ", 1)[1].split("\nTWIN_PROGRAM = ", 1)
    assert f"'dynsmith_src::{name}'" in test_part and "schema='(Tensor x0) -> Tensor'" in test_part
    assert f"'dynsmith_src::{name}'" in twin_part
    assert "schema='(Tensor x0) -> (Tensor, Tensor)'" in twin_part


def test_no_script_without_a_cache_body_or_for_a_graph_the_twin_was_not_drawn_for():
    from dataclasses import replace

    how = _how()
    tc = _cache_test(WRITES)
    expect = {"verdict": "mismatch", "stage": "compare", "error_class": None, "error_sig": None}
    assert how.bodies is not None
    bare = replace(how, bodies=replace(how.bodies, cache=None))
    with pytest.raises(ValueError) as e:
        cache_repro_source(bare, tc, tc.graph, expect, "doc")
    assert str(e.value) == "no standalone reproducer of a cache test for backend kind 'inductor'"
    with pytest.raises(ValueError) as e:
        cache_repro_source(how, tc, parse(PURE), expect, "doc")
    assert str(e.value) == "the near-twin was drawn for another graph than this one"


# ---- the triage of a cache finding ---------------------------------------------------------------

def _finding(root: Path, tc: TestCase) -> tuple[Path, dict[str, Any]]:
    """The finding folder a campaign stores for `tc` run on the test double (`FindingStore`, as
    a campaign's driver does), and its info.json."""
    with FuzzWorker(WorkerConfig(backends=[STALE], sandbox=False)) as worker:
        report = worker.run_case(tc)
    (row,) = report.rows
    assert (row["mode"], row["verdict"], row["mismatch_output"]) == ("cache", "mismatch", 0), row
    (finding,) = report.findings
    d = FindingStore(root, 5).add(finding)
    assert d is not None
    return root / d, json.loads((root / d / "info.json").read_text())


def test_the_triage_reruns_a_cache_finding_with_its_twin_and_writes_the_cache_repro(tmp_path):
    tc = _cache_test(WRITES)
    folder, info = _finding(tmp_path / "run", tc)
    saved = json.loads((folder / "cache_twin.json").read_text())
    assert saved["twin"] == "schema" and saved["rename"] == tc.cache.rename
    # the bug folder's outputs can then only be the triage's re-run's
    for name in ("actual.npz", "expected.npz"):
        (folder / name).unlink()
    out = tmp_path / "triaged"
    triage(folder, TriageConfig(localize=False, findings=None, check_repro=False), out=out,
           log=lambda s: None)
    (row,) = read_bugs_table(out / "bugs.parquet").to_pylist()
    assert (row["backend"], row["verdict"], row["error_sig"]) == (
        STALE, "mismatch", "Mismatch: warm output 0")
    assert (row["confirmed"], row["reduced_insts"]) == (True, None)
    bug = out / row["artifact_path"]
    bug_info = json.loads((bug / "info.json").read_text())
    assert (bug_info["status"], bug_info["note"]) == ("confirmed", CACHE.unreduced)
    assert CACHE.unreduced == ("a cache test: confirmed, not reduced (its near-twin was drawn "
                               "for its graph)")
    # the re-run compiled the twin first: its warm output is the twin's to the element (the
    # write dropped: tanh(x * x)), its cold one the test's (tanh(x * x - y)), and its row is
    # the campaign's
    x, y = (torch.from_numpy(tc.values[n]) for n in ("x", "y"))
    with np.load(bug / "actual.npz") as z:
        assert sorted(z.files) == ["out0", "out1"]
        assert np.array_equal(z["out0"], torch.tanh(x * x).numpy())
        assert np.array_equal(z["out1"], torch.tanh(x * x - y).numpy())
    assert not np.array_equal(torch.tanh(x * x).numpy(), torch.tanh(x * x - y).numpy())
    for k in ("error_msg", "max_abs_err", "max_rel_err", "mismatch_output", "mismatch_input_set"):
        assert bug_info["row"][k] == info[k], k
    assert re.match(r"warm output 0: \d+/10 elements differ", info["error_msg"]), info
    # the bug folder keeps the twin (rebuilt alike), and its repro.py is the cache repro
    again = load_finding(bug)
    assert again is not None and again.cache is not None
    assert (again.cache.twin, again.cache.graph, again.cache.rename) == (
        "schema", tc.cache.graph, tc.cache.rename)
    src = (bug / "repro.py").read_text()
    compile(src, "repro.py", "exec")
    name = _op_name(tc)
    assert "\nTWIN = 'schema'\n" in src and f"\nTWIN_RENAMED = ['dynsmith_src::{name}']\n" in src
    assert "\nLABELS = ['warm output 0', 'cold output 0']\n" in src
    assert "\nTEST_PROGRAM = " in src and "\nTWIN_PROGRAM = TEST_PROGRAM\n" not in src


def test_without_its_twin_a_cache_finding_reruns_as_an_inference_test_that_passes(tmp_path):
    """What the triage did before it read the twin back: the test double's bug is gone."""
    folder, _ = _finding(tmp_path / "run", _cache_test(WRITES))
    (folder / "cache_twin.json").unlink()
    case = load_finding(folder)
    assert case is not None and case.cache is None
    runner = BackendRunner(STALE, sandbox=False)
    try:
        red = reduce_finding(case, runner)
    finally:
        runner.close()
    assert red.status == "not reproducible"
    assert red.row is not None and (red.row["mode"], red.row["verdict"]) == ("infer", "pass")


def test_a_cache_finding_not_rerun_gets_the_cache_repro_too(tmp_path):
    """A bucket's representative the triage did not re-run (`not reduced`: no time left) has
    no row of its own: the finding's mode and near-twin say it is a cache test."""
    tc = _cache_test(WRITES)
    folder, _ = _finding(tmp_path / "run", tc)
    case = load_finding(folder)
    assert case is not None and case.cache is not None
    red = Reduction(case, "not reduced", case.graph, case.values, case.extra_sets)
    written = write_bug_folder(tmp_path / "bug", STALE, "b", {"verdict": "mismatch"}, red, 0)
    assert written["repro"], written
    assert "\nTWIN = 'schema'\n" in (tmp_path / "bug" / "repro.py").read_text()
    saved = json.loads((tmp_path / "bug" / "cache_twin.json").read_text())
    assert saved["rename"] == tc.cache.rename


# ---- its localization (`repro_cache.ablate`, docs/triage.md "Where the fault is"): the caches
# off, the near-twin left out, then one cache off alone, each culprit shown on one cache's key
# made constant (a key that misses everything) at the script's top, so that every run of the
# localization has it. The plan's other branches run on a stand-in probe
# (tests/campaign/test_localize_torch.py)

def _constant(*keys: str) -> str:
    """CONSTANT_KEYS for `keys` alone (compiled_fx_graph_hash, autograd_cache_key)."""
    modules = {"compiled_fx_graph_hash": "codecache", "autograd_cache_key": "aot_cache"}
    head, _, _ = CONSTANT_KEYS.partition("\n\ncodecache.compiled_fx_graph_hash")
    return head + "\n\n" + "\n".join(f"{modules[k]}.{k} = constant({modules[k]}.{k})"
                                      for k in keys) + "\n"


@pytest.mark.slow  # 4 script runs of up to 4 Inductor compiles each: 94 s on 2 cores
@pytest.mark.parametrize("key,culprit,aot_off", [
    ("autograd_cache_key", "aot_autograd: AOT autograd cache", "passes"),
    ("compiled_fx_graph_hash", "inductor: FX graph cache", "fails the same way")])
def test_a_stale_cache_entry_is_localized_to_its_cache(stale_schema, tmp_path, key, culprit,
                                                       aot_off):
    import shutil

    from campaign.triage.pipeline.localization import localize_folder

    folder = tmp_path / "bug"
    shutil.copytree(stale_schema[0], folder)
    src = (folder / "repro.py").read_text()
    head = "from __future__ import annotations\n"
    (folder / "repro.py").write_text(src.replace(head, head + _constant(key), 1))
    loc = localize_folder(folder, budget_s=600)
    runs = "\n".join(f"{s.what}: {s.outcome}" for s in loc.steps) + f"\n-> {loc.text}"
    assert loc.culprit == culprit, runs
    assert [(s.values, s.outcome) for s in loc.steps] == [
        ({}, "fails the same way"), ({"CACHES": []}, "passes"), ({"TWIN_FIRST": False}, "passes"),
        ({"CACHES": ["fx_graph_cache"]}, aot_off)], runs


#: AOT autograd's functionalization refuses to make an auto_functionalized_v2 op (the test's op
#: writes; its schema twin's is pure): the warm compile and the cold one fail alike, caches or not
V2_REFUSED = """
import torch._higher_order_ops.auto_functionalize as _auto_functionalize


def _refused(*args, **kwargs):
    raise RuntimeError("injected fault: auto_functionalized_v2")


_auto_functionalize.do_auto_functionalize_v2 = _refused
"""


@pytest.mark.slow  # 7 script runs, 2-4 compiles each (none by Inductor but one): 73 s
def test_a_cache_finding_the_caches_do_not_cause_gets_torch_compiles_plan(stale_schema,
                                                                           tmp_path):
    """The caches off, without the twin too, it still fails: torch.compile's plan runs with
    both fixed, on the test's program (its custom op that writes read from TEST_PROGRAM)."""
    import shutil

    from campaign.triage.pipeline.localization import localize_folder

    folder = tmp_path / "bug"
    shutil.copytree(stale_schema[0], folder)
    src = (folder / "repro.py").read_text()
    head = "from __future__ import annotations\n"
    expect = re.search(r"^EXPECT = .*$", src, re.M)
    assert expect is not None
    src = src.replace(expect.group(0), "EXPECT = {'verdict': 'crash', 'stage': 'compile', "
                      "'error_class': 'RuntimeError', 'error_sig': None}", 1)
    (folder / "repro.py").write_text(src.replace(head, head + V2_REFUSED, 1))
    loc = localize_folder(folder, budget_s=900)
    runs = "\n".join(f"{s.what}: {s.outcome}" for s in loc.steps) + f"\n-> {loc.text}"
    assert loc.culprit == "functionalization: auto_functionalized_v2", runs
    off = {"CACHES": [], "TWIN_FIRST": False}
    assert [(s.values, s.outcome) for s in loc.steps] == [
        ({}, "fails the same way"), ({"CACHES": []}, "fails the same way"),
        (off, "fails the same way"), ({**off, "COMPILER": "none"}, "passes"),
        ({**off, "COMPILER": "eager"}, "passes"), ({**off, "COMPILER": "aot_eager"},
                                                    "fails the same way"),
        ({**off, "COMPILER": "aot_eager", "env": {"TORCHDYNAMO_AUTO_FUNCTIONALIZED_V2": "0"}},
         "passes")], runs
