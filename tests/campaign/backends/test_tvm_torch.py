"""TVM's torch frontend (`tvm_torch`): torch.export of the module, `from_exported_program`, the
Relax VM. It agrees with the reference on plain graphs, `torch.cond` and an LSTM (which the
ONNX importer cannot take); its unsupported table matches what it really refuses, with the
table's reason, and nothing else; a real compiler bug stays a crash."""
from __future__ import annotations

import pytest
from backend_cases import GRAPH, IF_GRAPH, case

from campaign.backends import BACKENDS, make_backend
from campaign.backends.base import BackendResult
from campaign.backends.tvm import TvmBackend
from campaign.backends.tvm_torch import TVM_TORCH_LACKS, TVM_TORCH_UNSUPPORTED, TvmTorchBackend
from campaign.oracle import judge_sets
from campaign.reference import run_reference
from campaign.sandbox import Sandbox, SandboxConfig
from campaign.verdict import Stage, Verdict
from ir.analysis.precision import output_precisions, output_tolerances

LOOP_GRAPH = """graph main(%x0: f32[3], %x1: i64[]) {
  %v2 = loop(%x1, %x0) : f32[3] {
    graph body(%i0: i64[], %b0: f32[3]) {
      %b1 = sin(%b0) : f32[3]
      return %b1
    }
  }
  return %v2
}"""

SCAN_GRAPH = """graph main(%x0: f32[4], %x1: f32[3,4]) {
  %v2, %v3 = scan[num_carries=1, reverse=false](%x0, %x1) : f32[4], f32[3,4] {
    graph body(%c0: f32[4], %s0: f32[4]) {
      %c1 = add(%c0, %s0) : f32[4]
      %c2 = mul(%c1, %s0) : f32[4]
      return %c1, %c2
    }
  }
  return %v2, %v3
}"""

#: a loop inside a torch.cond branch: the frontend meets while_loop only when it converts it
LOOP_IN_IF_GRAPH = """graph main(%x0: f32[3], %w1: param f32[], %x2: i64[]) {
  %v2 = reduce_sum[axis=0, keepdim=false](%x0) : f32[]
  %v3 = gt(%v2, %w1) : b8[]
  %v7 = if(%v3, %x0, %x2) : f32[3] {
    graph then(%b4: f32[3], %b9: i64[]) {
      %v5 = loop(%b9, %b4) : f32[3] {
        graph body(%i0: i64[], %c0: f32[3]) {
          %c1 = sin(%c0) : f32[3]
          return %c1
        }
      }
      return %v5
    }
    graph else(%b6: f32[3], %b10: i64[]) {
      %v8 = cos(%b6) : f32[3]
      return %v8
    }
  }
  return %v7
}"""

LSTM_GRAPH = """graph main(%x: f32[3,2,4], %w: param f32[1,12,4], %r: param f32[1,12,3], %b: param f32[1,24]) {
  %y, %h, %c = lstm[hidden=3, direction=forward](%x, %w, %r, %b) : f32[3,1,2,3], f32[1,2,3], f32[1,2,3]
  return %y, %h, %c
}"""

#: TVM 0.27: the frontend converts `torch.clamp(int tensor, max=k)` (which the decomposition of
#: a linear resize makes for its indices) into a Relax clip with lower bound -inf, which its
#: legalization cannot turn into an integer: a compile crash on a valid program
RESIZE_LINEAR_GRAPH = """graph main(%x0: f32[2,3,5]) {
  %v1 = resize_linear[scales=[2]](%x0) : f32[2,3,10]
  return %v1
}"""


def _agrees(m, result) -> bool:
    assert not result.failed and result.verdict is None, result.error_msg
    ref = run_reference(m)
    g = m.tc.graph
    return judge_sets(ref.outputs, result.outputs, len(g.outputs), output_tolerances(g),
                      output_precisions(g)).verdict is Verdict.PASS


def test_registered_names_and_options():
    for name, target in (("tvm_torch", "cpu"), ("tvm_torch_cuda", "cuda")):
        assert name in BACKENDS
        b = make_backend(name)
        assert isinstance(b, TvmTorchBackend) and not isinstance(b, TvmBackend)
        assert (b.name, b.target, b.dialect) == (name, target, "hop")
        assert (b.opt_level, b.pipeline) == (3, "fused")
    b = make_backend("tvm_torch?opt_level=0&pipeline=default")
    assert (b.tvm_target, b.opt_level, b.pipeline) == ("llvm", 0, "default")
    with pytest.raises(ValueError) as e:
        make_backend("tvm_torch?opt_level=9")
    assert str(e.value) == "backend 'tvm_torch?opt_level=9': tvm_torch: opt_level must be 0..3, got 9"


def test_plain_graph_agrees_with_the_reference():
    m = case(GRAPH)
    r = make_backend("tvm_torch").evaluate(m)
    assert _agrees(m, r)
    assert r.compile_ms > 0 and r.run_ms is not None and r.compiles == [1]


def test_torch_cond_agrees_on_both_branches_in_a_sandbox():
    """One warm sandbox process (forked after `prepare`) exports, imports and runs both a plain
    graph and a torch.cond (a Relax If), each branch taken by one test."""
    taken = set()
    with Sandbox(make_backend("tvm_torch"), SandboxConfig(timeout_s=120)) as sb:
        for seed in (0, 2):  # seed 0 takes the else branch, seed 2 the then branch
            m = case(IF_GRAPH, seed)
            taken.add(bool(m.tc.values["x0"].sum() > m.tc.values["w1"]))
            assert _agrees(m, sb.evaluate(m))
        assert sb.stats.processes == 1 and sb.stats.deaths == 0
    assert taken == {True, False}


def test_lstm_agrees_with_the_reference():
    # the ONNX importer has no LSTM (TVM_LACKS); this frontend converts aten.lstm
    m = case(LSTM_GRAPH)
    assert _agrees(m, make_backend("tvm_torch").evaluate(m))


def _reduce(op: str, dtype: str = "f32") -> str:
    return f"""graph main(%x0: {dtype}[3,4]) {{
  %v1 = {op}[axis=1, keepdim=false](%x0) : {dtype}[3]
  return %v1
}}"""


#: two gaps in one test, in the up-front check's list
MAX_AND_PROD_GRAPH = """graph main(%x0: f32[3,4]) {
  %v1 = reduce_max[axis=1, keepdim=false](%x0) : f32[3]
  %v2 = reduce_prod[axis=0, keepdim=true](%x0) : f32[1,4]
  return %v1, %v2
}"""

LAYER_NORM_F64_GRAPH = """graph main(%x0: f64[2,3], %w1: param f64[3], %b1: param f64[3]) {
  %v1 = layer_norm[dims=1](%x0, %w1, %b1) : f64[2,3]
  return %v1
}"""

_CONVERTER = "TVM's torch frontend has no converter for this op"


@pytest.mark.parametrize("text, stage, error_class, message", [
    (LOOP_GRAPH, Stage.IMPORT, "AssertionError",
     f"{_CONVERTER}: Unsupported function types ['while_loop']"),
    (SCAN_GRAPH, Stage.IMPORT, "AssertionError",
     f"{_CONVERTER}: Unsupported function types ['scan']"),
    (LOOP_IN_IF_GRAPH, Stage.IMPORT, "KeyError",
     f"{_CONVERTER} (inside a cond branch): 'while_loop'"),
    (_reduce("reduce_max"), Stage.IMPORT, "AssertionError",
     f"{_CONVERTER}: Unsupported function types ['amax.default']"),
    (_reduce("reduce_min", "i64"), Stage.IMPORT, "AssertionError",
     f"{_CONVERTER}: Unsupported function types ['amin.default']"),
    (_reduce("reduce_prod"), Stage.IMPORT, "AssertionError",
     f"{_CONVERTER}: Unsupported function types ['prod.dim_int']"),
    (LAYER_NORM_F64_GRAPH, Stage.COMPILE, "InternalError",
     "TVM's layer_norm supports only float32 and float16: "),
], ids=["loop", "scan", "loop-in-if", "reduce_max", "reduce_min", "reduce_prod", "layer_norm-f64"])
def test_unsupported_table_matches_what_it_refuses(text, stage, error_class, message):
    r = make_backend("tvm_torch").evaluate(case(text))
    assert (r.verdict, r.stage, r.error_class) == (Verdict.UNSUPPORTED, stage, error_class)
    if stage is Stage.IMPORT:
        assert r.error_msg == message
    else:  # TVM's check prints its source location first
        assert r.error_msg.startswith(message)
        assert "layer_norm: only support float32 and float16" in r.error_msg


def test_two_gaps_in_one_test_are_unsupported():
    r = make_backend("tvm_torch").evaluate(case(MAX_AND_PROD_GRAPH))
    assert r.verdict is Verdict.UNSUPPORTED
    assert r.error_msg in (f"{_CONVERTER}: Unsupported function types ['{a}', '{b}']"
                           for a, b in (("amax.default", "prod.dim_int"),
                                        ("prod.dim_int", "amax.default")))


def test_lacks_are_the_ops_whose_torch_form_it_refuses():
    # each refused in test_unsupported_table_matches_what_it_refuses
    assert TVM_TORCH_LACKS == frozenset({"loop", "scan", "reduce_max", "reduce_min", "reduce_prod",
                                         "custom"})  # tests/campaign/backends/test_custom_routing.py
    assert TvmTorchBackend.LACKS == TVM_TORCH_LACKS


@pytest.mark.parametrize("error_class, message", [
    ("AssertionError", "Unsupported function types ['while_loop', 'scan']"),
    ("KeyError", "'scan'"),
])
def test_the_table_matches_the_known_gaps(error_class, message):
    r = BackendResult(stage=Stage.IMPORT, error_class=error_class, error_msg=message)
    assert sum(k.matches(r) for k in TVM_TORCH_UNSUPPORTED) == 1


@pytest.mark.parametrize("stage, error_class, message", [
    # another missing converter, alone or beside a known one, is a new gap: a crash
    (Stage.IMPORT, "AssertionError", "Unsupported function types ['map_impl']"),
    (Stage.IMPORT, "AssertionError", "Unsupported function types ['scan', 'map_impl']"),
    (Stage.IMPORT, "AssertionError", "Unsupported function types ['scans']"),
    (Stage.IMPORT, "KeyError", "'scan.default'"),
    (Stage.IMPORT, "KeyError", "'gelu.default'"),
    (Stage.IMPORT, "KeyError", "'amaxXdefault'"),  # the dot is literal
    # the same text at another stage or of another class is not the gap
    (Stage.COMPILE, "AssertionError", "Unsupported function types ['scan']"),
    (Stage.IMPORT, "ValueError", "'scan'"),
])
def test_the_table_is_narrow(stage, error_class, message):
    r = BackendResult(stage=stage, error_class=error_class, error_msg=message)
    assert not any(k.matches(r) for k in TVM_TORCH_UNSUPPORTED)


def test_a_real_compiler_bug_is_a_crash_at_compile():
    r = make_backend("tvm_torch").evaluate(case(RESIZE_LINEAR_GRAPH))
    if not r.failed:
        pytest.skip("this TVM compiles an integer clamp with one bound: the bug is fixed")
    assert (r.verdict, r.stage, r.error_class) == (None, Stage.COMPILE, "RuntimeError")
    assert r.error_msg == "Cannot convert infinity to BigInt"
