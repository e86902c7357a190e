"""Custom ops (`ir.ops.custom`) and compile regions (`ir.ops.region`), and the backends that
cannot take one: each refuses it at import, as its `LACKS` says (capability routing keeps such
tests off it); ORT takes the model-local function the ONNX form is; the exporter and TVM's
torch frontend take a region (torch.export inlines it)."""
from __future__ import annotations

import pytest
from backend_cases import case

from campaign.backends import make_backend
from campaign.verdict import Stage, Verdict

PURE = """graph main(%x: f32[3], %y: f32[3]) {
  %r = custom[label=k0, mutates=[]](%x, %y) : f32[3] {
    graph k0(%x1: f32[3], %y1: f32[3]) {
      %t = mul(%x1, %y1) : f32[3]
      %u = sin(%t) : f32[3]
      return %u
    }
  }
  return %r
}
"""


@pytest.mark.parametrize("backend, error_class, starts", [
    ("tvm", "OpNotImplemented", "The following operators are not supported for frontend ONNX: k0_"),
    ("tvm_torch", "AssertionError", "Unsupported function types ['k0_"),
])
def test_tvm_frontends_refuse_a_custom_op_so_it_is_routed_away(backend, error_class, starts):
    b = make_backend(backend)
    assert "custom" in b.LACKS
    r = b.evaluate(case(PURE))
    assert (r.stage, r.error_class) == (Stage.IMPORT, error_class)
    assert r.error_msg.startswith(starts), r.error_msg


def test_the_exporter_has_no_translation_for_a_custom_op():
    b = make_backend("onnx_export")
    assert "custom" in b.LACKS
    r = b.evaluate(case(PURE))
    assert (r.verdict, r.stage) == (Verdict.UNSUPPORTED, Stage.IMPORT)
    assert "No ONNX function found for <OpOverload(op='dynsmith.k0_" in r.error_msg


def test_ort_runs_the_local_function():
    r = make_backend("ort").evaluate(case(PURE))
    assert not r.failed, r.error_msg


REGION = """graph main(%x: f32[3], %y: f32[3]) {
  %r = region[label=r0](%x, %y) : f32[3] {
    graph r0(%x1: f32[3], %y1: f32[3]) {
      %t = mul(%x1, %y1) : f32[3]
      %u = sin(%t) : f32[3]
      return %u
    }
  }
  %q = region[label=r0](%r, %y) : f32[3] {
    graph r0(%x2: f32[3], %y2: f32[3]) {
      %t2 = mul(%x2, %y2) : f32[3]
      %u2 = sin(%t2) : f32[3]
      return %u2
    }
  }
  return %q
}
"""


def test_tvm_onnx_frontend_refuses_a_region_so_it_is_routed_away():
    b = make_backend("tvm")
    assert "region" in b.LACKS
    r = b.evaluate(case(REGION))
    assert (r.stage, r.error_class) == (Stage.IMPORT, "OpNotImplemented")
    assert r.error_msg.startswith(
        "The following operators are not supported for frontend ONNX: r0_"), r.error_msg


@pytest.mark.parametrize("backend", ["ort", "onnx_export", "tvm_torch"])
def test_a_region_runs_where_it_is_routed(backend):
    b = make_backend(backend)
    assert "region" not in b.LACKS
    r = b.evaluate(case(REGION))
    assert not r.failed, r.error_msg


def test_inductor_routes_regions_away_from_its_cpp_wrapper_only():
    assert "region" in make_backend("inductor?cpp_wrapper=true").lacks()
    assert "region" not in make_backend("inductor").lacks()


@pytest.mark.slow
def test_the_cpp_wrapper_refusal_of_a_region_is_unsupported():
    r = make_backend("inductor?dialect=hop&cpp_wrapper=true").evaluate(case(REGION))
    assert r.verdict == Verdict.UNSUPPORTED, (r.verdict, r.error_msg)
    assert "codegen invoke_subgraph is not implemented for cpp wrapper" in r.error_msg
