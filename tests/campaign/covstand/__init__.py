"""Test double for compiler coverage: `CovStandIn`, a backend whose "compiler" is the small
Python package `covstand/compiler` (measured: its `COVERAGE_PACKAGES`), so coverage is real
but cheap. Loaded by dotted path (`covstand:CovStandIn?crash_seed=2`; tests/campaign is on
sys.path under pytest). This module itself is not measured. Not product code.

The compiler's lines depend on a graph's ops (a branch per op) and on its shapes (a branch for
results wider than 4), so two graphs with the same features (ops, edges, nesting) may still
reach different lines. Outputs are the reference's; `crash_seed`: the test of that seed dies
of SIGSEGV at compile, after its lines ran.
"""
from __future__ import annotations

import ctypes

import numpy as np
import torch

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult
from campaign.verdict import Stage
from covstand.compiler import lower


class CovStandIn(Backend):
    COVERAGE_PACKAGES = ("covstand/compiler",)

    def __init__(self, crash_seed: int = -1):
        self.name = "covstand"
        self.crash_seed = crash_seed

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        def compile_() -> None:
            lower(m.tc.graph)
            if m.tc.seed == self.crash_seed:
                ctypes.string_at(0)  # reads address 0: SIGSEGV

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: _eager(m), result, "run_ms")


def _eager(m: Materialized) -> list[np.ndarray]:
    """The graph (no control flow) evaluated op by op in torch, for every input set."""
    g, out = m.tc.graph, []
    for values in m.tc.value_sets():
        env = {k: torch.from_numpy(np.asarray(v)) for k, v in values.items()}
        with torch.no_grad():
            for inst in g.insts:
                res = inst.op.torch(*(env[a] for a in inst.args))
                for r, t in zip(inst.results, (res,) if len(inst.results) == 1 else res,
                                strict=True):
                    env[r.name] = t
        out += [env[o].numpy() for o in g.outputs]
    return out
