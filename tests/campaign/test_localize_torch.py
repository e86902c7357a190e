"""Localization (docs/triage.md, "Where the fault is"): torch.compile's plan (stages, torch's
CompilerBisector, the smallest configuration) and the torch.onnx exporter's (its steps, the
optimizer's passes), run by `repro.py --localize` on real compilers and small known-bad
graphs from docs/bugs and docs/findings.

Each test builds a bug folder from GraphIR text (its repro.py as the triage writes it; the
compiler is not run to build it) and checks `localize_folder`'s culprit. Inductor compiles
take 5-30 s each: the stage tests run by default, the CompilerBisector and flags tests are
slow. The extensions' switches (compile regions, custom ops that write, and the cache
repro's plan) run on a stand-in probe by default, and on real scripts with a fault put into
torch at their top when slow."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from buggy_backends import WRITES

import ir
from campaign.backends.repro_scripts.localize import PASSES, SAME, Probe, Step
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
    # a region in a scan body, differentiated: scan and the region's invoke_subgraph both run
    # eagerly; unmarked, the region is a plain call and it passes (32 s with its check)
    pytest.param("F57", "torch: torch.compiler.nested_compile_region run eagerly (its autograd "
                 "rule or eager forward)", 3, marks=pytest.mark.slow),
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


# ---- the extensions' switches (docs/extensions.md): compile regions, custom ops that write,
# the compile caches. Their plan's steps run in the default suite on a stand-in probe, whose
# runs fare as a function of what they change; each kind of culprit is then shown on a real
# script run with a fault injected into torch (slow)

class StandIn(Probe):
    """A probe that runs nothing: `fares(values, env)` says how each run fares."""

    def __init__(self, fares: Callable[[dict[str, Any], dict[str, str]], str]):
        super().__init__("repro.py", 60.0)
        self.fares = fares

    def run(self, what: str, values: dict[str, Any], env: dict[str, str] | None = None) -> str:
        values = {**self.fixed, **values}
        outcome = self.fares(values, env or {})
        self.steps.append(Step(what, {**values, **({"env": env} if env else {})}, outcome, 0.0))
        return outcome


@torch.compiler.nested_compile_region
def _region_r0(site: Any, *xs: Any) -> Any:
    return xs[0]


@torch.library.custom_op("dynsmith_localize_test::w", mutates_args=("x",))
def _writes(x: torch.Tensor, y: torch.Tensor) -> None:
    x.add_(y)


@torch.library.custom_op("dynsmith_localize_test::p", mutates_args=())
def _pure(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


#: the namespaces of a program with a compile region, with a custom op that writes, with a
#: pure custom op only
WITH_REGION = {"region_r0": _region_r0}
WITH_WRITES = {"w": torch.ops.dynsmith_localize_test.w}
WITH_PURE = {"p": torch.ops.dynsmith_localize_test.p}

REINPLACE_OFF = {"TORCHINDUCTOR_DISABLED_PASSES": "REINPLACE_INPLACEABLE_OPS"}
V1 = {"TORCHDYNAMO_AUTO_FUNCTIONALIZED_V2": "0"}


def _stages_from(first: str) -> Callable[[dict[str, Any]], bool]:
    """Whether a run's stage is `first` or a later one (the failure shows from there on)."""
    order = ["none", "eager", "aot_eager", "aot_eager_decomp_partition", "inductor"]
    return lambda values: order.index(values.get("COMPILER", "inductor")) >= order.index(first)


def _plan(fails: Callable[[dict[str, Any], dict[str, str]], bool],
          program: dict[str, Any]) -> tuple[str | None, str, list[tuple[dict[str, Any], str]]]:
    from campaign.backends.inductor.torch_compile import ablate_compile

    probe = StandIn(lambda values, env: SAME if fails(values, env) else PASSES)
    culprit, why = ablate_compile(probe, program)
    return culprit, why, [(s.values, s.outcome) for s in probe.steps]


STAGE_RUNS = [({"COMPILER": "none"}, PASSES), ({"COMPILER": "eager"}, PASSES),
              ({"COMPILER": "aot_eager"}, PASSES),
              ({"COMPILER": "aot_eager_decomp_partition"}, PASSES)]


def test_a_reused_region_is_named_at_the_stage_dynamo_fails():
    """Dynamo stamps a region traced for one call out at another it does not fit (its guards
    let it): backend='eager' fails alike; unmarked, or with the reuse off, it passes."""
    stage = _stages_from("eager")
    culprit, why, runs = _plan(lambda values, env: stage(values) and values.get("REGIONS") not in
                               ("unmarked", "no_reuse"), WITH_REGION)
    assert culprit == "dynamo: nested_compile_region (region reuse)", why
    assert runs == [({"COMPILER": "none"}, PASSES), ({"COMPILER": "eager"}, SAME),
                    ({"COMPILER": "eager", "REGIONS": "unmarked"}, PASSES),
                    ({"COMPILER": "eager", "REGIONS": "no_reuse"}, PASSES)]
    assert why.endswith("with the compile regions unmarked it passes; marked, with Dynamo's "
                        "reuse of a traced region off (every call traced anew) it passes: a "
                        "region traced for one call and stamped out at another is at fault "
                        "(its guards let it be reused where it does not fit)"), why


def test_inductors_invoke_subgraph_is_told_from_dynamos_trace_of_the_region():
    """Only Inductor fails, the regions' invoke_subgraph calls inlined before it it passes."""
    stage = _stages_from("inductor")
    culprit, why, runs = _plan(lambda values, env: stage(values) and values.get("REGIONS") not in
                               ("unmarked", "inlined"), WITH_REGION)
    assert culprit == "inductor: invoke_subgraph (the region's subgraph compiled)", why
    assert runs == [*STAGE_RUNS, ({"REGIONS": "unmarked"}, PASSES), ({"REGIONS": "no_reuse"}, SAME),
                    ({"REGIONS": "inlined"}, PASSES)]


def test_dynamos_trace_of_a_region_is_named_when_only_unmarking_it_helps():
    stage = _stages_from("eager")
    culprit, why, runs = _plan(lambda values, env: stage(values)
                               and values.get("REGIONS") != "unmarked", WITH_REGION)
    assert culprit == "dynamo: nested_compile_region (the region's trace)", why
    assert [v.get("REGIONS") for v, _ in runs] == [None, None, "unmarked", "no_reuse", "inlined"]


def test_a_region_program_whose_failure_needs_no_region_goes_on_to_the_stage_culprit():
    stage = _stages_from("aot_eager")
    culprit, why, runs = _plan(lambda values, env: stage(values), WITH_REGION)
    assert culprit == "aot_eager: AOT autograd (functionalization, the joint graph)", why
    assert runs[-1] == ({"COMPILER": "aot_eager", "REGIONS": "unmarked"}, SAME)
    assert why.endswith("with the compile regions unmarked it fails the same way"), why


@pytest.mark.parametrize("v1_fails,culprit", [
    (False, "inductor: reinplace (auto_functionalized_v2)"),
    (True, "inductor: reinplace (auto_functionalized)")])
def test_inductors_reinplacing_of_a_custom_op_that_writes_is_named(v1_fails, culprit):
    """Only Inductor fails; with its re-inplacing pass off it passes; with auto_functionalized
    v1 it passes (the pass fails on v2 only) or not (on both forms)."""
    stage = _stages_from("inductor")
    found, why, runs = _plan(lambda values, env: stage(values) and env != REINPLACE_OFF
                             and (v1_fails or env != V1), WITH_WRITES)
    assert found == culprit, why
    assert runs == [*STAGE_RUNS, ({"env": REINPLACE_OFF}, PASSES),
                    ({"env": V1}, SAME if v1_fails else PASSES)]
    assert ("the program's custom ops that write (dynsmith_localize_test::w): with Inductor's "
            "re-inplacing pass off it passes") in why


def test_functionalization_into_auto_functionalized_v2_is_named_at_the_aot_eager_stage():
    stage = _stages_from("aot_eager")
    culprit, why, runs = _plan(lambda values, env: stage(values) and env != V1, WITH_WRITES)
    assert culprit == "functionalization: auto_functionalized_v2", why
    assert runs == [({"COMPILER": "none"}, PASSES), ({"COMPILER": "eager"}, PASSES),
                    ({"COMPILER": "aot_eager"}, SAME),
                    ({"COMPILER": "aot_eager", "env": V1}, PASSES)]


def test_inductors_handling_of_auto_functionalized_v2_is_named_when_reinplacing_is_not():
    stage = _stages_from("inductor")
    culprit, why, _ = _plan(lambda values, env: stage(values) and env != V1, WITH_WRITES)
    assert culprit == "inductor: auto_functionalized_v2", why


def test_a_pure_custom_op_or_no_extension_asks_no_switch_of_them():
    """A pure op is not functionalized (nothing to re-inplace): the plan is the stages' and
    the bisector's alone."""
    stage = _stages_from("inductor")
    for program in (WITH_PURE, {}):
        _, _, runs = _plan(lambda values, env: stage(values), program)
        assert runs[:4] == STAGE_RUNS
        assert all("REGIONS" not in v and v.get("env") not in (REINPLACE_OFF, V1)
                   for v, _ in runs), runs


@pytest.mark.parametrize("unmarked,culprit", [
    (PASSES, "torch: torch.compiler.nested_compile_region run eagerly (its eager forward)"),
    (SAME, "torch: torch._higher_order_ops.scan run eagerly (its eager forward)")])
def test_unmarking_the_regions_tells_which_higher_order_op_fails_eagerly(monkeypatch, unmarked,
                                                                        culprit):
    """Run eagerly it fails alike, and it calls two kinds of higher-order op, one of them the
    compile regions: unmarked, it passes (the regions are named) or still fails alike (the
    other kind is)."""
    from campaign.backends.inductor import torch_compile

    monkeypatch.setattr(torch_compile, "HIGHER_ORDER_OPS", [
        "torch._higher_order_ops.scan", "torch.compiler.nested_compile_region"])
    monkeypatch.setattr(torch_compile, "EXPECT", {"verdict": "crash", "stage": "run",
                                                  "error_class": "RuntimeError"})
    found, why, runs = _plan(lambda values, env: values.get("REGIONS") != "unmarked"
                             or unmarked == SAME, WITH_REGION)
    assert found == culprit, why
    assert runs == [({"COMPILER": "none"}, SAME),
                    ({"COMPILER": "none", "REGIONS": "unmarked"}, unmarked)]


#: the cache plan (campaign/backends/inductor/repro_cache.py, `ablate`)
BOTH = ["fx_graph_cache", "autograd_cache"]


def _cache_plan(fails: Callable[[dict[str, Any]], bool]
                ) -> tuple[str | None, str, list[tuple[dict[str, Any], str]]]:
    from campaign.backends.inductor.repro_cache import ablate

    probe = StandIn(lambda values, env: SAME if fails(values) else PASSES)
    culprit, why = ablate(probe)
    return culprit, why, [(s.values, s.outcome) for s in probe.steps]


def test_a_stale_aot_autograd_cache_entry_is_named():
    """The warm compile served the twin's AOT autograd entry: without the twin, with the
    caches off, or the AOT autograd cache off alone, it passes."""
    culprit, why, runs = _cache_plan(lambda v: v.get("TWIN_FIRST", True)
                                     and "autograd_cache" in v.get("CACHES", BOTH)
                                     and "fx_graph_cache" in v.get("CACHES", BOTH))
    assert culprit == "aot_autograd: AOT autograd cache", why
    assert runs == [({"CACHES": []}, PASSES), ({"TWIN_FIRST": False}, PASSES),
                    ({"CACHES": ["fx_graph_cache"]}, PASSES)]
    assert why.startswith("with both caches off it passes; without the near-twin compiled first "
                          "it passes: the failure needs the twin's cache entries; with the AOT "
                          "autograd cache off alone it passes"), why


def test_a_stale_fx_graph_cache_entry_is_named():
    culprit, why, runs = _cache_plan(lambda v: v.get("TWIN_FIRST", True)
                                     and "fx_graph_cache" in v.get("CACHES", BOTH))
    assert culprit == "inductor: FX graph cache", why
    assert runs[-1] == ({"CACHES": ["fx_graph_cache"]}, SAME)


def test_a_cache_test_failing_without_the_caches_gets_torch_compiles_plan_with_them_off():
    stage = _stages_from("aot_eager")
    culprit, why, runs = _cache_plan(stage)
    assert culprit == "aot_eager: AOT autograd (functionalization, the joint graph)", why
    assert runs == [({"CACHES": []}, SAME), ({"CACHES": [], "TWIN_FIRST": False}, SAME),
                    ({"CACHES": [], "TWIN_FIRST": False, "COMPILER": "none"}, PASSES),
                    ({"CACHES": [], "TWIN_FIRST": False, "COMPILER": "eager"}, PASSES),
                    ({"CACHES": [], "TWIN_FIRST": False, "COMPILER": "aot_eager"}, SAME)]
    assert why.startswith("with both caches off it still fails the same way, so they are not "
                          "at fault (without the near-twin as well it fails the same way); "
                          "torch.compile's plan with them off: without torch.compile it "
                          "passes"), why


# ---- the same culprits on real scripts: the bug folder's repro.py with a fault put into torch
# at its top, so that every run of the script (the localization's too) has it

def _inject(dest: Path, fault: str) -> None:
    path = dest / "repro.py"
    src = path.read_text()
    head = "from __future__ import annotations\n"
    assert head in src
    path.write_text(src.replace(head, head + "\n" + fault.strip() + "\n\n", 1))


#: two calls of one region function with the same body: Dynamo (2.13: without reuse, a site
#: object being no input it fingerprints) installs one subgraph for both, so invoke_subgraph
#: reaches Inductor (a region called once is inlined before it)
REGION_TWICE = """graph main(%x: f32[4,3], %y: f32[4,3]) {
  %a = region[label=r0](%x) : f32[4,3] {
    graph r0(%x1: f32[4,3]) {
      %s = sin(%x1) : f32[4,3]
      return %s
    }
  }
  %b = region[label=r0](%y) : f32[4,3] {
    graph r0(%x2: f32[4,3]) {
      %s2 = sin(%x2) : f32[4,3]
      return %s2
    }
  }
  %e = add(%a, %b) : f32[4,3]
  return %e
}"""

#: Inductor refuses to lower invoke_subgraph
INVOKE_SUBGRAPH_LOWERING = """
import torch
import torch._inductor.lowering as _lowering


def _refused(*args, **kwargs):
    raise RuntimeError("injected fault: Inductor lowers invoke_subgraph")


_lowering.lowerings[torch.ops.higher_order.invoke_subgraph] = _refused
"""


@pytest.mark.slow  # 8 runs, 4 of them Inductor compiles: 52 s on 2 cores
def test_inductors_invoke_subgraph_is_named_on_a_real_script(tmp_path):
    row = {"verdict": "crash", "stage": "compile", "error_class": "InductorError"}
    dest = _folder(tmp_path, "inductor", REGION_TWICE, row)
    _inject(dest, INVOKE_SUBGRAPH_LOWERING)
    loc = localize_folder(dest, budget_s=600)
    assert loc.culprit == "inductor: invoke_subgraph (the region's subgraph compiled)", \
        _ablation(loc)
    assert [(s.values, s.outcome) for s in loc.steps[1:]] == [
        *STAGE_RUNS, ({"REGIONS": "unmarked"}, PASSES), ({"REGIONS": "no_reuse"}, SAME),
        ({"REGIONS": "inlined"}, PASSES)]


@pytest.mark.slow  # 6 runs, no Inductor compile: 32 s on 2 cores
def test_a_real_region_bug_of_aot_autograd_is_named_on_its_trigger(tmp_path):
    """F59 (docs/findings): one region called in a while_loop body and in a loop nested in it;
    AOT autograd's make_fx registers the region's graph module under a dotted name. eager
    passes, aot_eager fails; unmarked it passes, reuse off it still fails (2.13 reuses
    nothing), with the invoke_subgraph calls inlined before AOT autograd it passes."""
    from campaign.triage.pages.notes import load_notes
    from campaign.triage.pipeline.note_known import ROOT
    from campaign.triage.pipeline.note_runs import trigger_folder

    notes = ROOT / "docs" / "findings"
    trigger = next(n for n in load_notes(notes).values() if n.bug.startswith("F59-")).triggers[0]
    dest, why = trigger_folder(trigger, notes, tmp_path / "F59")
    assert dest is not None, why
    loc = localize_folder(dest, budget_s=600)
    assert loc.culprit == "aot_eager: invoke_subgraph (AOT autograd's tracing of the region)", \
        _ablation(loc)
    assert [(s.values, s.outcome) for s in loc.steps] == [
        ({}, SAME), ({"COMPILER": "none"}, PASSES), ({"COMPILER": "eager"}, PASSES),
        ({"REGIONS": "unmarked"}, PASSES), ({"REGIONS": "no_reuse"}, SAME),
        ({"REGIONS": "inlined"}, PASSES)]


#: one region function, two bodies chosen by the site's flag, on operands of one type
REGION_FLAG = REGION_TWICE.replace("%s2 = sin(%x2) : f32[4,3]\n      return %s2",
                                   "%c2 = cos(%x2) : f32[4,3]\n      return %c2")

#: Dynamo's reuse check lets any traced region be stamped out at any later call of its
#: function (the cos call gets the sin subgraph)
REUSE_UNGUARDED = """
import torch._dynamo.variables.invoke_subgraph as _invoke_subgraph

_invoke_subgraph.is_reusable = lambda *args, **kwargs: True
"""

#: a python whose torch reuses a traced region across site objects (2.14.1: 2.13 does not
#: fingerprint them, so it never reuses a dynsmith region)
PYTHON_214 = os.environ.get("DYNSMITH_PYTHON_214", "/work/venv214/bin/python")


@pytest.mark.slow  # 5 runs on torch 2.14.1, one of them an Inductor compile: 40 s
@pytest.mark.skipif(not os.path.exists(PYTHON_214), reason=f"no torch 2.14 at {PYTHON_214}")
def test_a_reused_region_is_named_on_a_real_script(tmp_path):
    assert "cos(%x2)" in REGION_FLAG
    dest = _folder(tmp_path, "inductor", REGION_FLAG, MISMATCH)
    _inject(dest, REUSE_UNGUARDED)
    loc = localize_folder(dest, budget_s=600, python=PYTHON_214)
    assert loc.culprit == "dynamo: nested_compile_region (region reuse)", _ablation(loc)
    assert [(s.values, s.outcome) for s in loc.steps[1:]] == [
        ({"COMPILER": "none"}, PASSES), ({"COMPILER": "eager"}, SAME),
        ({"COMPILER": "eager", "REGIONS": "unmarked"}, PASSES),
        ({"COMPILER": "eager", "REGIONS": "no_reuse"}, PASSES)]




def _reinplace_fault(forms: str) -> str:
    """Inductor's re-inplacing pass, after its work, refuses a graph holding `forms`."""
    return f"""
import torch
import torch._inductor.fx_passes.post_grad as _post_grad

_real_reinplace = _post_grad.reinplace_inplaceable_ops
_FORMS = {forms}


def _reinplace(fake_tensor_updater, graph):
    _real_reinplace(fake_tensor_updater, graph)
    if any(node.target in _FORMS for node in graph.nodes):
        raise RuntimeError("injected fault: re-inplacing an auto_functionalized op")


_post_grad.reinplace_inplaceable_ops = _reinplace
"""


@pytest.mark.slow  # 7 runs, 3 of them Inductor compiles: 52 s on 2 cores
@pytest.mark.parametrize("forms,culprit", [
    ("(torch.ops.higher_order.auto_functionalized_v2,)",
     "inductor: reinplace (auto_functionalized_v2)"),
    ("(torch.ops.higher_order.auto_functionalized_v2, torch.ops.higher_order.auto_functionalized)",
     "inductor: reinplace (auto_functionalized)")])
def test_inductors_reinplacing_is_named_on_a_real_script(tmp_path, forms, culprit):
    row = {"verdict": "crash", "stage": "compile", "error_class": "InductorError"}
    dest = _folder(tmp_path, "inductor", WRITES, row)
    _inject(dest, _reinplace_fault(forms))
    loc = localize_folder(dest, budget_s=600)
    assert loc.culprit == culprit, _ablation(loc)
    v1 = PASSES if culprit.endswith("_v2)") else SAME
    assert [(s.values, s.outcome) for s in loc.steps[1:]] == [
        *STAGE_RUNS, ({"env": REINPLACE_OFF}, PASSES), ({"env": V1}, v1)]


#: AOT autograd's functionalization refuses to make an auto_functionalized_v2 op
V2_REFUSED = """
import torch._higher_order_ops.auto_functionalize as _auto_functionalize


def _refused(*args, **kwargs):
    raise RuntimeError("injected fault: auto_functionalized_v2")


_auto_functionalize.do_auto_functionalize_v2 = _refused
"""


@pytest.mark.slow  # 4 runs, no Inductor compile: 21 s on 2 cores
def test_functionalization_into_auto_functionalized_v2_is_named_on_a_real_script(tmp_path):
    row = {"verdict": "crash", "stage": "compile", "error_class": "RuntimeError"}
    dest = _folder(tmp_path, "aot_eager", WRITES, row)
    _inject(dest, V2_REFUSED)
    loc = localize_folder(dest, budget_s=600)
    assert loc.culprit == "functionalization: auto_functionalized_v2", _ablation(loc)
    assert [(s.values, s.outcome) for s in loc.steps[1:]] == [
        ({"COMPILER": "none"}, PASSES), ({"COMPILER": "eager"}, PASSES), ({"env": V1}, PASSES)]
