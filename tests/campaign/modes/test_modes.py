"""Test modes (campaign/modes): one object per mode answers every mode question."""
from __future__ import annotations

import numpy as np
import pytest

from campaign.backends import make_backend
from campaign.backends.base import breaks_graph, compiled_dialect
from campaign.modes import GRAD, INFER, MODES, TRANSFORM, drawn_mode, mode_of
from campaign.testcase import TestCase
from campaign.worker import FuzzWorker, WorkerConfig
from ir.core.text import parse
from ir.gen.builder import GenConfig
from ir.materialize.grad import GradSpec
from ir.materialize.transforms import TransformSpec
from ir.numerics.grad import wants_grad, wants_transform

G = parse("graph main(%x: f32[3], %w: param f32[3]) {\n  %y = mul(%x, %w) : f32[3]\n"
          "  return %y\n}")
VALUES = {"x": np.ones(3, np.float32), "w": np.full(3, 2.0, np.float32)}
CT = ({"y": np.ones(3, np.float32)},)


def case(grad: GradSpec | None = None, transform: TransformSpec | None = None) -> TestCase:
    return TestCase("t", 0, G, dict(VALUES), grad=grad, transform=transform)


def test_modes_are_registered_by_their_row_name_and_a_case_has_one():
    assert list(MODES) == ["infer", "grad", "transform", "repeat", "cache"]
    assert all(MODES[name].name == name for name in MODES)
    grad = GradSpec(("x",), CT)
    vjp = TransformSpec("vjp", ("x",), outputs=(0,), cotangents=CT)
    assert mode_of(case()) is INFER and case().mode is INFER
    assert mode_of(case(grad)) is GRAD
    assert mode_of(case(grad, vjp)) is TRANSFORM and mode_of(case(None, vjp)) is TRANSFORM


def test_each_mode_states_its_results_row_fields_and_files():
    grad = GradSpec(("x", "w"), CT)
    vjp = TransformSpec("vjp", ("w",), outputs=(0,), cotangents=CT)
    infer, g, t = case(), case(grad), case(grad, vjp)
    assert (INFER.labels(infer), GRAD.labels(g), TRANSFORM.labels(t)) == (
        ["output 0"], ["output 0", "grad %x", "grad %w"], ["output 0", "vjp %w"])
    assert [m.n_results(c) for m, c in ((INFER, infer), (GRAD, g), (TRANSFORM, t))] == [1, 3, 2]
    assert INFER.row_fields(infer) == {"mode": "infer", "grad_leaves": 0, "transform": ""}
    assert GRAD.row_fields(g) == {"mode": "grad", "grad_leaves": 2, "transform": ""}
    assert TRANSFORM.row_fields(t) == {"mode": "transform", "grad_leaves": 2, "transform": "vjp"}
    assert INFER.files(infer) == {} and set(GRAD.files(g)) == {"grad.json", "cotangents.npz"}
    assert set(TRANSFORM.files(t)) == {"transform.json", "transform.npz"}
    for mode, c in ((INFER, infer), (GRAD, g), (TRANSFORM, t)):
        tols, precs = mode.tolerances(c)
        assert len(tols) == len(precs) == mode.n_results(c), mode


def test_what_a_backend_needs_is_the_modes_answer():
    tvm, ort, eager = make_backend("tvm"), make_backend("ort"), make_backend("eager?dialect=hop")
    vjp = case(None, TransformSpec("vjp", ("w",), outputs=(0,), cotangents=CT))
    assert not INFER.trains_on(tvm) and GRAD.trains_on(tvm) and not GRAD.trains_on(ort)
    assert GRAD.lacks(tvm) == tvm.LACKS | tvm.TRAINING_LACKS and INFER.lacks(tvm) == tvm.LACKS
    assert TRANSFORM.lacks(tvm) == tvm.LACKS  # it refuses the mode whole instead
    assert TRANSFORM.refusal(tvm, vjp) == ("tvm computes no torch.func transform (it trains "
                                           "gradient tests only): a vjp test is not run")
    assert TRANSFORM.refusal(ort) is None and TRANSFORM.refusal(eager) is None
    assert INFER.refusal(tvm) is None and GRAD.refusal(tvm) is None


@pytest.mark.parametrize(("configured", "allowed", "adapts", "expected"), [
    ("hop", ("python",), True, "python"),  # a compiler runs a python-only transform test
    ("hop", ("python",), False, "hop"),  # torch eager does not (NotApplicable)
    ("hop", ("python", "hop"), True, "hop"),
    ("hop", None, True, "hop"),
    ("python", ("python",), True, "python"),
    (None, ("python",), True, None),  # an ONNX backend has no dialect
])
def test_a_compiler_takes_the_dialect_its_test_mode_needs(configured, allowed, adapts, expected):
    assert compiled_dialect(configured, 0, allowed, adapts) == expected


def test_an_adapted_python_dialect_breaks_the_graph_unless_configured():
    assert breaks_graph("hop", "python") and breaks_graph("mixed", "python")
    assert not breaks_graph("python", "python") and not breaks_graph("hop", "hop")
    inductor, eager = make_backend("inductor?dialect=hop"), make_backend("eager?dialect=hop")
    t = case(None, TransformSpec("vjp", ("w",), ("python",), outputs=(0,), cotangents=CT))
    assert inductor.dialect_for(t) == "python" and eager.dialect_for(t) == "hop"
    assert inductor.dialect_for(case()) == "hop"


def test_a_seed_draws_its_mode_as_the_generator_rates_say():
    gen = GenConfig(p_grad=0.6, p_transform=0.5)
    for seed in range(200):
        mode = drawn_mode(seed, gen)
        if not wants_grad(seed, gen.p_grad):
            assert mode is INFER
        else:
            transform = wants_transform(seed, gen.p_transform, gen.transforms)
            assert mode is (TRANSFORM if transform is not None else GRAD)
    assert drawn_mode(0, GenConfig(p_grad=0.0)) is INFER
    assert GRAD.generator(gen) == gen.for_training() and INFER.generator(gen) is gen


def test_a_made_test_is_in_its_drawn_mode_or_falls_back_to_a_gradient_test():
    gen = GenConfig(p_grad=1.0, p_transform=1.0, p_if=0.2)
    worker = FuzzWorker(WorkerConfig(generator=gen, backends=[], sandbox=False))
    seen = set()
    for seed in range(6):
        tc = worker.make_test(f"t{seed}", seed)
        assert drawn_mode(seed, gen) is TRANSFORM
        assert tc.mode in (TRANSFORM, GRAD, INFER)
        if tc.transform is None:  # the transform made no sense for the graph
            assert tc.mode is (GRAD if tc.grad is not None else INFER)
        seen.add(tc.mode.name)
    assert "transform" in seen


def test_a_transform_test_has_no_dynamic_shapes():
    assert not TRANSFORM.combines_with_dynshape and GRAD.combines_with_dynshape
    assert not TRANSFORM.per_set and GRAD.per_set
    assert INFER.mergeable and not GRAD.mergeable and not TRANSFORM.mergeable
    from campaign.worker import make_dyn_test

    cfg = WorkerConfig(generator=GenConfig(p_grad=1.0, p_transform=1.0), backends=[],
                       sandbox=False)
    made = [make_dyn_test(cfg, f"t{seed}", seed) for seed in range(4)]
    dynamic = [tc for tc in made if tc.dynshape is not None]
    assert dynamic and all(tc.mode is GRAD for tc in dynamic)


def test_the_reducer_keeps_a_mode_by_its_refit():
    small = parse("graph main(%x: f32[3]) {\n  %y = neg(%x) : f32[3]\n  return %y\n}")
    none = parse("graph main(%x: i64[3]) {\n  %y = neg(%x) : i64[3]\n  return %y\n}")
    grad = GradSpec(("x", "w"), CT)
    tc = TestCase("t", 0, small, {"x": np.ones(3, np.float32)})
    assert GRAD.refit(tc, grad, G, 0) is None and tc.grad.leaves == ("x",)
    assert tc.grad.cotangents[0]["y"].shape == (3,)
    ints = TestCase("t", 0, none, {"x": np.ones(3, np.int64)})
    assert GRAD.refit(ints, grad, G, 0) == "no leaf left" and ints.grad is None
    vjp = TransformSpec("vjp", ("x", "w"), outputs=(0,), cotangents=CT)
    assert TRANSFORM.refit(tc, vjp, G, 0) is None and tc.transform.leaves == ("x",)
    assert TRANSFORM.refit(ints, vjp, G, 0) == "no such transform test left"
    assert INFER.refit(tc, None, G, 0) is None
