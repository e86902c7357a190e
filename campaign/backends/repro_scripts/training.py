"""A gradient test's training step (docs/training.md), for the torch repros that train."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from campaign.backends.repro_scripts.prelude import INPUTS, load

# ---- per-test values
#: the gradient test: L = sum over float outputs of <out_i, c_i>, differentiated with respect
#: to LEAVES (graph inputs and params); cotangents.npz holds each c_i ("s<k>/<output>" for
#: input set k). A result is the outputs, then the gradient of every leaf.
LEAVES: list[str] = []
OUTPUTS: list[str] = []
# ---- end of per-test values


def train_step(fn: Callable[..., Any], model: Any, xs: Sequence[Any], k: int,
               mark: Callable[[list[Any]], None] | None = None) -> list[Any]:
    """The outputs of fn(*xs), then the gradient of every leaf of L (zeros where none flows).
    `mark`: called on fn's arguments once the leaves are made (torch._dynamo's dynamic-dim
    marks are attributes of a tensor object, which a leaf, a new tensor, does not carry)."""
    import torch

    cts = {name.partition("/")[2]: c for name, c in load("cotangents.npz").items()
           if name.startswith(f"s{k}/")}
    xs = [x.detach().requires_grad_(True) if n in LEAVES else x for n, x in zip(INPUTS, xs, strict=False)]
    if mark is not None:
        mark(xs)
    with torch.enable_grad():
        outs = list(fn(*xs))
        named = dict(zip(INPUTS, xs, strict=False))
        leaves = [named[n] if n in named else getattr(model, f"p_{n}") for n in LEAVES]
        terms = [(o * torch.from_numpy(cts[n]).to(o)).sum() for o, n in zip(outs, OUTPUTS, strict=False)
                 if n in cts and o.requires_grad]
        grads: Sequence[Any]
        if terms:
            grads = torch.autograd.grad(torch.stack(terms).sum(), leaves, allow_unused=True,
                                        materialize_grads=True)
        else:
            grads = [torch.zeros_like(x) for x in leaves]
    return [o.detach() for o in outs] + [g.detach() for g in grads]
