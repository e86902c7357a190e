"""The real compilers on small fixed cases: each built-in backend agrees with the reference,
known gaps are `unsupported`, a known TVM importer bug is a crash at import, and cuda targets
skip with a reason on a machine without a GPU."""
from __future__ import annotations

import numpy as np
import pytest
from backend_cases import IF_GRAPH, case, elu_f64_model, loop_model, onnx_case

from campaign.backends import make_backend
from campaign.oracle import judge
from campaign.reference import run_reference
from campaign.sandbox import Sandbox, SandboxConfig
from campaign.verdict import Stage, Verdict
from ir.analysis.precision import output_precisions, output_tolerances


def _agrees(m, result) -> bool:
    assert not result.failed and result.verdict is None, result.error_msg
    ref = run_reference(m)
    g = m.tc.graph
    return judge(ref.outputs, result.outputs, output_tolerances(g), output_precisions(g)).verdict \
        is Verdict.PASS


@pytest.mark.parametrize("spec", ["ort", "ort_noopt", "tvm", "tvm?opt_level=0&pipeline=default",
                                  "eager", "eager_f64"])
def test_backend_agrees_with_reference(spec):
    graph_case = case()
    result = make_backend(spec).evaluate(graph_case)
    assert _agrees(graph_case, result)
    assert result.run_ms is not None


@pytest.mark.parametrize("spec", ["ort", "tvm", "eager"])
def test_if_agrees_with_reference_on_both_branches(spec):
    taken = set()
    for seed in (0, 2):  # seed 0 takes the else branch, seed 2 the then branch
        m = case(IF_GRAPH, seed)
        taken.add(bool(m.tc.values["x0"].sum() > m.tc.values["w1"]))
        assert _agrees(m, make_backend(spec).evaluate(m))
    assert taken == {True, False}


def test_rank0_inputs_stay_rank0():
    m = case("""graph main(%x0: i64[], %x1: i64[3]) {
  %v2 = add(%x1, %x0) : i64[3]
  return %v2
}""")
    for spec in ("ort", "tvm"):
        assert _agrees(m, make_backend(spec).evaluate(m)), spec


def test_tvm_loop_is_unsupported_and_ort_runs_it():
    x = np.array([1.0, 2.0], np.float32)
    m = onnx_case(loop_model(), {"x": x})
    tvm = make_backend("tvm").evaluate(m)
    assert (tvm.verdict, tvm.stage, tvm.error_class) == (Verdict.UNSUPPORTED, Stage.IMPORT,
                                                         "OpNotImplemented")
    assert "not supported for frontend ONNX: Loop" in tvm.error_msg
    ort = make_backend("ort").evaluate(m)
    np.testing.assert_array_equal(ort.outputs[0], x + 3)


def test_tvm_elu_float64_import_bug_is_a_crash_at_import():
    # TVM 0.27's ONNX Elu converter builds float32 constants whatever the input dtype, so a
    # float64 Elu fails to import: a real importer bug, reported as a crash (not unsupported)
    m = onnx_case(elu_f64_model(), {"x": np.array([-1.0, 0.0, 2.0])})
    r = make_backend("tvm").evaluate(m)
    if not r.failed:
        pytest.skip("this TVM imports a float64 Elu: the bug is fixed")
    assert r.verdict is None and r.stage is Stage.IMPORT
    assert "Binary operators must have the same datatype" in r.error_msg


def test_onnx_export_agrees_with_reference():
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    backend = make_backend("onnx_export")
    for m in (case(), case(IF_GRAPH, 2)):  # torch.cond -> ONNX If
        assert _agrees(m, backend.evaluate(m))


def test_inductor_in_a_sandbox():
    """One sandbox (a warm, forked process) compiles different graphs, control flow included
    (torch.cond); the python dialect's data-dependent `if` is unsupported with fullgraph."""
    with Sandbox(make_backend("inductor"), SandboxConfig(timeout_s=120)) as sb:
        for m in (case(), case(IF_GRAPH, 2)):
            result = sb.evaluate(m)
            assert _agrees(m, result)
            assert result.compile_ms > 0
        assert sb.stats.processes == 1 and sb.stats.deaths == 0
    r = make_backend("inductor?dialect=python").evaluate(case(IF_GRAPH, 2))
    assert (r.verdict, r.stage) == (Verdict.UNSUPPORTED, Stage.COMPILE)
    assert "data-dependent" in r.error_msg


def _isa_check(library) -> bool:
    source = library.with_name(library.name.split(".")[0] + ".cpp")
    return source.is_file() and "_chk_kernel" in source.read_text()


def test_inductor_cpp_wrapper_builds_the_graph_with_its_control_flow_into_one_library(
        tmp_path, monkeypatch):
    """`cpp_wrapper=true`: the host code (torch.cond's branches included) is C++, built with
    the kernels into one library; without it Python calls one library per kernel."""
    import torch._inductor.config as icfg

    libraries = {}
    for spec in ("inductor?cpp_wrapper=true", "inductor"):
        cache = tmp_path / spec.replace("?", "_").replace("=", "_")
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
        with icfg.patch(fx_graph_cache=False):  # compiled here, into `cache`
            for m in (case(), case(IF_GRAPH, 2)):
                assert _agrees(m, make_backend(spec).evaluate(m))
        entry = [p for p in cache.rglob("*.cpp") if "inductor_entry_impl" in p.read_text()]
        # Inductor's check of the CPU's vector ISA builds a library too, once per process:
        # the first process to compile here builds it (a sandbox's warm-up no longer does)
        built = [p for p in cache.rglob("*.so") if not _isa_check(p)]
        libraries[spec] = (len(built), len(entry))
    assert libraries["inductor?cpp_wrapper=true"] == (2, 2)  # one per graph, with the wrapper
    n_libs, n_entry = libraries["inductor"]
    assert n_entry == 0 and n_libs > 2


@pytest.mark.parametrize("spec", ["ort_cuda", "tvm_cuda", "tvm_torch_cuda", "inductor_cuda",
                                  "onnx_export?device=cuda"])
def test_cuda_targets_skip_without_gpu(spec):
    graph_case = case()
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    backend = make_backend(spec)
    assert backend.target == "cuda"
    with Sandbox(backend) as sb:
        r = sb.evaluate(graph_case)
    assert (r.verdict, r.stage, r.error_class) == (Verdict.SKIPPED, None, "Unavailable")
    assert "GPU" in r.error_msg or "CUDA" in r.error_msg


def test_exporter_cond_with_constant_bug_is_a_crash_at_import():
    # torch 2.13: torch.export captures a torch.cond whose branch makes a tensor constant
    # (gather's index tensor), but run_decompositions (the exporter's step 2) fails with
    # "Attempting to use FunctionalTensor on its own": an exporter bug, a crash at import,
    # recorded with the wrapped error's class (not the generic ConversionError)
    pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")
    m = case("""graph main(%x0: f32[2], %w1: param f32[]) {
  %v2 = reduce_sum[axis=0, keepdim=false](%x0) : f32[]
  %v3 = gt(%v2, %w1) : b8[]
  %v7 = if(%v3, %x0) : f32[2] {
    graph then(%b4: f32[2]) {
      %v5 = gather[axis=0, indices=[1,0]](%b4) : f32[2]
      return %v5
    }
    graph else(%b6: f32[2]) {
      %v8 = cos(%b6) : f32[2]
      return %v8
    }
  }
  return %v7
}""")
    r = make_backend("onnx_export").evaluate(m)
    if not r.failed:
        pytest.skip("this torch exports the cond: the bug is fixed")
    assert (r.verdict, r.stage, r.error_class) == (None, Stage.IMPORT, "RuntimeError")
    assert "FunctionalTensor" in r.error_msg and "raised as ConversionError" in r.error_msg


SCAN_GRAPH = """graph main(%xs: f32[4,3], %c: f32[3]) {
  %v, %ys = scan[num_carries=1, reverse=false](%c, %xs) : f32[3], f32[4,3] {
    graph body(%b1: f32[3], %b2: f32[3]) {
      %s = add(%b1, %b2) : f32[3]
      %y = mul(%b1, %b2) : f32[3]
      return %s, %y
    }
  }
  return %v, %ys
}"""


def test_a_scan_with_graph_breaks_allowed_is_inductors_known_bug_not_a_finding():
    """pytorch#153437: with fullgraph=False Inductor's scan lowering fails on every scan
    (`SCAN_WITH_GRAPH_BREAKS`, matched by its message and the lowering's frame); with
    fullgraph=True the same program compiles and agrees."""
    m = case(SCAN_GRAPH)
    r = make_backend("inductor?dialect=hop&fullgraph=false").evaluate(m)
    assert (r.verdict, r.stage) == (Verdict.UNSUPPORTED, Stage.COMPILE), r.error_msg
    assert r.error_msg.startswith(
        "torch.scan under fullgraph=False fails in Inductor's scan-to-while_loop lowering "
        "(pytorch#153437): DataDependentOutputException: aten._local_scalar_dense.default")
    assert "post_grad.body_fn" in r.frames
    assert _agrees(m, make_backend("inductor?dialect=hop").evaluate(m))


LOOP_WITH_COUNTER = """graph main(%n: i64[], %x: f32[3]) {
  %y = loop(%n, %x) : f32[3] {
    graph body(%i: i64[], %a: f32[3]) {
      %f = cast[to=f32](%i) : f32[]
      %b = add(%a, %f) : f32[3]
      return %b
    }
  }
  return %y
}"""


def test_a_python_int_loop_carry_is_inductors_known_bug_only_in_that_form():
    """pytorch#166525: Inductor fails on a torch.while_loop carrying a Python int, which the
    form `scalars=number` makes of a loop's counter (`WHILE_LOOP_INT_CARRY`); the table of the
    default form (counters as 0-d tensors) does not hold it."""
    from campaign.backends.inductor import WHILE_LOOP_INT_CARRY

    assert WHILE_LOOP_INT_CARRY not in make_backend("inductor?dialect=hop").known_unsupported()
    r = make_backend("inductor?dialect=hop&scalars=number").evaluate(case(LOOP_WITH_COUNTER))
    assert (r.verdict, r.stage) == (Verdict.UNSUPPORTED, Stage.COMPILE), r.error_msg
    assert r.error_msg.startswith("torch.while_loop carrying a Python int fails in Inductor "
                                  "(pytorch#166525): AssertionError: A subgraph argument")
