"""Error signatures (campaign/signature.py): the frames of a crash name library code, and a
module Inductor generated (named by a hash of its source) is the same frame in every compile."""
from __future__ import annotations

from pathlib import Path

from campaign.signature import normalize, python_frames

REPO = Path(__file__).resolve().parents[2]
DUMP = """Fatal Python error: Segmentation fault

Current thread 0x00007f (most recent call first):
  File "/tmp/torchinductor_root/{d}/{name}.py", line 88 in g
  File "/usr/lib/python3.11/site-packages/torch/_inductor/output_code.py", line 640 in __call__
  File "{repo}/campaign/backends/inductor.py", line 500 in _evaluate
"""


def test_a_generated_module_is_one_frame_whatever_its_hash():
    a = python_frames(DUMP.format(repo=REPO, d="c6", name="c6uewqkz3x5yyt7bmjd2pvzt4w5xsh6mqf3hqgcqorwmqmx7kx"),
                      innermost_first=True)
    b = python_frames(DUMP.format(repo=REPO, d="cx", name="cximmq2ojdfy7xgzkyx4k4fkwoa3tnswzkhe3zuxm4h3hqdcbq"),
                      innermost_first=True)
    assert a == b == ["<gen>.g", "output_code.__call__"]
    assert normalize("SIGSEGV", "", frames=a) == "SIGSEGV:  @ <gen>.g < output_code.__call__"


def test_an_ordinary_module_keeps_its_name():
    text = DUMP.format(repo=REPO, d="lib", name="cpp_wrapper_cpu")
    assert python_frames(text, innermost_first=True)[0] == "cpp_wrapper_cpu.g"


def test_a_virtual_environment_inside_the_checkout_holds_library_frames_not_ours():
    """CI's second leg puts torch in `.ci/venv-torch2141` under the checkout: its frames are the
    library's, and only our packages' frames end the walk."""
    venv_torch = f"{REPO}/.ci/venv-torch2141/lib/python3.11/site-packages/torch"
    text = f"""Traceback (most recent call last):
  File "{REPO}/campaign/backends/inductor.py", line 500, in _evaluate
    out = compiled(*args)
  File "{venv_torch}/_inductor/fx_passes/post_grad.py", line 900, in body_fn
    raise e
  File "{venv_torch}/_subclasses/fake_tensor.py", line 1200, in dispatch
    raise e
RuntimeError: boom
"""
    assert python_frames(text) == ["fake_tensor.dispatch", "post_grad.body_fn"]


FAKE_CALL = """RuntimeError when making fake tensor call
  Explanation: Dynamo failed to run FX node with fake tensors: call_function scan(*(GraphModule(
      (scan_combine_fn_2): GraphModule()
    ), [FakeTensor(..., size=(1,))], []), **{{}}): got {got}
  Hint: Your code may result in an error when running in eager.
"""


def test_two_causes_behind_dynamos_fake_tensor_call_wrapper_are_two_signatures():
    """Dynamo reports any exception of an op it ran on fake tensors as `RuntimeError when
    making fake tensor call`; the exception it got (its `Explanation:` line) is the cause."""
    from campaign.signature import cause_signature

    a = normalize("TorchRuntimeError", FAKE_CALL.format(
        got="AssertionError('outs_to_grad length (2) != tangents length (3)')"), frames=["scan.f"])
    b = normalize("TorchRuntimeError", FAKE_CALL.format(
        got="RuntimeError('derivative for aten::detach_copy is not implemented')"), frames=["scan.f"])
    assert a == ("TorchRuntimeError: RuntimeError when making fake tensor call: AssertionError: "
                 "outs_to_grad length (N) != tangents length (N) @ scan.f")
    assert cause_signature(a) == "AssertionError: outs_to_grad length (…) != tangents length (…) @ scan.f"
    assert cause_signature(b) == "RuntimeError: derivative for aten::detach_copy is not implemented @ scan.f"
    plain = normalize("TorchRuntimeError", "RuntimeError when making fake tensor call\n", frames=["cond.cond"])
    assert plain == "TorchRuntimeError: RuntimeError when making fake tensor call @ cond.cond"


#: F56's failure (a write through an expand view of a bool tensor) as the campaign's aot_eager
#: run signs it, measured: torch 2.13.0 raises it from `torch._check`, 2.14.1 and 2.15.0 from
#: `torch._check_not_implemented`, the message unchanged
SUBTRACTION = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
               "`^` or `logical_xor()` operator instead.")


def test_release_neutral_makes_one_check_raised_as_two_classes_one_signature():
    from campaign.signature import release_neutral

    on_213 = normalize("RuntimeError", SUBTRACTION)
    on_2141 = normalize("NotImplementedError", SUBTRACTION)
    assert on_213 == f"RuntimeError: {SUBTRACTION}" and on_2141 == f"NotImplementedError: {SUBTRACTION}"
    assert release_neutral(on_213) == release_neutral(on_2141) == f"<check>: {SUBTRACTION}"
    # every class of the wrapper chain, and what Dynamo's fake run got; the frames stay
    assert release_neutral("InductorError: LoweringException: TypeError: x @ a.f < b.g") == (
        "InductorError: LoweringException: <check>: x @ a.f < b.g")
    assert release_neutral("TorchRuntimeError: RuntimeError when making fake tensor call: "
                           "ValueError: y @ scan.f") == (
        "TorchRuntimeError: RuntimeError when making fake tensor call: <check>: y @ scan.f")
    # other classes say what failed: they stay, as does a class named inside another's name
    for sig in ("AssertionError: x", "KeyError: 'unbacked_bindings'", "SIGSEGV: SIGSEGV during run",
                "CppTypeError: x", "torch._C._LinAlgError: x", "IndexErrors: x"):
        assert release_neutral(sig) == sig
    assert release_neutral("IndexError: list index out of range @ f.g") == (
        "<check>: list index out of range @ f.g")
    assert release_neutral(None) == release_neutral("") == ""
