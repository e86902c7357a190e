"""Drawing a gradient test's leaves and cotangents (docs/training.md).

`draw_grad(g, seed, sets)` picks the leaves among the float32/float64 inputs and params that
some float output depends on, keeping only leaf sets torch eager accepts
(`ir.analysis.autograd`: no write to a leaf or its views, none to memory saved for backward),
and draws one cotangent per float output and input set, uniform in [-1, 1]. Deterministic in
`seed`; the RNG is its own, so an inference test made from the same seed is unchanged.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from ir.analysis.autograd import autograd_problem, grad_values
from ir.core.dtypes import DType
from ir.core.graph import Graph
from ir.materialize.grad import GradSpec, kept_or_fresh

#: leaf dtypes: float16 gradients differ between correct implementations by far more than a
#: test can tell from a bug (CPU kernels accumulate float16 in float32, eager in float16)
LEAF_DTYPES = frozenset({DType.float32, DType.float64})
#: the chance each candidate leaf is drawn (at least one always is)
P_LEAF = 0.6


def wants_grad(seed: int, rate: float) -> bool:
    """Whether the test of `seed` is a gradient test, at `rate` (its own RNG stream)."""
    return rate > 0 and random.Random(f"grad/{seed}").random() < rate


def wants_transform(seed: int, rate: float, transforms: Sequence[str]) -> str | None:
    """The transform a gradient test of `seed` runs under, at `rate` (its own RNG stream),
    or None."""
    rng = random.Random(f"transform-test/{seed}")
    if rate <= 0 or not transforms or rng.random() >= rate:
        return None
    return rng.choice(list(transforms))


def candidate_leaves(g: Graph) -> list[str]:
    """Float inputs and params (of `LEAF_DTYPES`) some float output depends on, inputs first."""
    float_outputs = {o for o, t in zip(g.outputs, g.output_types(), strict=True)
                     if t.dtype.is_float}
    out = []
    for v in (*g.inputs, *g.params):
        if v.type.dtype in LEAF_DTYPES and grad_values(g, [v.name]) & float_outputs:
            out.append(v.name)
    return out


def draw_grad(g: Graph, seed: int, sets: Sequence[Graph]) -> GradSpec | None:
    """The leaves and cotangents of a gradient test of `g` (`sets`: the concrete graph of
    each input set, whose output shapes the cotangents take); None when no leaf is possible."""
    rng = random.Random(f"leaves/{seed}")
    candidates = candidate_leaves(g)
    rng.shuffle(candidates)
    wanted = [x for x in candidates if rng.random() < P_LEAF] or candidates[:1]
    chosen: list[str] = []
    for x in wanted + [c for c in candidates if c not in wanted]:
        if x in wanted or not chosen:
            if autograd_problem(g, [*chosen, x]) is None:
                chosen.append(x)
    if not chosen:
        return None
    order = [v.name for v in (*g.inputs, *g.params)]
    leaves = tuple(sorted(chosen, key=order.index))
    nprng = np.random.default_rng(rng.randrange(2**32))
    cotangents = []
    for gk in sets:
        cts = {}
        for o, t in zip(gk.outputs, gk.output_types(), strict=True):
            if t.dtype.is_float:
                shape = tuple(int(d) for d in t.shape)
                cts[o] = nprng.uniform(-1.0, 1.0, shape).astype(t.dtype.numpy)
        cotangents.append(cts)
    return GradSpec(leaves, tuple(cotangents))


def refit_grad(spec: GradSpec, g: Graph, sets: Sequence[Graph], seed: int,
               keep_leaves: bool = False) -> GradSpec | None:
    """`spec` for a changed graph (the reducer's candidate, `sets` its input sets' graphs): the
    leaves `g` still has as float inputs or params some float output depends on and eager
    accepts together (a leaf whose write rule breaks is let go), the cotangents of every float
    output whose name and shape are unchanged, and fresh ones (drawn from `seed` and the
    output's name) for the others. None when no leaf is left: the candidate is no gradient
    test. `keep_leaves`: every leaf of `spec` still an input or param stays, whether or not an
    output depends on it (its gradient is zero then), as long as eager accepts them (a cause
    probe's rewrite must not stop checking the gradient it is about)."""
    candidates = set(candidate_leaves(g))
    if keep_leaves:
        candidates |= {v.name for v in (*g.inputs, *g.params) if v.type.dtype in LEAF_DTYPES}
    leaves: list[str] = []
    for x in spec.leaves:
        if x in candidates and autograd_problem(g, [*leaves, x]) is None:
            leaves.append(x)
    if not leaves:
        return None
    cotangents = []
    for k, gk in enumerate(sets):
        old = spec.cotangents[k] if k < len(spec.cotangents) else {}
        cts = {}
        for o, t in zip(gk.outputs, gk.output_types(), strict=True):
            if t.dtype.is_float:
                cts[o] = kept_or_fresh(old, o, tuple(int(d) for d in t.shape), t.dtype.numpy,
                                       f"cotangent/{seed}/{k}/{o}")
        cotangents.append(cts)
    return GradSpec(tuple(leaves), tuple(cotangents))
