"""Backends by name: registered presets, options, users' own backends by dotted path."""
from __future__ import annotations

import pytest

from campaign.backends import BACKENDS, Backend, make_backend, parse_spec
from campaign.backends.inductor import InductorBackend
from campaign.backends.ort import OrtBackend
from campaign.backends.tvm import TvmBackend
from campaign.signature import normalize
from campaign.verdict import Stage


def test_presets_are_registered():
    for name in ("ort", "ort_noopt", "ort_cuda", "tvm", "tvm_cuda", "tvm_torch", "tvm_torch_cuda",
                 "inductor", "inductor_cuda", "onnx_export", "eager", "eager_f64"):
        assert name in BACKENDS
        assert make_backend(name).name == name


@pytest.mark.parametrize("spec, cls, attrs", [
    ("ort", OrtBackend, {"opt_level": "all", "target": "cpu"}),
    ("ort_noopt", OrtBackend, {"opt_level": "disabled"}),
    ("ort_cuda", OrtBackend, {"target": "cuda"}),
    ("ort?opt_level=basic", OrtBackend, {"opt_level": "basic"}),
    ("tvm", TvmBackend,
     {"tvm_target": "llvm", "opt_level": 3, "pipeline": "fused", "target": "cpu"}),
    ("tvm?opt_level=0&pipeline=default", TvmBackend, {"opt_level": 0, "pipeline": "default"}),
    ("tvm_cuda", TvmBackend, {"tvm_target": "cuda", "target": "cuda"}),
    ("inductor", InductorBackend, {"fullgraph": True, "dynamic": False, "target": "cpu"}),
    ("inductor?dynamic=true&fullgraph=false", InductorBackend,
     {"fullgraph": False, "dynamic": True}),
    ("inductor", InductorBackend, {"cpp_wrapper": False}),
    ("inductor?cpp_wrapper=true", InductorBackend, {"cpp_wrapper": True}),
])
def test_options(spec, cls, attrs):
    b = make_backend(spec)
    assert isinstance(b, cls) and b.name == spec
    for k, v in attrs.items():
        assert getattr(b, k) == v, k


def test_parse_spec_values():
    assert parse_spec("x?a=1&b=2.5&c=true&d=none&e=text") == (
        "x", {"a": 1, "b": 2.5, "c": True, "d": None, "e": "text"})


def test_dotted_paths_in_both_forms():
    colon = make_backend("campaign.backends.ort:OrtBackend?opt_level=disabled")
    dotted = make_backend("campaign.backends.ort.OrtBackend")
    assert isinstance(colon, OrtBackend) and colon.opt_level == "disabled"
    assert colon.name == "campaign.backends.ort:OrtBackend?opt_level=disabled"
    assert isinstance(dotted, OrtBackend) and dotted.name == "campaign.backends.ort.OrtBackend"
    assert "campaign.backends.ort:OrtBackend" in BACKENDS  # the driver's config check
    assert "campaign.backends.ort:NoSuchBackend" not in BACKENDS
    assert "ort" in sorted(BACKENDS) and not any("." in n for n in BACKENDS)


@pytest.mark.parametrize("spec, message", [
    ("nope", "unknown backend 'nope' (known: "),
    ("no_such_pkg.mod:X", "cannot import module 'no_such_pkg.mod'"),
    ("campaign.backends.ort:Nope", "has no attribute 'Nope'"),
    ("campaign.backends.ort:ORT_UNSUPPORTED", "is not a class or factory"),
    ("campaign.backends.ort:ort_providers?device=cpu", "not a campaign.backends.Backend"),
    ("ort?opt_level=fast", "opt_level must be one of"),
    ("ort?speed=1", "backend 'ort?speed=1': unknown option 'speed' (known: opt_level, device, disabled_optimizers, execution_mode, threads)"),
    ("tvm?opt_levl=3", "backend 'tvm?opt_levl=3': unknown option 'opt_levl' (known: target, "
                       "opt_level, pipeline, mcpu)"),
    ("tvm?opt_level=9", "backend 'tvm?opt_level=9': tvm: opt_level must be 0..3, got 9"),
    ("ort?bad", "bad option 'bad'"),
    ("tvm?target=vulkan", "target must be llvm or cuda"),
])
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(ValueError) as e:
        make_backend(spec)
    assert message in str(e.value) and "\n" not in str(e.value)


class BackendCompilerFailed(Exception):
    """Shaped like Dynamo's wrapper: a generic first line, the real error in inner_exception."""

    def __init__(self, inner: Exception):
        super().__init__(f"backend='inductor' raised:\n{type(inner).__name__}: {inner}")
        self.inner_exception = inner


class CppCompileError(Exception):
    pass


class Wrapping(Backend):
    def _evaluate(self, m, result):
        def compile_():
            try:
                raise CppCompileError("C++ compile error in /tmp/x/kernel_12.cpp: 'foo' undeclared")
            except CppCompileError as e:
                raise BackendCompilerFailed(e) from e
        return self.stage(Stage.COMPILE, compile_)


def test_wrapper_errors_are_unwrapped_to_the_real_one():
    import numpy as np

    from campaign.artifacts import Materialized
    from campaign.testcase import TestCase
    from ir.core.text import parse

    g = parse("graph main(%x: f32[2]) {\n  %y = neg(%x) : f32[2]\n  return %y\n}")
    tc = TestCase("t", 0, g, {"x": np.ones(2, np.float32)})
    r = Wrapping().evaluate(Materialized(tc))
    assert (r.stage, r.error_class) == (Stage.COMPILE, "CppCompileError")
    assert r.error_msg.startswith("C++ compile error in /tmp/x/kernel_12.cpp")
    assert "(raised as BackendCompilerFailed: backend='inductor' raised:)" in r.error_msg
    assert normalize(r.error_class, r.error_msg, frames=r.frames) == \
        "CppCompileError: C++ compile error in <path>: 'foo' undeclared"


def test_every_backend_states_what_is_said_of_it_beside_itself():
    from campaign.backends import info_of
    from campaign.backends.base import ORT_TRACKER, PYTORCH, TVM_TRACKER, WHOLE_STACK

    for name in BACKENDS.names():
        info = info_of(name)
        assert info.display and info.packages and info.tracker in (PYTORCH, TVM_TRACKER,
                                                                   ORT_TRACKER), name
        assert info_of(f"{name}?x=1") == info  # options change nothing said of it
    assert info_of("ort_noopt").display == "ONNX Runtime"
    assert info_of("tvm_torch").packages == ("apache-tvm", "torch")
    assert info_of("aot_eager").display.startswith("torch.compile (aot_eager")
    user = info_of("mypkg.mod:MyBackend")  # not importable: its name, the whole stack
    assert (user.display, user.packages, user.tracker) == ("mypkg.mod:MyBackend", WHOLE_STACK,
                                                          PYTORCH)
