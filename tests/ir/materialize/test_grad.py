"""The training step of a gradient test (ir/materialize/grad.py, docs/training.md): the leaves it
makes carry what torch.compile was told about the inputs (`mark`), so a dynamic-shape gradient
test compiles once for shapes of every size >= 2."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch._dynamo

from ir import parse, verify
from ir.materialize.grad import GradSpec, training_step

#: x0's first dim is the symbolic one (5, then 7); x0 is the leaf, x1 is not
GRAPH = verify(parse("""
graph main(%x0: f32[5,3], %x1: f32[3]) {
  %v2 = mul(%x0, %x1) : f32[5,3]
  %v3 = tanh(%v2) : f32[5,3]
  return %v3
}
"""))
SIZES = (5, 7)


def spec() -> GradSpec:
    rng = np.random.default_rng(0)
    return GradSpec(("x0",), tuple({"v3": rng.uniform(-1, 1, (n, 3)).astype(np.float32)}
                                   for n in SIZES))


def inputs(n: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(n)
    return [torch.from_numpy(rng.uniform(-1, 1, s).astype(np.float32)) for s in ((n, 3), (3,))]


def program(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.tanh(x0 * x1),)


def mark(xs: list[torch.Tensor]) -> None:
    torch._dynamo.maybe_mark_dynamic(xs[0], 0)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_the_module_gets_leaves_that_carry_the_marks():
    seen: list[tuple[bool, object]] = []

    def module(*xs: torch.Tensor) -> tuple[torch.Tensor]:
        seen.extend((x.requires_grad, getattr(x, "_dynamo_weak_dynamic_indices", None))
                    for x in xs)
        return program(*xs)

    out = training_step(module, GRAPH, inputs(5), spec(), 0, {}, mark=mark)
    assert seen == [(True, {0}), (False, None)]
    assert [o.shape for o in out] == [(5, 3), (5, 3)]  # the output, then x0's gradient


def test_a_compiled_step_on_marked_leaves_compiles_once_for_two_shapes():
    """The marks go on the leaves: marking the inputs before the step made leaves of them
    (new tensors, unmarked), and the second shape compiled again."""
    compiles = [0]

    def counted(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        from torch._dynamo.backends.registry import lookup_backend

        compiles[0] += 1
        return lookup_backend("aot_eager")(gm, example_inputs)

    compiled = torch.compile(program, backend=counted, dynamic=None, fullgraph=True)
    grad = spec()
    for k, n in enumerate(SIZES):
        xs = inputs(n)
        got = training_step(compiled, GRAPH, xs, grad, k, {}, mark=mark)
        want = training_step(program, GRAPH, xs, grad, k, {})
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b)
    assert compiles == [1]
