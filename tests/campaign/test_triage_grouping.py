"""Cause-level grouping (campaign/triage/pipeline/grouping.py): buckets whose reduced graphs share a
structure or a core, whose cause signatures agree (unless the graphs say otherwise), or whose
reduced graph re-run on the other's compiler fails the other's way are one bug; the cause
signature's normalization; and a real triage on a stand-in backend whose message quotes the
type it failed on (one bug, two buckets)."""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow.parquet as pq
from test_triage import _case, campaign_dir

import ir
from campaign.backends.base import frontend_of
from campaign.signature import cause_signature
from campaign.triage import TriageConfig
from campaign.triage.pipeline.buckets import BUGS_SCHEMA
from campaign.triage.pipeline.campaign_triage import triage
from campaign.triage.pipeline.grouping import BucketEvidence, core, group, structure

# two consumers of one BatchNormalization inside an If (TVM's importer made it a tuple)
BN_RELU = """graph main(%x: f32[1,1], %c: b8[], %s: f32[1], %b: f32[1], %m: f32[1], %v: f32[1]) {
  %a = if(%c, %x, %s, %b, %m, %v) : f32[1,1] {
    graph then(%t0: f32[1,1], %t1: f32[1], %t2: f32[1], %t3: f32[1], %t4: f32[1]) {
      return %t0
    }
    graph else(%e0: f32[1,1], %e1: f32[1], %e2: f32[1], %e3: f32[1], %e4: f32[1]) {
      %e5 = batch_norm(%e0, %e1, %e2, %e3, %e4) : f32[1,1]
      %e6 = relu(%e5) : f32[1,1]
      return %e6
    }
  }
  return %a
}"""
BN_RELU_SWAPPED = """graph main(%x: f32[1,1], %c: b8[], %s: f32[1], %b: f32[1], %m: f32[1],
                           %v: f32[1]) {
  %a = if(%c, %x, %s, %b, %m, %v) : f32[1,1] {
    graph then(%e0: f32[1,1], %e1: f32[1], %e2: f32[1], %e3: f32[1], %e4: f32[1]) {
      %e5 = batch_norm(%e0, %e1, %e2, %e3, %e4) : f32[1,1]
      %e6 = relu(%e5) : f32[1,1]
      return %e6
    }
    graph else(%t0: f32[1,1], %t1: f32[1], %t2: f32[1], %t3: f32[1], %t4: f32[1]) {
      return %t0
    }
  }
  return %a
}"""
BN_ADD = """graph main(%y: f32[], %c: b8[], %x: f32[1,1], %s: f32[1], %b: f32[1], %m: f32[1],
                  %v: f32[1]) {
  %a = if(%c, %x, %s, %b, %m, %v, %y) : f32[1,1] {
    graph then(%t0: f32[1,1], %t1: f32[1], %t2: f32[1], %t3: f32[1], %t4: f32[1], %t5: f32[]) {
      %t6 = batch_norm(%t0, %t1, %t2, %t3, %t4) : f32[1,1]
      %t7 = add(%t6, %t5) : f32[1,1]
      return %t7
    }
    graph else(%e0: f32[1,1], %e1: f32[1], %e2: f32[1], %e3: f32[1], %e4: f32[1], %e5: f32[]) {
      return %e0
    }
  }
  return %a
}"""
# two of them read by one consumer, failing only when run: the same core (a set)
BN_TWICE = """graph main(%x: f32[1,1], %c: b8[], %s: f32[1], %b: f32[1], %m: f32[1], %v: f32[1]) {
  %a = if(%c, %x, %s, %b, %m, %v) : f32[1,1] {
    graph then(%t0: f32[1,1], %t1: f32[1], %t2: f32[1], %t3: f32[1], %t4: f32[1]) {
      return %t0
    }
    graph else(%e0: f32[1,1], %e1: f32[1], %e2: f32[1], %e3: f32[1], %e4: f32[1]) {
      %e5 = batch_norm(%e0, %e1, %e2, %e3, %e4) : f32[1,1]
      %e6 = batch_norm(%e0, %e1, %e2, %e3, %e4) : f32[1,1]
      %e7 = mul(%e5, %e6) : f32[1,1]
      return %e7
    }
  }
  return %a
}"""
EQ_BOOL = """graph main(%r: b8[]) {
  %v = eq(%r, %r) : b8[]
  return %v
}"""
RELU_ADD = """graph main(%x: f32[3], %y: f32[3]) {
  %a = relu(%x) : f32[3]
  %b = add(%a, %y) : f32[3]
  return %b
}"""
TANH_MUL = """graph main(%x: f32[3], %y: f32[3]) {
  %a = tanh(%x) : f32[3]
  %b = mul(%a, %y) : f32[3]
  return %b
}"""

OPERATOR_SIG = ('TypeError: Operator ir.Op(span=None, ty=ir.Type(span=None), name="relax.nn.relu", '
                'description="", arguments=(ir.ArgumentInfo(name="x", type_info="Tensor"),), '
                'num_inputs=N) @ op_common.relax::GetInputTensorType < block_builder.normalize')
BINARY_SIG = ("TypeError: Check failed: (lhs_ty.as<PrimTypeNode>()) is false: Arguments to binary "
              "operators must be either R.Tensor or R.Prim types, but expression R.add((gvN, gvN, "
              "gvN), x) has LHS (gvN, gvN, gvN) @ binary.relax::InferTypeBroadcast < "
              "block_builder.normalize")
LLVM_SIG = ("InternalError: LLVM module verification failed with the following errors: "
            "@ codegen_llvm.CodeGenLLVM::Verify < build.codegen_build")


def _g(text: str):
    return ir.verify(ir.parse(text))


def _t(minute: int) -> datetime:
    return datetime(2026, 12, 4, 12, minute, tzinfo=timezone.utc)


def _b(bucket: str, sig: str | None, graph: str | None = None, *, backend: str = "tvm",
       verdict: str = "crash", stage: str = "import", minute: int = 0, count: int = 1,
       kind: str = "bug", config: str = "", frontend: str | None = None) -> BucketEvidence:
    return BucketEvidence(bucket, backend, verdict, kind, stage, sig, config, _t(minute), count,
                          _g(graph) if graph else None, frontend)


# ---- graph evidence ------------------------------------------------------------------------------

def test_structure_and_core_of_a_reduced_graph():
    g = _g(BN_RELU)
    assert structure(g) == (
        "if",
        "if>batch_norm(f32,f32,f32,f32,f32)->f32",
        "if>batch_norm(f32,f32,f32,f32,f32)->f32 -> relu(f32)->f32",
        "if>relu(f32)->f32",
    )
    # relu reads batch_norm's result and nothing reads relu's: the consumer that tripped
    assert core(g) == ("if", "if>batch_norm(f32,f32,f32,f32,f32)->f32")
    assert core(_g(BN_ADD)) == core(g)  # other consumer, other branch: one core
    assert structure(_g(EQ_BOOL)) == core(_g(EQ_BOOL)) == ("eq(b8,b8)->b8",)
    # a chain of consumers is peeled off to its producer; what feeds an `if` stays
    chain = _g(BN_RELU.replace("return %e6", "%e7 = neg(%e6) : f32[1,1]\n      return %e7")
               .replace("%a = if(%c,", "%w = logical_not(%c) : b8[]\n  %a = if(%w,"))
    assert core(chain) == ("if", "if>batch_norm(f32,f32,f32,f32,f32)->f32",
                           "logical_not(b8)->b8", "logical_not(b8)->b8 -> if")
    assert core(_g(RELU_ADD)) == ("relu(f32)->f32",)  # one op: no `shared core` on its own


# ---- the rules -----------------------------------------------------------------------------------

def test_same_reduced_core_with_different_consumers_is_one_bug():
    relu = _b("tvm-crash-relu", OPERATOR_SIG, BN_RELU, minute=5, count=13)
    add = _b("tvm-crash-add", BINARY_SIG, BN_ADD, minute=2, count=5)
    g = group([relu, add])
    assert g.bug == {"tvm-crash-relu": "tvm-crash-add", "tvm-crash-add": "tvm-crash-add"}
    (link,) = g.links
    assert (link.rule, link.detail) == (
        "shared core", "if; if>batch_norm(f32,f32,f32,f32,f32)->f32")
    assert g.members() == {"tvm-crash-add": ["tvm-crash-add", "tvm-crash-relu"]}
    twice = _b("tvm-crash-twice", "AttributeError: 'Array' object has no attribute 'numpy'",
               BN_TWICE, stage="run", minute=9)
    assert core(_g(BN_TWICE)) == core(_g(BN_RELU))
    g = group([relu, add, twice])
    assert set(g.bug.values()) == {"tvm-crash-add"}
    assert [(x.a, x.b, x.rule) for x in g.links] == [
        ("tvm-crash-add", "tvm-crash-relu", "shared core"),
        ("tvm-crash-add", "tvm-crash-twice", "shared core")]


def test_two_causes_that_share_an_error_message_stay_apart():
    a = _b("tvm-crash-a", LLVM_SIG, RELU_ADD, stage="compile")
    b = _b("tvm-crash-b", LLVM_SIG, TANH_MUL, stage="compile", minute=1)
    g = group([a, b])
    assert g.bug == {"tvm-crash-a": "tvm-crash-a", "tvm-crash-b": "tvm-crash-b"}
    assert g.links == []
    # without the graphs the message is all there is: one bug (where grouping can merge two)
    g = group([_b("tvm-crash-a", LLVM_SIG, RELU_ADD, stage="compile"),
               _b("tvm-crash-b", LLVM_SIG, None, stage="compile", minute=1)])
    assert g.bug["tvm-crash-b"] == "tvm-crash-a"
    assert [(x.rule, x.detail) for x in g.links] == [(
        "signature", "InternalError: LLVM module verification failed with the following "
                     "errors: @ codegen_llvm.CodeGenLLVM::Verify")]


def test_one_graph_in_two_configurations_is_one_bug_whatever_the_message():
    a = _b("inductor-crash-a", "InductorError: x", BN_RELU, backend="inductor?dialect=hop",
           stage="compile", config="freezing=true")
    # the then- and else-branch swapped, another configuration, another stage and message
    b = _b("inductor-crash-b", "InductorError: y", BN_RELU_SWAPPED,
           backend="inductor?dialect=mixed", stage="compile", minute=1)
    c = _b("inductor-crash-c", "AssertionError: z", BN_RELU_SWAPPED, backend="inductor",
           stage="run", minute=2)
    g = group([a, b, c])
    assert set(g.bug.values()) == {"inductor-crash-a"}
    assert [x.rule for x in g.links] == ["same graph", "same graph"]


def test_a_cross_re_run_that_fails_with_the_others_signature_merges():
    a = _b("tvm-crash-a", "ValueError: bad dtype float@ x.f", EQ_BOOL, stage="compile",
           count=9)
    b = _b("tvm-crash-b", "ValueError: unknown target @ y.g", None, stage="compile",
           config="mcpu=haswell", minute=1)
    c = _b("tvm-crash-c", "KeyError: nope @ z.h", None, stage="compile", minute=2,
           backend="tvm?opt_level=2")
    # a's own compiler: its re-run would say no more than its signature (not re-run)
    d = _b("tvm-crash-d", "KeyError: nope @ z.h", None, stage="compile", minute=3)
    calls = []

    def rerun(x: BucketEvidence, y: BucketEvidence):
        calls.append((x.bucket, y.bucket))
        if y.bucket == "tvm-crash-b":  # on b's configuration, a's graph fails b's way
            return "crash", "compile", "ValueError: unknown target @ y.g < y.main"
        return "crash", "compile", "ValueError: bad dtype float @ x.f"

    g = group([a, b, c, d], rerun=rerun)
    assert g.bug == {"tvm-crash-a": "tvm-crash-a", "tvm-crash-b": "tvm-crash-a",
                     "tvm-crash-c": "tvm-crash-c", "tvm-crash-d": "tvm-crash-c"}
    assert calls == [("tvm-crash-a", "tvm-crash-b"), ("tvm-crash-a", "tvm-crash-c")]
    assert g.reruns == 2
    assert [(x.rule, x.detail) for x in g.links] == [
        ("signature", "KeyError: nope @ z.h"),  # c and d: one message, no graph against it
        ("re-run", "tvm-crash-a's graph on tvm [mcpu=haswell]: ValueError: unknown target @ y.g")]
    # the cap: no re-run at all
    assert group([a, b, c, d], rerun=rerun, max_reruns=0).bug["tvm-crash-b"] == "tvm-crash-b"


def test_what_is_never_grouped():
    timeout = "Timeout: no result within N s"
    g = group([
        _b("t1", timeout, verdict="timeout", stage="compile"),  # where it was killed: no cause
        _b("t2", timeout, verdict="timeout", stage="compile", minute=1),
        _b("other-compiler", OPERATOR_SIG, BN_RELU, backend="tvm_torch"),
        _b("mine", OPERATOR_SIG, BN_RELU),
        _b("other-stage", OPERATOR_SIG, None, stage="compile"),
        _b("ours-1", "InvalidReference: x", kind="ours", verdict="invalid"),
        _b("ours-2", "InvalidReference: y", kind="ours", verdict="invalid"),
        # one message on two compilers without a shared front end (TVM's ONNX importer)
        _b("ort-sig", FUNCTIONAL_SIG, backend="ort"),
        _b("tvm-sig", FUNCTIONAL_SIG, backend="tvm", minute=1),
    ])
    assert all(bug == bucket for bucket, bug in g.bug.items())


FUNCTIONAL_SIG = ("RuntimeError: Attempting to use FunctionalTensor on its own. Instead, please "
                  "use it with a corresponding FunctionalTensorMode() @ <eval_with_key>.forward")


DIAGONAL_SUM = """graph main(%x0: f32[1,1,2], %r0: i64[]) {
  %v3 = reduce_sum[axis=0, keepdim=false](%x0) : f32[1,2]
  %v0 = view_diagonal[offset=-1, dim1=1, dim2=0](%v3) : f32[1]
  %v6 = add_(%v0, %v0) : f32[1]
  return %r0
}"""
DIAGONAL_CLAMP = """graph main(%x0: f32[1,1,1,2]) {
  %v10 = view_diagonal[offset=-1, dim1=3, dim2=0](%x0) : f32[1,1,1]
  %v11 = clamp_[lo=-0.25, hi=0.75](%v10) : f32[1,1,1]
  return %x0
}"""
COPY_TO_SIG = ("AssertionError: aot_autograd expected to have an entirely functional graph, but "
               "found %copy_to : [num_users=N] = call_function[target=torch.ops.prims.copy_to."
               "default](args = (%diagonal_N, %add), kwargs = {}) @ functional_utils."
               "assert_functional_graph")


def test_one_message_whose_reduced_cores_share_an_op_is_one_bug():
    # a write through diagonal() (the exporter's functionalization): the reducer kept another
    # producer in each graph (a reduce_sum; none), so the cores differ but share the view
    g = group([_b("sum", COPY_TO_SIG, DIAGONAL_SUM, backend="onnx_export"),
               _b("clamp", COPY_TO_SIG, DIAGONAL_CLAMP, backend="onnx_export", minute=1)])
    assert g.bug == {"sum": "sum", "clamp": "sum"}
    assert [x.rule for x in g.links] == ["signature"]


def test_one_import_failure_of_a_shared_front_end_is_one_bug_across_compilers():
    g = group([
        _b("export", FUNCTIONAL_SIG, backend="onnx_export", frontend="torch.export"),
        _b("tvm_torch", FUNCTIONAL_SIG, backend="tvm_torch", frontend="torch.export", minute=1),
        # the same message at another stage is not the front end's
        _b("late", FUNCTIONAL_SIG, backend="tvm_torch?opt_level=0", frontend="torch.export",
           stage="compile", minute=2),
    ])
    assert g.bug == {"export": "export", "tvm_torch": "export", "late": "late"}
    assert [(x.rule, x.detail) for x in g.links] == [
        ("front end", "torch.export: " + cause_signature(FUNCTIONAL_SIG))]


NESTED_SCAN_SIG = ("TorchRuntimeError: RuntimeError when making fake tensor call @ "
                   "scan.run_flattened_scan < utils._maybe_compile_and_run_fn")


def test_one_compile_failure_in_torch_compiles_tracing_is_one_bug_across_compilers():
    """Inductor and aot_eager both trace with Dynamo and AOT autograd: the same failure there
    (a nested scan's backward, from the cpu_train run of issue 41) is one bug, not one per
    compiler; another cause behind the same wrapper class stays apart."""
    front = frontend_of("aot_eager", "compile")
    assert front == frontend_of("inductor?dialect=hop&cpp_wrapper=true", "compile") is not None
    assert frontend_of("aot_eager", "import") is None and frontend_of("ort", "compile") is None
    assert frontend_of("tvm_torch", "import") == "torch.export"
    other = NESTED_SCAN_SIG.replace("scan.run_flattened_scan", "cond.cond")
    g = group([
        _b("aot", NESTED_SCAN_SIG, backend="aot_eager", stage="compile", frontend=front),
        _b("hop", NESTED_SCAN_SIG, backend="inductor?dialect=hop&cpp_wrapper=true",
           stage="compile", frontend=front, minute=1),
        _b("cond", other, backend="inductor?dialect=hop", stage="compile", frontend=front,
           minute=2),
    ])
    assert g.bug == {"aot": "aot", "hop": "aot", "cond": "cond"}
    assert [(x.rule, x.detail) for x in g.links] == [
        ("front end", f"{front}: " + cause_signature(NESTED_SCAN_SIG))]


def test_two_front_end_buckets_whose_reduced_cores_differ_stay_apart():
    g = group([
        _b("export", FUNCTIONAL_SIG, BN_ADD, backend="onnx_export", frontend="torch.export"),
        _b("tvm_torch", FUNCTIONAL_SIG, EQ_BOOL, backend="tvm_torch", frontend="torch.export"),
    ])
    assert g.bug == {"export": "export", "tvm_torch": "tvm_torch"}


def test_one_reference_failure_on_several_backends_is_one_bug():
    sig = "InvalidReference: inst N (scan) > body: inst N (gt): inputs outside the op's safe domain"
    g = group([_b(f"{be}-invalid", sig, backend=be, kind="ours", verdict="invalid", minute=i)
               for i, be in enumerate(["ort", "onnx_export", "inductor?dialect=hop"])]
              + [_b("other", sig.replace("gt", "sqrt"), backend="ort", kind="ours",
                    verdict="invalid")])
    assert g.bug == {"ort-invalid": "ort-invalid", "onnx_export-invalid": "ort-invalid",
                     "inductor?dialect=hop-invalid": "ort-invalid", "other": "other"}
    assert {x.rule for x in g.links} == {"reference"}


# ---- the cause signature ---------------------------------------------------------------------------

def test_cause_signature_strips_names_arguments_shapes_and_opset_versions():
    assert cause_signature(OPERATOR_SIG) == (
        "TypeError: Operator <name>(…) @ op_common.relax::GetInputTensorType")
    # cut by `normalize`'s length limit in the middle of a word: the part word goes
    head, tail = 'TypeError: Operator ir.Op(span=None, name="relax.acos", description="', \
        '", num_inputs=N) re'
    cut = head + "d" * (240 - len(head) - len(tail)) + tail
    assert len(cut) == 240
    assert cause_signature(cut + " @ op_common.relax::GetInputTensorType < block_builder.no") \
        == "TypeError: Operator <name>(…) @ op_common.relax::GetInputTensorType"
    assert cause_signature(BINARY_SIG) == (
        "TypeError: Check failed: (…) is false: Arguments to binary operators must be either "
        "<name> or <name> types, but @ binary.relax::InferTypeBroadcast")
    for v in (1, 6, 13):
        assert cause_signature(
            f"AttributeError: 'TupleType' object has no attribute 'dtype' @ "
            f"onnx_frontend._impl_v{v} < onnx_frontend._convert_operator") == (
            "AttributeError: 'TupleType' object has no attribute 'dtype' @ "
            "onnx_frontend._impl_vN")
    assert cause_signature(
        'ValueError: CastLike: unable to determine dtype from target (gvN, R.const(N.N, '
        '"floatN"), R.const(N.N, "floatN")) @ onnx_frontend._impl_v15 < x.y') == (
        "ValueError: CastLike: unable to determine dtype from target (…) @ "
        "onnx_frontend._impl_vN")
    assert cause_signature(
        "SpecViolationError: operator 'prims.copy_to.default' is not functional @ "
        "verifier._check_valid_op < verifier._check_graph_module") == (
        "SpecViolationError: operator '…' is not functional @ verifier._check_valid_op")
    assert cause_signature(
        "PatternError: cannot fuse relu into %vN = add(%vN) : fN[N,N,N] at <addr> @ "
        "buggy_backends.compile_ < backends.stage") == (
        "PatternError: cannot fuse relu into <name> = add(…) : fN[…] at <addr> @ "
        "buggy_backends.compile_")
    assert cause_signature(
        "AssertionError: Error in op: torch.ops.cond @ "
        "cpf2tc6j7gamc6jatj3xutb4py4bxl5vkjnfpqidrso6f5p2w323.call < output_code.__call__") == (
        "AssertionError: Error in op: <name> @ <gen>.call")
    assert cause_signature("AttributeError: 'Array' object has no attribute 'numpy'") == (
        "AttributeError: 'Array' object has no attribute 'numpy'")
    assert cause_signature("SIGSEGV") == "SIGSEGV"
    assert cause_signature(None) == cause_signature("") == ""


# ---- a real triage ---------------------------------------------------------------------------------

PATTERN = "buggy_backends:CrashOnPattern?producer=relu&consumer=add"
RANK1 = """graph main(%x0: f32[3], %x1: f32[3]) {
  %v2 = relu(%x0) : f32[3]
  %v3 = add(%v2, %x1) : f32[3]
  %v4 = tanh(%v3) : f32[3]
  return %v4
}"""
RANK2 = """graph main(%x0: f32[2,3], %x1: f32[2,3]) {
  %v2 = sigmoid(%x0) : f32[2,3]
  %v3 = relu(%v2) : f32[2,3]
  %v4 = add(%v3, %x1) : f32[2,3]
  return %v4
}"""


def test_a_triage_groups_buckets_of_one_cause_into_one_bug(tmp_path):
    # the stand-in's message quotes the type it failed on: two signatures, two buckets
    cases = [_case("run-000000", 0, RANK1), _case("run-000001", 1, RANK2)]
    out = campaign_dir(tmp_path / "run", [PATTERN], cases)
    report = triage(out, TriageConfig(max_tests=100, budget="5m", check_repro=False),
                    log=lambda s: None)
    table = pq.read_table(out / "bugs.parquet")
    assert table.schema.equals(BUGS_SCHEMA)
    rows = sorted(table.to_pylist(), key=lambda r: r["first_seen"])
    assert len(rows) == 2 and rows[0]["error_sig"] != rows[1]["error_sig"]
    first, second = rows
    assert first["bug"] == second["bug"] == first["bucket"]  # the oldest bucket names it
    assert (first["bug_reason"], second["bug_reason"]) == (
        None, f"same graph with {first['bucket']}")
    assert first["reduced_pattern"] == second["reduced_pattern"]
    assert report.text().splitlines()[0].startswith(
        "triage: 2 buckets (2 compiler-bug buckets in 1 bugs)")
    assert f"  bug {first['bucket']}: 2 buckets, 2 rows" in report.text()

    # the campaign report counts buckets and bugs apart
    from campaign.report import build_report

    res = build_report([out], tmp_path / "report.html", op_registry=False)
    assert (res.data.n_finding_buckets, res.data.n_finding_bugs) == (2, 1)
    assert {b["bug"] for b in res.data.bugs} == {first["bucket"]}
    html = (tmp_path / "report.html").read_text()
    assert "their finding buckets are 1 bugs" in html and f"bug {first['bucket']}" in html

    # the triage's cross re-run: one bucket's reduced graph (its bug folder) on the other's
    # compiler, in a sandbox; here one compiler, so it fails the way both buckets do
    from campaign.triage.pipeline.clock import TriageClock
    from campaign.triage.pipeline.state import TriageState
    from campaign.triage.pipeline.steps.group import cross_rerun

    t = TriageState.open(out, TriageConfig(budget="1m"), log=lambda s: None)
    clock = TriageClock.of(60.0).step("group", 1.0, 0.0)
    try:
        verdict, stage, sig = cross_rerun(
            t, clock, BucketEvidence(second["bucket"], PATTERN, "crash"),
            BucketEvidence(first["bucket"], PATTERN, "crash", config=""))
    finally:
        t.close()
    assert (verdict, stage) == ("crash", "compile")
    assert cause_signature(sig) == cause_signature(first["error_sig"]) == (
        "PatternError: cannot fuse relu into <name> = add(…) : fN[…] at <addr>")  # (our frames)
