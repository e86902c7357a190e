"""autograd's rules for in-place writes (`ir.analysis.autograd`): each refused program is one
torch eager refuses, each accepted one eager differentiates, and the messages are exact."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ir import parse, verify
from ir.analysis.autograd import AUTOGRAD_REJECTIONS, autograd_problem, grad_values
from ir.materialize.grad import GradSpec, trainable_params, training_step
from ir.materialize.to_torch import GraphModule

#: a leaf written through a view
LEAF_WRITE = """
graph main(%x: f32[4], %y: f32[2]) {
  %v = view_slice[axis=0, start=0, end=2, step=1](%x) : f32[2]
  %w = add_(%v, %y) : f32[2]
  return %x
}
"""

#: exp saves its result for backward; the result is then written
SAVED_WRITE = """
graph main(%x: f32[4], %y: f32[4]) {
  %e = exp(%x) : f32[4]
  %w = add_(%e, %y) : f32[4]
  return %w
}
"""

#: add saves nothing: writing its result afterwards is fine
UNSAVED_WRITE = """
graph main(%x: f32[4], %y: f32[4]) {
  %e = add(%x, %y) : f32[4]
  %w = mul_(%e, %y) : f32[4]
  %s = sigmoid(%w) : f32[4]
  return %s
}
"""


def eager_grad(text: str, leaves: tuple[str, ...]) -> None:
    g = verify(parse(text))
    rng = np.random.default_rng(0)
    values = {v.name: rng.uniform(-1, 1, tuple(v.type.shape)).astype(np.float32)
              for v in g.inputs}
    cts = {o: np.ones(tuple(t.shape), np.float32) for o, t in zip(g.outputs, g.output_types(), strict=True)}
    spec = GradSpec(leaves, (cts,))
    module = GraphModule(g, {}, trainable=spec.param_leaves(g))
    xs = [torch.from_numpy(values[v.name]).clone() for v in g.inputs]
    training_step(module, g, xs, spec, 0, trainable_params(module))


def test_a_write_to_a_leaf_through_a_view_is_refused_as_eager_refuses_it():
    g = verify(parse(LEAF_WRITE))
    assert autograd_problem(g, ["x"]) == (
        "graph main, inst 1 (add_): "
        + AUTOGRAD_REJECTIONS["leaf"].format(x="x", via=" through %v"))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        eager_grad(LEAF_WRITE, ("x",))
    # y as the only leaf: x is written with a value that requires grad, which eager accepts
    assert autograd_problem(g, ["y"]) is None
    eager_grad(LEAF_WRITE, ("y",))


def test_a_write_to_memory_saved_for_backward_is_refused_as_eager_refuses_it():
    g = verify(parse(SAVED_WRITE))
    assert autograd_problem(g, ["x"]) == (
        "graph main, inst 1 (add_): "
        + AUTOGRAD_REJECTIONS["saved"].format(x="e", via="", i=0, op="exp"))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        eager_grad(SAVED_WRITE, ("x",))
    # with y alone the exp carries no gradient: nothing is saved
    assert autograd_problem(g, ["y"]) is None
    eager_grad(SAVED_WRITE, ("y",))


def test_a_write_after_an_op_that_saves_nothing_is_accepted():
    g = verify(parse(UNSAVED_WRITE))
    assert autograd_problem(g, ["x", "y"]) is None
    eager_grad(UNSAVED_WRITE, ("x", "y"))


def test_gradients_flow_through_floats_and_writes_only():
    g = verify(parse("""
graph main(%x: f32[4], %y: f32[4], %n: i64[4]) {
  %c = gt(%x, %y) : b8[4]
  %m = cast[to=i64](%c) : i64[4]
  %a = add(%n, %m) : i64[4]
  %e = add(%y, %y) : f32[4]
  %w = add_(%e, %x) : f32[4]
  return %c, %a, %w
}
"""))
    # e holds no gradient of x before the write; w (the written memory after it) does
    assert grad_values(g, ["x"]) == {"x", "w"}
    assert grad_values(g, ["y"]) == {"y", "e", "w"}
