"""The inference mode: a test is its graph's outputs on every input set (the default)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from campaign.modes.base import TestMode, output_labels

if TYPE_CHECKING:
    from campaign.artifacts import Materialized
    from campaign.evaluation import ReferenceResult
    from campaign.oracle import Truths
    from campaign.testcase import TestCase


class InferMode(TestMode):
    """Outputs of every input set against eager's; the only mode tests merge in."""

    name = "infer"
    mergeable = True

    def n_results(self, tc: TestCase) -> int:
        return len(tc.graph.outputs)

    def labels(self, tc: TestCase) -> list[str]:
        return output_labels(tc.graph)

    def reference(self, m: Materialized, t0: float) -> ReferenceResult:
        from campaign.evaluation import forward_reference

        return forward_reference(m, t0)

    def shadow(self, m: Materialized, samples: int | None = None) -> Truths:
        from campaign.evaluation import sets_shadow

        return sets_shadow(m, None, samples)

    def tolerances(self, tc: TestCase) -> tuple[list, list]:
        from ir.analysis.precision import output_precisions, output_tolerances

        return output_tolerances(tc.graph), output_precisions(tc.graph)


INFER = InferMode()
