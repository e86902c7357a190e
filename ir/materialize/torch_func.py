"""A transform test's program in plain torch (docs/training.md): the graph's module as a
function of its leaves, under one `torch.func` transform. Standalone on purpose: this file
imports only numpy, torch and the standard library, because it is both the program dynsmith
runs (`ir.materialize.transforms.transformed` builds on it) and, copied verbatim, a part of
every transform finding's `repro.py` (`campaign.triage.pipeline.repro.part_source`), where `transform_program`
reads the transform from the finding's folder. One program, so the repro computes exactly
what the campaign compared.

Results (a flat list): vmap, every output batched on a new axis 0; grad, dL/dx per leaf for
L = sum of <o_i, c_i> over the differentiated outputs; vjp, the outputs, then the pullback of
the cotangents to every leaf; jvp, the outputs, then the tangent of every differentiated
output; jacrev and jacfwd, one Jacobian per (differentiated output, leaf), output-major.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

#: f(*leaf_tensors) -> tuple of outputs
LeafFunction = Callable[..., Sequence[torch.Tensor]]


def bind_leaves(model: torch.nn.Module, inputs: Sequence[torch.Tensor],
                input_names: Sequence[str], leaves: Sequence[str]
                ) -> Callable[..., tuple[torch.Tensor, ...]]:
    """`model` as a function of its leaves only: the other inputs bound to `inputs` (one per
    input name; a leaf's entry unused), a leaf param replacing the module's `p_<name>`
    (`torch.func.functional_call`; the module must hold leaf params as tensors)."""
    position = {n: i for i, n in enumerate(input_names)}
    bound = list(inputs)
    names = tuple(leaves)

    def f(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = list(bound)
        params: dict[str, torch.Tensor] = {}
        for name, x in zip(names, xs, strict=True):
            if name in position:
                args[position[name]] = x
            else:
                params[f"p_{name}"] = x
        if params:
            return tuple(torch.func.functional_call(model, params, tuple(args)))
        return tuple(model(*args))
    return f


@dataclass(frozen=True)
class FuncProgram:
    """How one torch.func transform is applied (`PROGRAMS`): `build(f, n_leaves, in_dims,
    outputs, cotangents, tangents)` returns the program; `takes` names the arrays it needs
    per input set (`cotangents`: one per differentiated output, `tangents`: one per leaf,
    None: neither); `batched`: its arguments are the leaves stacked over samples (vmap)."""

    build: Callable[..., Callable[..., list[torch.Tensor]]]
    takes: str | None = None
    batched: bool = False


def _vmap(f: LeafFunction, n_leaves: int, in_dims: Sequence[int], outputs: Sequence[int],
          cotangents: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
          ) -> Callable[..., list[torch.Tensor]]:
    mapped = torch.func.vmap(lambda *xs: tuple(f(*xs)), in_dims=tuple(in_dims), out_dims=0)
    return lambda *xs: list(mapped(*xs))


def _differentiated(f: LeafFunction, outputs: Sequence[int]
                    ) -> Callable[..., tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]]:
    """f as (its differentiated outputs, all its outputs): the aux form torch.func takes."""
    diff = tuple(outputs)

    def differentiated(*xs: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        outs = tuple(f(*xs))
        return tuple(outs[i] for i in diff), outs
    return differentiated


def _grad(f: LeafFunction, n_leaves: int, in_dims: Sequence[int], outputs: Sequence[int],
          cotangents: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
          ) -> Callable[..., list[torch.Tensor]]:
    differentiated = _differentiated(f, outputs)

    def loss(*xs: torch.Tensor) -> torch.Tensor:
        ds, _ = differentiated(*xs)
        terms = [(o * c.to(o)).sum() for o, c in zip(ds, cotangents, strict=True)]
        return torch.stack(terms).sum() if len(terms) > 1 else terms[0]
    gradient = torch.func.grad(loss, argnums=tuple(range(n_leaves)))
    return lambda *xs: list(gradient(*xs))


def _vjp(f: LeafFunction, n_leaves: int, in_dims: Sequence[int], outputs: Sequence[int],
         cotangents: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
         ) -> Callable[..., list[torch.Tensor]]:
    differentiated = _differentiated(f, outputs)

    def pullback(*xs: torch.Tensor) -> list[torch.Tensor]:
        # torch's stubs type vjp without has_aux (2 results)
        res: Any = torch.func.vjp(differentiated, *xs, has_aux=True)
        ds, fn, outs = res
        return [*outs, *fn(tuple(c.to(o) for o, c in zip(ds, cotangents, strict=True)))]
    return pullback


def _jvp(f: LeafFunction, n_leaves: int, in_dims: Sequence[int], outputs: Sequence[int],
         cotangents: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
         ) -> Callable[..., list[torch.Tensor]]:
    differentiated = _differentiated(f, outputs)

    def pushforward(*xs: torch.Tensor) -> list[torch.Tensor]:
        res: Any = torch.func.jvp(differentiated, xs,
                                  tuple(t.to(x) for x, t in zip(xs, tangents, strict=True)),
                                  has_aux=True)
        _, tangent_outs, outs = res
        return [*outs, *tangent_outs]
    return pushforward


def _jacobian(jacobian: Callable[..., Any]) -> Callable[..., Callable[..., list[torch.Tensor]]]:
    def build(f: LeafFunction, n_leaves: int, in_dims: Sequence[int], outputs: Sequence[int],
              cotangents: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]
              ) -> Callable[..., list[torch.Tensor]]:
        differentiated = _differentiated(f, outputs)
        jac = jacobian(lambda *xs: differentiated(*xs)[0], argnums=tuple(range(n_leaves)))
        return lambda *xs: [j for per_output in jac(*xs) for j in per_output]
    return build


#: every transform's program, by its torch.func name
PROGRAMS: dict[str, FuncProgram] = {
    "vmap": FuncProgram(_vmap, batched=True),
    "grad": FuncProgram(_grad, takes="cotangents"),
    "vjp": FuncProgram(_vjp, takes="cotangents"),
    "jvp": FuncProgram(_jvp, takes="tangents"),
    "jacrev": FuncProgram(_jacobian(torch.func.jacrev)),
    "jacfwd": FuncProgram(_jacobian(torch.func.jacfwd)),
}


def func_program(name: str, f: LeafFunction, n_leaves: int, in_dims: Sequence[int] = (),
                 outputs: Sequence[int] = (), cotangents: Sequence[torch.Tensor] = (),
                 tangents: Sequence[torch.Tensor] = ()) -> Callable[..., list[torch.Tensor]]:
    """Transform `name` of `f` (of `n_leaves` leaves): a callable of the leaves' values (vmap:
    of the batched leaves, batched along `in_dims`) returning the results as a flat list.
    `outputs`: the differentiated outputs' indices; `cotangents` (grad, vjp): one per
    differentiated output; `tangents` (jvp): one per leaf."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown transform {name!r}")
    return PROGRAMS[name].build(f, n_leaves, tuple(in_dims), tuple(outputs), tuple(cotangents),
                                tuple(tangents))


# ---- from a finding's folder (repro.py) ---------------------------------------------------------

def read_transform(here: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """transform.json (the transform and what it needs) and transform.npz (cotangents
    `c<k>/<output>`, tangents `t<k>/<leaf>` of input set k) of the folder `here`."""
    with open(os.path.join(here, "transform.json")) as f:
        meta = json.load(f)
    with np.load(os.path.join(here, "transform.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return meta, arrays


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, copy=True, order="C"))


def transform_program(model: torch.nn.Module, sets: Sequence[Mapping[str, np.ndarray]],
                      input_names: Sequence[str], output_names: Sequence[str], here: str
                      ) -> tuple[Callable[..., list[torch.Tensor]], list[torch.Tensor], str]:
    """(the transformed program, its arguments, a line saying what it is) for the finding
    folder `here`: vmap's arguments are the batched leaves (leaf j stacked along its in_dim
    from the input sets `samples`; the other inputs bound to set `samples[0]`'s), a
    derivative transform's the leaves' values in input set 0."""
    meta, arrays = read_transform(here)
    name, leaves = meta["name"], list(meta["leaves"])
    program = PROGRAMS[name]
    base = sets[meta["samples"][0]] if program.batched else sets[0]
    f = bind_leaves(model, [_tensor(base[n]) for n in input_names], input_names, leaves)
    if program.batched:
        in_dims = tuple(meta["in_dims"])
        args = [_tensor(np.stack([sets[s][x] for s in meta["samples"]], axis=d))
                for x, d in zip(leaves, in_dims, strict=True)]
        return (func_program(name, f, len(leaves), in_dims), args,
                f"torch.func.vmap over {leaves} (in_dims={in_dims}) of input sets {meta['samples']}")
    position = {n: i for i, n in enumerate(input_names)}
    args = [(_tensor(sets[0][x]) if x in position else getattr(model, f"p_{x}").detach())
            for x in leaves]
    diff = [int(i) for i in meta["outputs"]]
    cts = ([_tensor(arrays[f"c0/{output_names[i]}"]) for i in diff]
           if program.takes == "cotangents" else [])
    tgs = [_tensor(arrays[f"t0/{x}"]) for x in leaves] if program.takes == "tangents" else []
    return (func_program(name, f, len(leaves), outputs=diff, cotangents=cts, tangents=tgs), args,
            f"torch.func.{name} with respect to {leaves}, of outputs {[output_names[i] for i in diff]}")
