"""The reference as a backend: torch eager, in a sandbox like any compiler.

- `eager`: the graph as the reference runs it. Against the reference it must always pass; a
  mismatch means eager is nondeterministic or the harness is broken (a sanity check of the
  pipeline and sandbox).
- `eager_f64` (`eager?float64=true`): the float64 shadow (`campaign.reference.run_shadow`), float
  outputs cast back to their graph dtype. A mismatch against the float32 reference means the
  test is numerically ill-conditioned at the tolerance used (the reference itself is off from
  the near-exact result): a measure of false-positive risk, never a compiler bug.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import Backend, BackendResult, register
from campaign.reference import run_shadow, torch_env
from campaign.verdict import Stage


class EagerBackend(Backend):
    """torch eager on the CPU (optionally the float64 shadow)."""

    #: the worker must not judge this backend's mismatches with the shadow: it *is* the shadow
    shadow_judged: ClassVar[bool] = False

    def __init__(self, float64: bool = False):
        self.name = "eager"
        self.float64 = bool(float64)

    @property
    def version(self) -> str:
        import torch

        return f"torch-{torch.__version__}"

    def prepare(self) -> None:
        import torch  # noqa: F401

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        import torch

        from ir.materialize.to_torch import evaluate_torch

        g = self.stage(Stage.IMPORT, lambda: m.tc.graph)
        if self.float64:
            outs = self.stage(Stage.RUN, lambda: run_shadow(m), result, "run_ms")
            types = g.output_types()
            return [o.astype(types[i % len(types)].dtype.numpy, copy=False)
                    for i, o in enumerate(outs)]

        def run(k_env):
            k, env = k_env
            gk = m.tc.graph_of(k)  # dynamic shapes: each set's own concrete graph
            with torch.no_grad():
                values = evaluate_torch(gk, torch_env(env))
            return [values[o].numpy() for o in gk.outputs]

        return self.run_sets(list(enumerate(m.tc.value_sets())), run, result)


register("eager", EagerBackend)
register("eager_f64", EagerBackend, float64=True)
