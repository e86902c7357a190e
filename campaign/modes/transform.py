"""The transform mode (docs/training.md): the test's program under a torch.func transform
(vmap, grad, vjp, jvp, jacrev, jacfwd), its results on input set 0 (vmap: stacked over its
samples) against eager's."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from campaign.modes.base import Expected, TestMode
from campaign.modes.grad import GRAD

if TYPE_CHECKING:
    from campaign.artifacts import Materialized
    from campaign.backends.base import Backend
    from campaign.evaluation import ReferenceResult
    from campaign.oracle import Truths
    from campaign.testcase import TestCase
    from ir.core.graph import Graph
    from ir.gen.builder import GenConfig


class TransformMode(TestMode):
    """Owns `TestCase.transform` (`ir.materialize.transforms.TransformSpec`). Its results are
    of one evaluation, not per input set (`per_set` False), and it has no dynamic shapes."""

    name = "transform"
    spec_field = "transform"
    differentiates = True
    combines_with_dynshape = False
    per_set = False
    wraps_module = True

    def generator(self, gen: GenConfig) -> GenConfig:
        return gen.for_training()

    def make(self, tc: TestCase, seed: int, gen: GenConfig) -> TestCase:
        """A gradient test's leaves, then the transform drawn for the seed; a test the
        transform makes no sense for stays a gradient test."""
        from ir.materialize.transforms import draw_transform
        from ir.numerics.grad import wants_transform

        tc = GRAD.make(tc, seed, gen)
        name = wants_transform(seed, gen.p_transform, gen.transforms)
        if name is not None and (not tc.shapes.dynamic or self.combines_with_dynshape):
            tc.transform = draw_transform(tc.graph, seed, tc.value_sets(), name)
        return tc

    def refit(self, tc: TestCase, spec: Any, drawn_for: Graph, seed: int,
              keep_leaves: bool = False) -> str | None:
        """The transform for the candidate graph (`ir.materialize.transforms.refit_transform`:
        its leaves, outputs and arrays follow the graph)."""
        from ir.materialize.transforms import refit_transform

        tc.transform = refit_transform(spec, drawn_for, tc.graph, tc.value_sets(), seed)
        return "no such transform test left" if tc.transform is None else None

    def n_results(self, tc: TestCase) -> int:
        return tc.transform.n_results(tc.graph)

    def labels(self, tc: TestCase) -> list[str]:
        return tc.transform.labels(tc.graph)

    def reference(self, m: Materialized, t0: float) -> ReferenceResult:
        """The forward of every set, as an inference test's, then the transform's results in
        eager (`ir.materialize.transforms.transform_reference`: vmap's per-sample results
        stacked), which must be finite. Invalid when eager refuses the transform."""
        import torch

        from campaign.evaluation import ReferenceResult, forward_reference, grad_module
        from ir.materialize.transforms import transform_reference

        tc, spec = m.tc, m.tc.transform
        forward = forward_reference(m, t0)
        if forward.problem is not None:
            return forward
        module = grad_module(tc.graph, tc, spec, tc.params())
        try:
            results = transform_reference(module, tc.graph, spec, tc.value_sets())
        except Exception as e:  # eager refuses the transform: our generator's bug
            return ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                   f"eager {spec.name} raised: {e}", "EagerTransformError")
        for label, t in zip(spec.labels(tc.graph), results, strict=True):
            if t.dtype.is_floating_point and not bool(torch.isfinite(t).all()):
                return ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                       f"{spec.name}: {label} is not finite", "InvalidReference")
        return ReferenceResult([t.numpy() for t in results], (time.perf_counter() - t0) * 1e3,
                               forward=forward.outputs)

    def shadow(self, m: Materialized, samples: int | None = None) -> Truths:
        """The results in float64: the widened module under the same transform (vmap: per
        sample, stacked), float results as float64; no rounding spread."""
        import numpy as np
        import torch

        from campaign.evaluation import grad_module, widen_graph
        from campaign.oracle import Truths
        from ir.materialize.transforms import transform_reference

        tc, spec = m.tc, m.tc.transform
        params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v
                  for k, v in tc.params().items()}
        wide = widen_graph(tc.graph)
        module = grad_module(wide, tc, spec, params)
        sets = [{k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in s.items()}
                for s in tc.value_sets()]
        results = transform_reference(module, wide, spec, sets)
        return Truths([(t.to(torch.float64) if t.dtype.is_floating_point else t).numpy()
                       for t in results])

    def tolerances(self, tc: TestCase) -> tuple[list, list]:
        return transform_tolerances(tc.graph, tc.transform)

    def row_fields(self, tc: TestCase) -> dict[str, Any]:
        return {**super().row_fields(tc), "transform": tc.transform.name}

    def files(self, tc: TestCase) -> dict[str, bytes]:
        return tc.transform.files()

    def trains_on(self, backend: Backend) -> bool:
        return backend.TRAINS

    def lacks(self, backend: Backend) -> frozenset[str]:
        extra = backend.TRAINING_LACKS if backend.TRAINS and backend.TRANSFORMS else frozenset()
        return backend.lacks() | extra

    def refusal(self, backend: Backend, tc: TestCase | None = None) -> str | None:
        """A backend that trains (`Backend.TRAINS`) but computes no transform
        (`Backend.TRANSFORMS`) takes no transform test: it would be judged against the
        transform's results."""
        if backend.TRANSFORMS or not backend.TRAINS:
            return None
        what = f"a {tc.transform.name} test" if tc is not None else "a transform test"
        return (f"{backend.name} computes no torch.func transform (it trains gradient tests "
                f"only): {what} is not run")

    def dialects(self, tc: TestCase) -> tuple[str, ...] | None:
        """The dialects torch eager runs the transform in (`TransformSpec.dialects`): torch.func
        has no rule for the higher-order ops' derivatives, so a test with control flow runs
        in the python dialect alone."""
        return tuple(tc.transform.dialects)

    def forward(self, prep: Any) -> Expected:
        """The forward of every set (`ReferenceResult.forward`), as an inference test's."""
        from campaign.evaluation import sets_shadow
        from campaign.modes.infer import INFER

        assert prep.ref.forward is not None
        tols, precs = INFER.tolerances(prep.tc)
        return (list(prep.ref.forward), len(prep.tc.graph.outputs), tols, precs,
                lambda: sets_shadow(prep.m, None))


def transform_tolerances(g: Graph, spec: Any) -> tuple[list, list]:
    """The tolerance and precision of each result of a transform test (`spec`, a
    `TransformSpec`, in its `labels` order): an output's own, a leaf's gradient's for what
    differentiates with respect to that leaf (grad, vjp, the Jacobians), the loosest
    gradient's for a forward tangent (jvp), which mixes every leaf."""
    from ir.analysis.precision import (
        gradient_precisions,
        gradient_tolerances,
        output_precisions,
        output_tolerances,
    )

    out_t, out_p = output_tolerances(g), output_precisions(g)
    leaf_t = dict(zip(spec.leaves, gradient_tolerances(g, spec.leaves), strict=True))
    leaf_p = dict(zip(spec.leaves, gradient_precisions(g, spec.leaves), strict=True))
    return spec.kind.tolerances(spec, (out_t, out_p), (leaf_t, leaf_p))


TRANSFORM = TransformMode()
