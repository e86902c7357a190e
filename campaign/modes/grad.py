"""The gradient mode (docs/training.md): a training step, the outputs then each leaf's
gradient (a vector-Jacobian product with fixed cotangents), per input set."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from campaign.modes.base import Expected, TestMode

if TYPE_CHECKING:
    from campaign.artifacts import Materialized
    from campaign.backends.base import Backend
    from campaign.evaluation import ReferenceResult
    from campaign.oracle import Truths
    from campaign.testcase import TestCase
    from ir.core.graph import Graph
    from ir.gen.builder import GenConfig


class GradMode(TestMode):
    """Owns `TestCase.grad` (`ir.materialize.grad.GradSpec`): its leaves and cotangents."""

    name = "grad"
    spec_field = "grad"
    differentiates = True

    def generator(self, gen: GenConfig) -> GenConfig:
        return gen.for_training()

    def make(self, tc: TestCase, seed: int, gen: GenConfig) -> TestCase:
        from ir.numerics.grad import draw_grad

        tc.grad = draw_grad(tc.graph, seed, [tc.graph_of(k) for k in range(tc.n_sets)])
        return tc

    def refit(self, tc: TestCase, spec: Any, drawn_for: Graph, seed: int,
              keep_leaves: bool = False) -> str | None:
        """The leaves and cotangents for the candidate graph, each set's cotangents in that
        set's shapes (`ir.numerics.grad.refit_grad`; `keep_leaves`: no leaf is let go for lack
        of an output depending on it)."""
        from ir.numerics.grad import refit_grad

        sets = [tc.graph_of(k) for k in range(tc.n_sets)]
        tc.grad = refit_grad(spec, tc.graph, sets, seed, keep_leaves=keep_leaves)
        return "no leaf left" if tc.grad is None else None

    def n_results(self, tc: TestCase) -> int:
        assert tc.grad is not None
        return len(tc.graph.outputs) + len(tc.grad.leaves)

    def labels(self, tc: TestCase) -> list[str]:
        assert tc.grad is not None
        return tc.grad.labels(tc.graph)

    def reference(self, m: Materialized, t0: float) -> ReferenceResult:
        from campaign.evaluation import run_grad_reference

        assert m.tc.grad is not None
        return run_grad_reference(m.tc, m.tc.grad, t0)

    def shadow(self, m: Materialized, samples: int | None = None) -> Truths:
        from campaign.evaluation import sets_shadow

        return sets_shadow(m, m.tc.grad, samples)

    def tolerances(self, tc: TestCase) -> tuple[list, list]:
        from ir.analysis.precision import (
            gradient_precisions,
            gradient_tolerances,
            output_precisions,
            output_tolerances,
        )

        assert tc.grad is not None
        return (output_tolerances(tc.graph) + gradient_tolerances(tc.graph, tc.grad.leaves),
                output_precisions(tc.graph) + gradient_precisions(tc.graph, tc.grad.leaves))

    def files(self, tc: TestCase) -> dict[str, bytes]:
        assert tc.grad is not None
        return tc.grad.files()

    def trains_on(self, backend: Backend) -> bool:
        return backend.TRAINS

    def lacks(self, backend: Backend) -> frozenset[str]:
        return backend.lacks() | (backend.TRAINING_LACKS if backend.TRAINS else frozenset())

    def forward(self, prep: Any) -> Expected:
        """The forward outputs of each set, out of the reference's outputs and gradients."""
        from campaign.oracle import Truths

        n_all, n = self.n_results(prep.tc), len(prep.tc.graph.outputs)
        keep = [i for i in range(len(prep.ref.outputs)) if i % n_all < n]

        def forward_truth() -> Truths:
            whole = prep.truth()
            return Truths([whole[i] for i in keep], [whole.spread[i] for i in keep])

        return ([prep.ref.outputs[i] for i in keep], n, prep.tolerances[:n],
                prep.precisions[:n], forward_truth)


GRAD = GradMode()
