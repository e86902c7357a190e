"""Gradient tests as torch: the training step every torch evaluation of one runs
(docs/training.md).

A gradient test differentiates the loss

    L = sum over float outputs o_i of <o_i, c_i>

(a vector-Jacobian product with fixed cotangents `c_i`) with respect to its *leaves*, some of
its float inputs and params. Its result on one input set is the forward outputs, then the
gradient of every leaf, in `GradSpec.leaves` order. The reference (eager), its float64 shadow,
each compiler and the standalone repro run this same step (`training_step`), so they differ
only in who computes the forward and the backward.

Invariants: `leaves` are names of float graph inputs and params, inputs first, each in graph
order; `cotangents[k]` holds, for input set k, one array per float output (by output name) of
that output's shape and dtype in that set.
"""
from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ir.core.graph import Graph
from ir.core.npz import npz_bytes


def kept_or_fresh(old: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...],
                  dtype: np.dtype, key: str) -> np.ndarray:
    """`old[name]` (a cotangent or tangent) when it still has `shape` and `dtype`, else a fresh
    one uniform in [-1, 1], drawn from the string `key` (a reducer candidate's refit)."""
    a = old.get(name)
    if a is not None and a.shape == shape and a.dtype == dtype:
        return a
    rng = np.random.default_rng(random.Random(key).randrange(2**32))
    return rng.uniform(-1.0, 1.0, shape).astype(dtype)

@dataclass(frozen=True)
class GradSpec:
    """What a gradient test differentiates: its leaves and, per input set, its cotangents."""

    leaves: tuple[str, ...]
    cotangents: tuple[Mapping[str, np.ndarray], ...]

    def n_results(self, g: Graph) -> int:
        """Arrays per input set: the outputs, then one gradient per leaf."""
        return len(g.outputs) + len(self.leaves)

    def labels(self, g: Graph) -> list[str]:
        """What each result of one input set is: `output i`, then `grad %leaf`."""
        return [f"output {i}" for i in range(len(g.outputs))] + [f"grad %{x}" for x in self.leaves]

    def input_leaves(self, g: Graph) -> list[bool]:
        """Per graph input: whether it is a leaf."""
        return [v.name in self.leaves for v in g.inputs]

    def param_leaves(self, g: Graph) -> frozenset[str]:
        return frozenset(p.name for p in g.params if p.name in self.leaves)

    def of_sets(self, sets: Sequence[int]) -> GradSpec:
        """This spec for a test run on input sets `sets` of the original, in that order."""
        return GradSpec(self.leaves, tuple(self.cotangents[k] for k in sets))

    # ---- as files (a finding's folder: grad.json + cotangents.npz; never pickle) -----------
    def files(self) -> dict[str, bytes]:
        arrays = {f"s{k}/{name}": c for k, cts in enumerate(self.cotangents)
                  for name, c in cts.items()}
        meta = {"leaves": list(self.leaves), "sets": len(self.cotangents)}
        return {"grad.json": json.dumps(meta).encode(), "cotangents.npz": npz_bytes(arrays)}

    @staticmethod
    def from_files(grad_json: bytes, cotangents_npz: bytes) -> GradSpec:
        meta = json.loads(grad_json)
        sets: list[dict[str, np.ndarray]] = [{} for _ in range(int(meta["sets"]))]
        with np.load(io.BytesIO(cotangents_npz), allow_pickle=False) as z:
            for key in z.files:
                k, _, name = key.partition("/")
                sets[int(k[1:])][name] = z[key]
        return GradSpec(tuple(meta["leaves"]), tuple(sets))


def loss_of(outputs: Sequence[torch.Tensor], names: Sequence[str],
            cotangents: Mapping[str, np.ndarray]) -> torch.Tensor | None:
    """sum <o_i, c_i> over the outputs that have a cotangent; None when none requires grad."""
    terms = []
    for o, name in zip(outputs, names, strict=True):
        c = cotangents.get(name)
        if c is None or not isinstance(o, torch.Tensor) or not o.requires_grad:
            continue
        ct = torch.from_numpy(np.asarray(c)).to(device=o.device, dtype=o.dtype)
        terms.append((o * ct).sum())
    if not terms:
        return None
    return torch.stack(terms).sum() if len(terms) > 1 else terms[0]


def vjp(outputs: Sequence[torch.Tensor], names: Sequence[str], leaves: Sequence[torch.Tensor],
        cotangents: Mapping[str, np.ndarray]) -> list[torch.Tensor]:
    """The gradient of every leaf of `L = sum <o_i, c_i>` (zeros for a leaf no output depends
    on), detached."""
    loss = loss_of(outputs, names, cotangents)
    if loss is None:
        return [torch.zeros_like(x).detach() for x in leaves]
    grads = torch.autograd.grad(loss, list(leaves), allow_unused=True, materialize_grads=True)
    return [gr.detach() for gr in grads]


def training_step(module: Callable[..., Sequence[torch.Tensor]], g: Graph,
                  inputs: Sequence[torch.Tensor], spec: GradSpec, k: int,
                  params: Mapping[str, torch.Tensor],
                  mark: Callable[[list[torch.Tensor]], None] | None = None) -> list[torch.Tensor]:
    """One input set's result of a gradient test: `module(*inputs)`'s outputs, then the
    gradient of every leaf. `inputs` are fresh tensors (the leaf ones are made to require grad
    here); `params`: the module's trainable params by graph name (`trainable_params`).

    `mark`, when given, is called on the arguments `module` gets, leaves made, before the call:
    what torch.compile is told about them (`torch._dynamo.maybe_mark_dynamic`) is an attribute
    of the tensor object, and a leaf is a new tensor (`detach`) that carries none over."""
    args = [x.detach().requires_grad_(True) if leaf else x
            for x, leaf in zip(inputs, spec.input_leaves(g), strict=True)]
    if mark is not None:
        mark(args)
    by_name = {v.name: a for v, a in zip(g.inputs, args, strict=True)}
    with torch.enable_grad():
        outs = list(module(*args))
        leaves = [by_name[x] if x in by_name else params[x] for x in spec.leaves]
        grads = vjp(outs, g.outputs, leaves, spec.cotangents[k])
    return [o.detach() for o in outs] + grads


def trainable_params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The params a module of `ir.materialize.to_torch` trains (`p_<name>` parameters that
    require grad), by graph name."""
    return {name.removeprefix("p_"): p for name, p in module.named_parameters() if p.requires_grad}
