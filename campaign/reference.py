"""The reference of a test: torch eager on the CPU, as the test's mode computes it
(`campaign.modes`: `TestMode.reference`, `TestMode.shadow`), with a validity check on every
value, and its float64 shadow. The evaluations they are made of, and what a test is invalid
for, are `campaign.evaluation`'s (its module doc); their names are re-exported here."""
from __future__ import annotations

import time

from campaign.artifacts import Materialized
from campaign.evaluation import (
    ROUNDING_SAMPLES,
    ReferenceResult,
    evaluate_perturbed,
    forward_reference,
    grad_module,
    rounding_spread,
    run_grad_reference,
    sets_shadow,
    torch_env,
    widen_graph,
)
from campaign.oracle import Truths

__all__ = ["ROUNDING_SAMPLES", "ReferenceResult", "evaluate_perturbed", "forward_reference",
           "grad_module", "rounding_spread", "run_grad_reference", "run_reference",
           "run_shadow", "sets_shadow", "torch_env", "widen_graph"]


def run_reference(m: Materialized) -> ReferenceResult:
    """The reference's result of every input set, set after set (one flat list), as the
    test's mode computes it (`TestMode.reference`); invalid when any set is."""
    return m.tc.mode.reference(m, time.perf_counter())


def run_shadow(m: Materialized, samples: int | None = None) -> Truths:
    """The reference's result computed with every float in float64, laid out as
    `run_reference`'s, as the test's mode computes it (`TestMode.shadow`; `samples`: rounding
    evaluations per set, None: `ROUNDING_SAMPLES`). Raises what eager raises."""
    return m.tc.mode.shadow(m, samples)
