"""Compiler configurations as a fuzzing dimension (campaign/backends/configs.py): drawing, the
text form, and every option of every backend's space reaching the compiler."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaign.artifacts import Materialized
from campaign.backends import BACKENDS, Backend, BackendResult, make_backend
from campaign.backends.configs import (
    Option,
    config_text,
    draw,
    parse_config,
    parse_spec,
    with_config,
)
from campaign.backends.inductor import INDUCTOR_FLAGS, InductorBackend
from campaign.backends.onnx_export import OnnxExportBackend
from campaign.backends.ort import OrtBackend
from campaign.backends.tvm import TvmBackend
from campaign.testcase import TestCase
from ir import parse

SPACE = (
    Option("a", (False, True), "a flag"),
    Option("b", (None, 1, 8), "an int"),
    Option("c", ("x", "y", "z"), "a string"),
)

GRAPH = parse("""graph main(%x: f32[2,3]) {
  %y = relu(%x) : f32[2,3]
  return %y
}""")

#: a graph with control flow
IF_GRAPH = parse("""graph main(%x: f32[3], %p: b8[]) {
  %y = if(%p, %x) : f32[3] {
    graph then(%a: f32[3]) {
      %b = relu(%a) : f32[3]
      return %b
    }
    graph else(%c: f32[3]) {
      %d = neg(%c) : f32[3]
      return %d
    }
  }
  return %y
}""")


class Recording(Backend):
    """A stand-in compiler that records the options it was built with and returns its input."""

    CONFIG_SPACE = SPACE
    built: list[dict[str, Any]] = []  # noqa: RUF012 (the test reads it)

    def __init__(self, a: bool = False, b: int | None = None, c: str = "x"):
        self.name = "recording"
        self.given = {"a": a, "b": b, "c": c}
        Recording.built.append(self.given)

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        result.error_msg = config_text({k: v for k, v in self.given.items()
                                        if v != {o.name: o.default for o in SPACE}[k]})
        return [np.asarray(v) for v in m.tc.feed_sets()[0].values()]


@pytest.fixture
def recording():
    BACKENDS["recording"] = Recording
    Recording.built = []
    yield
    dict.__delitem__(BACKENDS, "recording")


def _case(seed: int) -> Materialized:
    return Materialized(TestCase(f"t{seed}", seed, GRAPH,
                                 {"x": np.ones((2, 3), np.float32)}, [{"seed": seed}]))


@given(seed=st.integers(0, 10**9), sample=st.floats(0.0, 1.0),
       fixed=st.sets(st.sampled_from(["a", "b", "c"])))
@settings(max_examples=200, deadline=None)
def test_a_drawn_configuration_changes_only_free_options_to_other_values_and_reads_back(
        seed, sample, fixed):
    config = draw(SPACE, fixed, "spec", seed, sample)
    assert config == draw(SPACE, fixed, "spec", seed, sample)
    defaults = {o.name: o.default for o in SPACE}
    assert not set(config) & fixed
    assert all(v != defaults[k] for k, v in config.items())
    assert parse_config(config_text(config)) == config
    if sample == 0 or fixed == {"a", "b", "c"}:
        assert config == {}


def test_drawing_keeps_the_backends_own_configuration_for_the_rest_of_the_tests():
    drawn = [draw(SPACE, (), "spec", s, 0.3) for s in range(2000)]
    changed = sum(bool(c) for c in drawn) / len(drawn)
    assert 0.25 < changed < 0.35
    # every non-default value of every option is drawn
    seen = {(k, v) for c in drawn for k, v in c.items()}
    assert seen == {(o.name, v) for o in SPACE for v in o.others()}


def test_the_text_form_is_sorted_and_a_spec_with_it_is_the_configured_backend():
    assert config_text({"b": None, "a": True, "c": "y"}) == "a=true&b=none&c=y"
    assert config_text({}) == ""
    assert with_config("inductor?dialect=mixed", "cpp_wrapper=true&simdlen=0") == \
        "inductor?cpp_wrapper=true&dialect=mixed&simdlen=0"
    assert with_config("tvm", "opt_level=0") == "tvm?opt_level=0"
    assert with_config("tvm?opt_level=2", "opt_level=0") == "tvm?opt_level=0"
    assert with_config("ort", "") == "ort"


def test_every_option_reaches_the_stand_in_compiler(recording):
    b = make_backend("recording")
    b.sample_configs = 1.0
    seen: set[tuple[str, Any]] = set()
    for seed in range(60):
        config = b.config_of(seed)
        r = b.evaluate(_case(seed))
        assert r.backend_config == config_text(config)
        assert r.error_msg == r.backend_config  # what the compiler was built with
        seen |= set(config.items())
    assert seen == {(o.name, v) for o in SPACE for v in o.others()}


def test_a_spec_option_is_never_drawn_and_a_variant_is_built_once(recording):
    b = make_backend("recording?c=z")
    b.sample_configs = 1.0
    configs = [b.config_of(s) for s in range(40)]
    assert all("c" not in c for c in configs)
    v = b.variant(configs[0])
    assert v is b.variant(dict(configs[0])) and v.name == "recording?c=z"
    assert v.given["c"] == "z" and v.config_of(0) == {}  # a variant draws nothing more


def test_the_backends_own_configuration_when_configs_are_off(recording):
    b = make_backend("recording")
    assert b.sample_configs == 0 and all(b.config_of(s) == {} for s in range(50))
    assert b.evaluate(_case(3)).backend_config == ""


# ---- the real backends' spaces reach their compilers -------------------------------------------

def _values(cls: type[Backend]) -> list[tuple[str, Any]]:
    return [(o.name, v) for o in cls.CONFIG_SPACE for v in o.others()]


@pytest.mark.parametrize("name, value", _values(InductorBackend))
def test_each_inductor_option_reaches_torch_compile_or_inductors_config(name, value):
    v = make_backend("inductor").variant({name: value})
    patches = v._config_patches()
    if name in INDUCTOR_FLAGS:
        assert patches[INDUCTOR_FLAGS[name]] == value
    elif name == "mode":
        assert patches["max_autotune"] is True
    elif name == "cpp_wrapper":
        assert patches["cpp_wrapper"] is True
    elif name in ("scalars", "params", "inplace"):  # the program's form (the module builder)
        assert getattr(v.form, name) == value
    else:  # torch.compile's own arguments
        assert getattr(v, name) == value


def test_an_inductor_flag_is_applied_to_the_compile(monkeypatch):
    """The config patch reaches `compile_fx` (the C++ kernels are then really unvectorized)."""
    import torch._inductor.compile_fx as cfx

    seen: list[dict] = []
    real = cfx.compile_fx

    def spy(gm, inputs, config_patches=None, **kw):
        import torch._inductor.config as icfg

        with icfg.patch(config_patches or {}):
            seen.append({"simdlen": icfg.cpp.simdlen, "split": icfg.split_reductions})
        return real(gm, inputs, config_patches=config_patches, **kw)

    monkeypatch.setattr(cfx, "compile_fx", spy)
    v = make_backend("inductor").variant({"simdlen": 0, "split_reductions": False})
    r = v.evaluate(_case(1))
    assert r.outputs is not None and not r.failed, r.error_msg
    assert seen and all(s == {"simdlen": 0, "split": False} for s in seen)


@pytest.mark.parametrize("name, value", _values(OrtBackend))
def test_each_ort_option_reaches_the_session(monkeypatch, name, value):
    import onnxruntime as ort

    given: dict[str, Any] = {}

    class Session:
        def __init__(self, model, so, providers=None, **kw):
            given.update(level=so.graph_optimization_level, threads=so.intra_op_num_threads,
                         mode=so.execution_mode, **kw)
            raise RuntimeError("recorded")

    monkeypatch.setattr(ort, "InferenceSession", Session)
    make_backend("ort").variant({name: value}).evaluate(_case(2))
    expect = {
        "opt_level": ("level", {"extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}.get(value)),
        "disabled_optimizers": ("disabled_optimizers", str(value).split(",")),
        "execution_mode": ("mode", ort.ExecutionMode.ORT_PARALLEL),
        "threads": ("threads", value),
    }[name]
    assert given[expect[0]] == expect[1]


@pytest.mark.parametrize("name, value", _values(TvmBackend))
def test_each_tvm_option_reaches_the_build(monkeypatch, name, value):
    import tvm

    given: dict[str, Any] = {}

    def build(mod, target=None, relax_pipeline=None):
        given.update(target=target, pipeline=relax_pipeline,
                     level=tvm.transform.PassContext.current().opt_level)
        raise RuntimeError("recorded")

    monkeypatch.setattr(tvm, "compile", build)
    make_backend("tvm").variant({name: value}).evaluate(_case(3))
    if name == "opt_level":
        assert given["level"] == value
    elif name == "pipeline":
        assert given["pipeline"] == "default"
    else:
        assert given["target"].attrs["mcpu"] == value


@pytest.mark.parametrize("name, value", _values(OnnxExportBackend))
def test_each_exporter_option_reaches_torch_onnx_export(monkeypatch, name, value):
    import torch

    given: dict[str, Any] = {}

    def export(module, args, f=None, **kw):
        given.update(kw, module=module)
        raise RuntimeError("recorded")

    monkeypatch.setattr(torch.onnx, "export", export)
    make_backend("onnx_export").variant({name: value}).evaluate(_case(4))
    if name in ("scalars", "params", "inplace"):  # the form of the module exported
        assert getattr(given["module"].form, name) == value
        return
    key = {"opset": "opset_version"}.get(name, name)
    assert given[key] == value


def test_the_torchscript_exporter_refuses_control_flow_as_unsupported():
    g = IF_GRAPH
    m = Materialized(TestCase("t", 0, g, {"x": np.ones(3, np.float32), "p": np.array(True)},
                              [{"seed": 0}]))
    r = make_backend("onnx_export").variant({"dynamo": False}).evaluate(m)
    assert r.verdict is not None and r.verdict.value == "unsupported"
    assert r.error_msg == ("the TorchScript exporter traces one path of data-dependent control "
                           "flow: dynamo=False: the TorchScript exporter would trace one path of "
                           "this graph's control flow (or fix its shapes)")


def test_every_registered_space_names_constructor_options_with_distinct_values():
    for name in ("ort", "tvm", "inductor", "onnx_export"):
        b = make_backend(name)
        assert b.CONFIG_SPACE
        base, _ = parse_spec(name)
        for o in b.CONFIG_SPACE:
            b.variant({o.name: o.others()[0]})  # each non-default value builds
    with pytest.raises(ValueError, match="bad mcpu"):
        make_backend("tvm?mcpu=x;y")


def test_an_option_that_cannot_take_the_graph_is_not_drawn_for_it():
    """The TorchScript exporter traces one path of control flow: never drawn for an `if`."""
    flow = IF_GRAPH
    b = make_backend("onnx_export")
    b.sample_configs = 1.0
    assert not any("dynamo" in b.config_of(s, flow) for s in range(200))
    assert any(b.config_of(s, GRAPH).get("dynamo") is False for s in range(200))


def test_docs_configs_lists_every_option_of_every_space():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "configs.md").read_text()
    for name in ("ort", "tvm", "inductor", "onnx_export"):
        b = make_backend(name)
        for o in (*b.CONFIG_SPACE, *b.TRAINING_SPACE):
            assert f"| `{o.name}` |" in doc, (name, o.name)


def test_training_options_are_drawn_only_for_tests_that_train():
    b = make_backend("inductor")
    b.sample_configs = 1.0
    training = {o.name for o in b.TRAINING_SPACE}
    inference = [b.config_of(s, GRAPH) for s in range(200)]
    trains = [b.config_of(s, GRAPH, trains=True) for s in range(200)]
    assert not any(training & set(c) for c in inference)
    assert any(training & set(c) for c in trains)
    # a backend that does not train never draws them, whatever the test
    ort = make_backend("ort")
    assert not ort.TRAINING_SPACE


# ---- torch program forms (campaign/backends/forms.py) -------------------------------------------

#: a graph every form option changes: a loop (its counter), a 0-d param, a write
FORM_GRAPH = parse("""graph main(%x: f32[3], %n: i64[], %w: param f32[]) {
  %y = loop(%n, %x) : f32[3] {
    graph body(%i: i64[], %a: f32[3]) {
      %b = neg(%a) : f32[3]
      return %b
    }
  }
  %z = mul(%y, %w) : f32[3]
  %r = relu_(%z) : f32[3]
  return %r
}""")


def _form_values() -> list[tuple[str, str]]:
    from campaign.backends.forms import FORM_SPACE

    return [(o.name, v) for o in FORM_SPACE for v in o.others()]


@pytest.mark.parametrize("backend", ["inductor", "onnx_export", "tvm_torch", "eager"])
@pytest.mark.parametrize("name, value", _form_values())
def test_each_form_option_reaches_the_module_builder(monkeypatch, backend, name, value):
    """The option is the form of the module the backend builds, and the row's dialect says it."""
    import ir.materialize.dynshape as dynshape
    from ir.materialize.form import DEFAULT_FORM, TorchForm

    built: list[tuple[str, TorchForm]] = []

    def spy(g, dyn, params, dialect="python", form=DEFAULT_FORM, trainable=frozenset()):
        built.append((dialect, form))
        raise RuntimeError("recorded")

    monkeypatch.setattr(dynshape, "torch_module", spy)
    spec = "eager?dialect=hop" if backend == "eager" else backend
    b = make_backend(spec).variant({name: value})
    m = Materialized(TestCase("f", 1, FORM_GRAPH,
                              {"x": np.ones(3, np.float32), "n": np.asarray(2, np.int64),
                               "w": np.asarray(0.5, np.float32)}, [{"seed": 1}]))
    r = b.evaluate(m)
    assert built == [("hop", TorchForm(**{name: value}))]
    assert r.dialect == f"hop+{name}={value}"
    assert r.failed and "recorded" in (r.error_msg or "")


def test_form_options_are_drawn_only_for_graphs_they_change():
    """`scalars` needs a loop or a 0-d param, `params` params, `inplace` writes: none of them
    changes GRAPH (one relu), each is drawn for FORM_GRAPH."""
    b = make_backend("inductor")
    b.sample_configs = 1.0
    forms = {"scalars", "params", "inplace"}
    assert not any(forms & set(b.config_of(s, GRAPH)) for s in range(300))
    drawn = set().union(*(forms & set(b.config_of(s, FORM_GRAPH)) for s in range(300)))
    assert drawn == forms


def test_a_bad_form_option_names_the_backend():
    with pytest.raises(ValueError) as e:
        make_backend("inductor?scalars=float")
    assert "inductor: torch form: scalars must be one of tensor, number, got 'float'" in str(e.value)
