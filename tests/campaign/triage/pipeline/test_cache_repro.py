"""A cache test's standalone repro.py (campaign/triage/pipeline/cache_repro.py, docs/extensions.md):
the test's program and its near-twin's as torch code, both compile caches on as the Inductor
backend turns them on, the twin compiled first in a fresh cache directory, then the test warm
there and cold in another, each judged against eager. Run in a fresh Python where dynsmith
cannot be imported, on torch's real caches: a finding of the test double `StaleWarmCache` (a
`schema` twin) does not reproduce there, since the real keys tell the twin from the test, and
does once both keys are made one constant (a simulated key that misses everything); a self
pair hits both caches and agrees."""
from __future__ import annotations

import ast
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from buggy_backends import StaleWarmCache

from campaign.backends import make_backend
from campaign.backends.base import ReproSpec
from campaign.modes.cache import CacheSpec, draw_twin, schema_twin
from campaign.testcase import TestCase, random_values
from campaign.triage.bugdb.runner import run_process
from campaign.triage.pipeline.cache_repro import cache_repro_source
from campaign.triage.pipeline.reduction import FindingCase, Reduction
from campaign.triage.pipeline.repro import _BLOCK_DYNSMITH, run_fresh, write_bug_folder
from campaign.worker import FuzzWorker, WorkerConfig
from ir import parse
from ir.ops.custom import Custom

#: a mutating custom op: its `schema` twin is the op made pure (its write dropped, so the twin
#: computes tanh(x * x), the test tanh(x * x - y))
WRITES = """graph main(%x: f32[2,5], %y: f32[5]) {
  %a = mul(%x, %x) : f32[2,5]
  %c = clone(%a) : f32[2,5]
  custom[label=w, mutates=[0]](%c, %y) : () {
    graph w(%c1: f32[2,5], %y1: f32[5]) {
      %n = sub(%c1, %y1) : f32[2,5]
      return %n
    }
  }
  %o = tanh(%c) : f32[2,5]
  return %o
}
"""

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
                                                  "linecache", "shutil", "threading"}, imported
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
