"""The reference: torch eager on the CPU, with a validity check on every intermediate value.

A test is *invalid* (our generator's problem, never a finding against a compiler) when eager
raises, or any value, intermediate or output, is non-finite (float) or so large that an integer
op could have wrapped around: each int value must satisfy |x| < 2**(bits/2 - 1), which keeps every
product of two values and every sum of up to 2**(bits/2 - 2) values exact.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from campaign.artifacts import Materialized
from ir.to_torch import evaluate_torch


@dataclass
class ReferenceResult:
    outputs: list[np.ndarray] | None
    ms: float
    problem: str | None = None  #: why the test is invalid, None if valid
    error_class: str | None = None


def _value_problem(name: str, t: torch.Tensor) -> str | None:
    if t.dtype.is_floating_point:
        if not bool(torch.isfinite(t).all()):
            return f"value %{name} is not finite"
    elif t.dtype in (torch.int32, torch.int64) and t.numel():
        limit = 2 ** (torch.iinfo(t.dtype).bits // 2 - 1)
        if int(t.abs().max()) >= limit:
            return f"value %{name} reaches {int(t.abs().max())} (>= {limit}: integer overflow risk)"
    return None


def run_reference(m: Materialized) -> ReferenceResult:
    t0 = time.perf_counter()
    g = m.tc.graph
    try:
        with torch.no_grad():
            env = {k: torch.from_numpy(np.asarray(v, order="C")) for k, v in m.tc.values.items()}
            values = evaluate_torch(g, env)
    except Exception as e:
        return ReferenceResult(None, (time.perf_counter() - t0) * 1e3, f"eager raised: {e}", type(e).__name__)
    ms = (time.perf_counter() - t0) * 1e3
    for name, t in values.items():
        problem = _value_problem(name, t)
        if problem:
            return ReferenceResult(None, ms, problem, "InvalidReference")
    return ReferenceResult([values[o].numpy() for o in g.outputs], ms)
