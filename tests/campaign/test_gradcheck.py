"""The generator only makes gradient tests whose gradients are well-defined: for generated
grad-mode programs with control flow (and in-place writes, and dynamic shapes),
`torch.autograd.gradcheck` in float64 agrees with autograd on every input set, and eager
autograd (the reference) accepts them (docs/training.md)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from campaign.artifacts import Materialized
from campaign.reference import run_reference, widen_graph
from campaign.testcase import TestCase
from campaign.worker import FuzzWorker, WorkerConfig
from ir.gen.builder import GenConfig
from ir.materialize.to_torch import evaluate_torch
from mutators import MutationConfig

#: generated programs checked by the default run; the slow run checks `SLOW_PROGRAMS`
PROGRAMS = 24
SLOW_PROGRAMS = 320

CONTROL = ("if", "loop", "scan")


def grad_worker() -> FuzzWorker:
    gen = GenConfig(nodes=8, p_grad=1.0, p_if=0.3, p_loop=0.25, p_scan=0.25, p_inplace=0.15,
                    p_dynshape=0.1, max_depth=2)
    return FuzzWorker(WorkerConfig(generator=gen, backends=["ort"], sandbox=False,
                                   mutation=MutationConfig(rate=0.0)))


def gradcheck_test(tc: TestCase) -> None:
    """gradcheck, in float64, of every input set's float outputs with respect to the leaves."""
    assert tc.grad is not None
    for k, env in enumerate(tc.value_sets()):
        g = widen_graph(tc.graph_of(k))
        base = {name: torch.from_numpy(np.asarray(v, order="C")) for name, v in env.items()}
        base = {n: t.to(torch.float64) if t.dtype.is_floating_point else t for n, t in base.items()}
        floats = [i for i, t in enumerate(g.output_types()) if t.dtype.is_float]
        leaves = [base[x].clone().requires_grad_(True) for x in tc.grad.leaves]

        def f(*xs: torch.Tensor, g=g, base=base, floats=floats) -> tuple[torch.Tensor, ...]:
            values = evaluate_torch(g, {**base, **dict(zip(tc.grad.leaves, xs, strict=True))})
            # copies: an output may be a leaf itself, which gradcheck perturbs in place
            return tuple(values[g.outputs[i]].clone() for i in floats)

        # rtol 1e-3: central differences (eps 1e-6) are off by about f'''(x) eps^2 / 6, which a
        # smooth but steep gradient reaches: divisions chained through a scan's steps gave a
        # gradient of 5e4 whose finite difference was 6e-4 off (relative)
        assert torch.autograd.gradcheck(f, tuple(leaves), eps=1e-6, atol=1e-5, rtol=1e-3,
                                        fast_mode=False), f"{tc.test_id} input set {k}"


def check_programs(n: int) -> dict[str, int]:
    w = grad_worker()
    seen = {"grad": 0, "control": 0, "inplace": 0, "dynshape": 0, "invalid": 0}
    seed = 0
    while seen["grad"] < n:
        tc = w.make_test(f"t{seed}", seed)
        seed += 1
        counts = tc.graph.op_counts()
        if tc.grad is None or not any(counts[c] for c in CONTROL):
            continue
        if run_reference(Materialized(tc)).problem is not None:
            seen["invalid"] += 1  # the reference refuses it: no gradient test, counted below
            continue
        gradcheck_test(tc)
        seen["grad"] += 1
        seen["control"] += 1
        seen["inplace"] += any(i.op.effect.writes is not None for i, _ in tc.graph.walk())
        seen["dynshape"] += tc.dynshape is not None
    return seen


def test_generated_grad_programs_pass_gradcheck() -> None:
    seen = check_programs(PROGRAMS)
    assert seen["grad"] == PROGRAMS
    # the reference refuses few of them (acceptance: invalid tests at most 2% of a campaign)
    assert seen["invalid"] <= max(1, PROGRAMS // 10), seen


@pytest.mark.slow
def test_many_generated_grad_programs_pass_gradcheck() -> None:
    seen = check_programs(SLOW_PROGRAMS)
    print("gradcheck:", seen)
    assert seen["grad"] == SLOW_PROGRAMS
    assert seen["inplace"] > 0 and seen["dynshape"] > 0, seen
