"""A known bug in another form is named by its cause (issue 41, point 4): the cause signature is
the innermost exception's, however many wrapper layers hide it (F40 behind one, two or three
`LoweringException:`s); a new consumer of a known producer is the note's bug once the reduced
graph shows the note's core (F21 through a Slice, and through the TVM gradient test's own loss
multiply, a failure of the import: the forward); and two causes behind one wrapper stay apart."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ir
from campaign.signature import cause_signature, innermost
from campaign.triage.pipeline.buckets import BucketKey
from campaign.triage.pipeline.grouping import BucketEvidence, group
from campaign.triage.pipeline.note_known import NoteForms, known_note_keys, note_keys

NOTES = Path(__file__).resolve().parents[2] / "docs" / "findings"
F40 = "F40-inductor_hop_dynamic_float_item"
F21 = "F21-tvm_if_branch_batchnorm_tuple"
F44 = "F44-dynamo_dynamic_float_hop_and_outer"

KEY_ERROR = "KeyError: 'unbacked_bindings'"


def _lowering(layers: int, inner: str = KEY_ERROR) -> str:
    return "InductorError: " + "LoweringException: " * layers + inner


def _f40_key(sig: str) -> BucketKey:
    """A bucket of F40's failure on a spec of another dialect than its trigger's."""
    return BucketKey("inductor?dialect=mixed", "cpu", "crash", "compile", sig, None,
                     "dynamic=true")


@pytest.fixture(scope="module")
def forms() -> NoteForms:
    return NoteForms.of(known_note_keys(NOTES))


def test_the_innermost_exception_of_a_wrapper_chain():
    assert innermost(_lowering(3)) == ("KeyError", "'unbacked_bindings'")
    assert innermost("torch._dynamo.exc.BackendCompilerFailed: RuntimeError: boom") == (
        "RuntimeError", "boom")
    # a message that goes on after an exception-like word is no wrapper
    assert innermost("AssertionError: Error in op: torch.ops.cond") == (
        "AssertionError", "Error in op: torch.ops.cond")
    assert innermost("TorchRuntimeError: RuntimeError when making fake tensor call") == (
        "TorchRuntimeError", "RuntimeError when making fake tensor call")
    assert innermost("SIGSEGV") == ("SIGSEGV", "")


def test_f40_behind_one_two_or_three_wrapper_layers_is_one_cause_and_f40(forms):
    causes = {cause_signature(_lowering(n)) for n in (1, 2, 3)}
    assert causes == {f"{KEY_ERROR}"}
    # F40's trigger records two layers; one and three are F40 too, and the bucket keeps its
    # outer form for display
    for n in (1, 2, 3):
        key = _f40_key(_lowering(n))
        assert forms.by_cause(key) == F40, n
        assert key.error_sig == _lowering(n)
    buckets = [BucketEvidence(f"b{n}", "inductor?dialect=hop", "crash", stage="compile",
                              error_sig=_lowering(n), count=1) for n in (1, 2, 3)]
    g = group(buckets)
    assert set(g.bug.values()) == {"b1"}, g.links
    assert {link.rule for link in g.links} == {"signature"}


def test_two_causes_behind_one_wrapper_stay_apart(forms):
    other = _lowering(2, "AssertionError: expected size N==N, stride N==N at dim=N")
    assert cause_signature(other) == "AssertionError: expected size N==N, stride N==N at dim=N"
    assert forms.by_cause(_f40_key(other)) is None
    dynamo = ("InternalTorchDynamoError: RuntimeError: Argument 'item' of Node 'add' does not "
              "belong to this Graph")
    aliasing = "InternalTorchDynamoError: RuntimeError: scan might be aliasing the input"
    buckets = [BucketEvidence("f40", "inductor", "crash", stage="compile",
                              error_sig=_lowering(3), count=1),
               BucketEvidence("other", "inductor", "crash", stage="compile", error_sig=other,
                              count=1),
               BucketEvidence("item", "inductor", "crash", stage="compile", error_sig=dynamo,
                              count=1),
               BucketEvidence("alias", "inductor", "crash", stage="compile",
                              error_sig=aliasing, count=1)]
    g = group(buckets)
    assert len(set(g.bug.values())) == 4 and not g.links


# F21's If, whose BatchNormalization branch the importer returns as a tuple (`R.Any`), read by
# consumers no trigger of the note had before this issue
IF_BN = """graph main(%c: b8[], %x: f32[2,1], %s: f32[1], %b: f32[1], %m: f32[1], %v: f32[1]) {
  %y = if(%c, %x, %s, %b, %m, %v) : f32[2,1] {
    graph then(%b0: f32[2,1], %b1: f32[1], %b2: f32[1], %b3: f32[1], %b4: f32[1]) {
      %bn = batch_norm(%b0, %b1, %b2, %b3, %b4) : f32[2,1]
      return %bn
    }
    graph else(%e0: f32[2,1], %e1: f32[1], %e2: f32[1], %e3: f32[1], %e4: f32[1]) {
      return %e0
    }
  }
  CONSUMER
}"""
SLICE = IF_BN.replace("CONSUMER", "%out = slice[axis=0, start=0, end=1, step=1](%y) : f32[1,1]\n"
                                  "  return %out")
RETURNED = IF_BN.replace("CONSUMER", "return %y")
SLICE_SIG = ("ValueError: Slice requires a statically known input rank. @ "
             "onnx_frontend._impl_v13 < onnx_frontend._convert_operator")
LOSS_SIG = ("TypeError: Check failed: (lhs_ty.as<PrimTypeNode>() || lhs_ty.as<TensorTypeNode>()) "
            "is false: Arguments to binary operators must be either R.Tensor or R.Prim types, "
            "but expression R.multiply(gvN, cotangentN) has LHS gvN, which has Type R.An @ "
            "binary.relax::InferTypeBroadcast < block_builder.emit")


def _forms_without(*graphs: str) -> NoteForms:
    """The notes' forms as if the triggers of `graphs` had not been recorded: the forms this
    issue's run met for the first time."""
    return NoteForms.of([k for k in known_note_keys(NOTES)
                         if Path(k.trigger.graph).name not in graphs])


def test_f21_through_a_slice_or_the_loss_multiply_is_f21_by_its_reduced_core():
    forms = _forms_without("F21-if_batchnorm_slice.gir", "F21-if_batchnorm_loss.gir")
    slice_key = BucketKey("tvm", "cpu", "crash", "import", SLICE_SIG)
    loss_key = BucketKey("tvm", "cpu", "crash", "import", LOSS_SIG)
    # no signature ties either to F21: the consumer's own message
    assert forms.by_cause(slice_key) is None and forms.by_cause(loss_key) is None
    assert forms.by_core(slice_key, ir.parse(SLICE)) == F21
    assert forms.by_core(loss_key, ir.parse(RETURNED)) == F21
    # the core is the compiler's, the verdict's and the stage's: not another compiler's, nor a
    # wrong answer
    assert forms.by_core(replace(slice_key, backend="tvm_torch"), ir.parse(SLICE)) is None
    assert forms.by_core(replace(slice_key, verdict="mismatch"), ir.parse(SLICE)) is None
    # nor another stage's: F21's run-stage trigger reads the tuple as an output, a failure
    # at compile would be elsewhere in TVM
    assert forms.by_core(replace(slice_key, stage="compile"), ir.parse(SLICE)) is None
    assert forms.by_core(replace(slice_key, stage="run"), ir.parse(RETURNED)) == F21


def test_a_core_of_one_op_or_of_another_program_names_no_note(forms):
    key = BucketKey("tvm", "cpu", "crash", "import", SLICE_SIG)
    one_op = ir.parse("""graph main(%x: f32[2,1]) {
  %out = slice[axis=0, start=0, end=1, step=1](%x) : f32[1,1]
  return %out
}""")
    assert forms.by_core(key, one_op) is None
    # F44's program (a batch norm inside the If and outside it) on TVM: not F21's core
    f44 = next(k.graph for k in note_keys(NOTES) if k.finding == F44)
    assert forms.by_core(key, f44) is None


def test_a_core_two_notes_share_names_neither():
    keys = [k for k in known_note_keys(NOTES) if k.finding == F21]
    twin = [replace(k, finding="F99-twin") for k in keys]
    forms = NoteForms.of(keys + twin)
    key = BucketKey("tvm", "cpu", "crash", "import", SLICE_SIG)
    assert forms.by_core(key, ir.parse(SLICE)) is None
    assert forms.by_cause(keys[0].key) is None


def test_f44s_float_used_outside_first_has_a_trigger(forms):
    """Its signature keeps what Dynamo's fake run got: an assertion on the cond's operands,
    whose tuple differs with the program (collapsed in the cause)."""
    sig = ("TorchRuntimeError: RuntimeError when making fake tensor call: AssertionError: "
           "(sN, FakeTensor(..., size=(sN,)), zfN) @ cond.cond")
    key = BucketKey("inductor?dialect=mixed", "cpu", "crash", "compile", sig, None,
                    "dynamic=true")
    assert forms.by_cause(key) == F44


def test_the_tvm_gradient_tests_loss_is_the_import_and_its_failure_the_forward():
    """F21's If read by the gradient test's loss multiply: the import fails (the forward), even
    though the inference test passes (the inputs take the branch that returns a tensor)."""
    from campaign.triage.pipeline.reduction import BackendRunner, FindingCase, Reduction
    from campaign.triage.pipeline.training_ablation import ablate
    from ir.materialize.grad import GradSpec
    from ir.numerics.input_search import search_inputs

    g = ir.parse(RETURNED)
    values = {**search_inputs(g, 0).values, "c": np.array(False)}
    runner = BackendRunner("tvm", sandbox=False)
    try:
        row, _, tc = runner.run("loss", 0, g, values, [], grad=GradSpec(("x",), ()))
        assert (row["verdict"], row["stage"], row["error_sig"]) == ("crash", "import", LOSS_SIG)
        plain, _, _ = runner.run("plain", 0, g, values, [])
        assert plain["verdict"] == "pass"
        case = FindingCase(Path("."), dict(row), g, values, [], tc.grad)
        red = Reduction(case, "confirmed", g, values, [], row, {}, tc)
        res = ablate(red, lambda spec: runner)
    finally:
        runner.close()
    assert res is not None and (res.part, res.aot_eager) == ("forward", None)


def test_the_triage_names_a_new_bucket_by_its_reduced_core(tmp_path):
    """The name step's `name_by_core`: a new bucket reduced to F21's core is F21's, no longer
    new; a bucket not reduced, or already named, is left as it is."""
    from types import SimpleNamespace

    from campaign.triage import TriageConfig
    from campaign.triage.pipeline.buckets import Bucket
    from campaign.triage.pipeline.state import TriageState
    from campaign.triage.pipeline.steps.name import name_by_core

    logged: list[str] = []
    t = TriageState.open(tmp_path, TriageConfig(db="off", findings=str(NOTES)), logged.append)
    key = BucketKey("tvm", "cpu", "crash", "import", SLICE_SIG.replace("Slice", "Sliced"))
    reduced = SimpleNamespace(status="reduced", graph=ir.parse(SLICE))
    b = Bucket(key)
    name_by_core(t, key, b, reduced)
    assert (b.new, b.finding) == (False, F21)
    assert logged == [f"triage: {key.id} is {F21} in another form (its reduced graph's core)"]
    unreduced = Bucket(key)
    name_by_core(t, key, unreduced, SimpleNamespace(status="confirmed", graph=ir.parse(SLICE)))
    assert (unreduced.new, unreduced.finding) == (True, None)
