"""A transform test's program, standalone (dynsmith's docs/training.md): the graph's module as
a function of its leaves, under the `torch.func` transform that `transform.json` names, with
the cotangents and tangents of `transform.npz`. The same program as dynsmith's
`ir.materialize.transforms.transformed`, written with torch alone.

Results (a flat list): vmap, every output batched on a new axis 0; grad, dL/dx per leaf for
L = sum of <o_i, c_i> over the differentiated outputs; vjp, the outputs, then the pullback of
the cotangents to every leaf; jvp, the outputs, then the tangent of every differentiated
output; jacrev and jacfwd, one Jacobian per (differentiated output, leaf), output-major.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch


def read_transform(here: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """transform.json (the transform and what it needs) and transform.npz (cotangents
    `c<k>/<output>`, tangents `t<k>/<leaf>` of input set k) of the folder `here`."""
    with open(os.path.join(here, "transform.json")) as f:
        meta = json.load(f)
    with np.load(os.path.join(here, "transform.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return meta, arrays


def leaf_function(model: torch.nn.Module, inputs: Sequence[torch.Tensor],
                  input_names: Sequence[str], leaves: Sequence[str]
                  ) -> Callable[..., tuple[torch.Tensor, ...]]:
    """`model` as a function of its leaves only: the other inputs bound to `inputs`, a leaf
    param replacing the module's `p_<name>` (`torch.func.functional_call`)."""
    position = {n: i for i, n in enumerate(input_names)}

    def f(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = list(inputs)
        params: dict[str, torch.Tensor] = {}
        for name, x in zip(leaves, xs, strict=True):
            if name in position:
                args[position[name]] = x
            else:
                params[f"p_{name}"] = x
        if params:
            return tuple(torch.func.functional_call(model, params, tuple(args)))
        return tuple(model(*args))
    return f


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, copy=True, order="C"))


def transform_program(model: torch.nn.Module, sets: Sequence[Mapping[str, np.ndarray]],
                      input_names: Sequence[str], output_names: Sequence[str], here: str
                      ) -> tuple[Callable[..., list[torch.Tensor]], list[torch.Tensor], str]:
    """(the transformed program, its arguments, a line saying what it is) for the folder
    `here`: vmap's arguments are the batched leaves (leaf j stacked along its in_dim from the
    input sets `samples`; the other inputs bound to set `samples[0]`'s), a derivative
    transform's the leaves' values in input set 0."""
    from torch import func

    meta, arrays = read_transform(here)
    name, leaves = meta["name"], list(meta["leaves"])
    base = sets[meta["samples"][0]] if name == "vmap" else sets[0]
    f = leaf_function(model, [_tensor(base[n]) for n in input_names], input_names, leaves)
    if name == "vmap":
        in_dims = tuple(meta["in_dims"])
        args = [_tensor(np.stack([sets[s][x] for s in meta["samples"]], axis=d))
                for x, d in zip(leaves, in_dims, strict=True)]
        mapped = func.vmap(lambda *xs: tuple(f(*xs)), in_dims=in_dims, out_dims=0)
        return (lambda *xs: list(mapped(*xs)), args,
                f"torch.func.vmap over {leaves} (in_dims={in_dims}) of input sets {meta['samples']}")
    position = {n: i for i, n in enumerate(input_names)}
    args = [(_tensor(sets[0][x]) if x in position else getattr(model, f"p_{x}").detach())
            for x in leaves]
    diff = [int(i) for i in meta["outputs"]]
    argnums = tuple(range(len(leaves)))
    what = (f"torch.func.{name} with respect to {leaves}, of outputs "
            f"{[output_names[i] for i in diff]}")

    def differentiated(*xs: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        outs = f(*xs)
        return tuple(outs[i] for i in diff), outs

    if name in ("grad", "vjp"):
        cts = [_tensor(arrays[f"c0/{output_names[i]}"]) for i in diff]
        if name == "grad":
            def loss(*xs: torch.Tensor) -> torch.Tensor:
                ds, _ = differentiated(*xs)
                terms = [(o * c.to(o)).sum() for o, c in zip(ds, cts, strict=True)]
                return torch.stack(terms).sum() if len(terms) > 1 else terms[0]
            gradient = func.grad(loss, argnums=argnums)
            return (lambda *xs: list(gradient(*xs))), args, what

        def pullback(*xs: torch.Tensor) -> list[torch.Tensor]:
            res: Any = func.vjp(differentiated, *xs, has_aux=True)
            ds, fn, outs = res
            return [*outs, *fn(tuple(c.to(o) for o, c in zip(ds, cts, strict=True)))]
        return pullback, args, what
    if name == "jvp":
        tgs = [_tensor(arrays[f"t0/{x}"]) for x in leaves]

        def pushforward(*xs: torch.Tensor) -> list[torch.Tensor]:
            res: Any = func.jvp(differentiated, xs, tuple(t.to(x) for x, t in zip(xs, tgs, strict=True)),
                                has_aux=True)
            _, tangent_outs, outs = res
            return [*outs, *tangent_outs]
        return pushforward, args, what
    jac = (func.jacrev if name == "jacrev" else func.jacfwd)(lambda *xs: differentiated(*xs)[0],
                                                           argnums=argnums)
    return (lambda *xs: [j for per_output in jac(*xs) for j in per_output]), args, what
