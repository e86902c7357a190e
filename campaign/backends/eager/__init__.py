"""The reference as a backend: torch eager, in a sandbox like any compiler.

- `eager`: the graph as the reference runs it. Against the reference it must always pass; a
  mismatch means eager is nondeterministic or the harness is broken (a sanity check of the
  pipeline and sandbox).
- `eager_f64` (`eager?float64=true`): the float64 shadow (`campaign.reference.run_shadow`), float
  outputs cast back to their graph dtype. A mismatch against the float32 reference means the
  test is numerically ill-conditioned at the tolerance used (the reference itself is off from
  the near-exact result): a measure of false-positive risk, never a compiler bug.
- `eager?dialect=hop&scalars=number` (any of `dialect`, `scalars`, `params`, `inplace`): the
  test's torch module in that control-flow dialect and form (`ir.materialize.form`), built as
  the torch backends build it and run eagerly: each form must compute the reference's outputs
  (bench/dialects.py), so a mismatch there is ours, or torch eager's.

Gradient and transform tests train here too (docs/training.md): eager autograd's training step
on the module in its dialect (`python` without one: the reference itself), and the transform
run eagerly as it is, vmap included, which the reference replaces by per-sample runs stacked:
so `eager?dialect=hop` tests the batching rules of torch.cond and scan, and the higher-order
ops' own autograd. The float64 shadow gives its float64 results.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import (
    Backend,
    BackendInfo,
    BackendResult,
    NotApplicable,
    ReproSpec,
    register,
)
from campaign.backends.forms import form_option
from campaign.backends.inductor import TORCH_COMPILE_BODIES
from campaign.reference import run_shadow, torch_env
from campaign.verdict import Stage


class EagerBackend(Backend):
    """torch eager on the CPU (optionally the float64 shadow)."""

    INFO = BackendInfo("torch eager", ("torch",))

    #: the worker must not judge this backend's mismatches with the shadow: it *is* the shadow
    shadow_judged: ClassVar[bool] = False
    TRAINS = True
    TRANSFORMS = True

    def __init__(self, float64: bool = False, dialect: str | None = None,
                 scalars: str = "tensor", params: str = "buffer", inplace: str = "written"):
        self.name = "eager"
        self.float64 = bool(float64)
        self.form = form_option("eager", scalars, params, inplace)
        if dialect not in (None, "hop", "python"):
            raise ValueError(f"eager: dialect must be hop or python, got {dialect!r}")
        if self.form.changes() and dialect is None:
            dialect = "python"
        if dialect is not None and self.float64:
            raise ValueError("eager: float64 runs the reference's interpreter, not a module")
        #: the torch module's dialect (None: the reference's interpreter, no module)
        self.dialect = dialect

    @property
    def version(self) -> str:
        import torch

        return f"torch-{torch.__version__}"

    PRELOAD: ClassVar[tuple[str, ...]] = ("torch",)

    def prepare(self) -> None:
        import torch  # noqa: F401

    def repro_spec(self) -> ReproSpec | None:
        """A module dialect's findings: the torch program in that dialect and form, run
        without torch.compile (`COMPILER='none'` of campaign/backends/inductor/torch_compile.py, whose
        plan then names the higher-order op the program calls); the reference's interpreter
        and the float64 shadow have none (they are the reference)."""
        if self.dialect is None:
            return None
        return ReproSpec("inductor", {"device": "cpu", "fullgraph": True, "dynamic": False,
                                      "cpp_wrapper": False, "mode": None, "flags": {},
                                      "compiler": "none", "training_flags": {}},
                         dialect=self.dialect, form=self.form, trains=True,
                         bodies=TORCH_COMPILE_BODIES)

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        import torch

        from ir.materialize.to_torch import evaluate_torch

        g = self.stage(Stage.IMPORT, lambda: m.tc.graph)
        if m.tc.mode.trains_on(self) and not self.float64:
            return self._train(m, result)
        if self.dialect is not None:
            return self._module(m, result)
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


    def _train(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        """A gradient test's training step, or a transform test's transform, run eagerly on
        the module in this dialect and form (the reference's, `python`, without one)."""
        import torch

        from ir.materialize.dynshape import torch_module
        from ir.materialize.grad import trainable_params, training_step

        dialect = self.dialect or "python"
        result.dialect = self.form.label(dialect)
        tc = m.tc
        spec = tc.transform if tc.mode.wraps_module else tc.grad
        assert spec is not None  # asked for gradient and transform tests only
        module = self.stage(Stage.IMPORT, lambda: torch_module(
            tc.graph, tc.dynshape, tc.params(), dialect=dialect, form=self.form,
            trainable=spec.param_leaves(tc.graph)).eval())
        if tc.mode.wraps_module:
            from ir.materialize.transforms import transform_program, transformed

            t = tc.transform
            if dialect not in t.dialects:
                raise NotApplicable(f"{t.name}: torch eager runs this test only in the "
                                    f"{' or '.join(t.dialects)} dialect, not {dialect}")
            f, args = transform_program(module, tc.graph, t, tc.value_sets())
            result.input_set = 0
            outs = self.stage(Stage.RUN, lambda: transformed(t, f, 0, tc.graph.outputs)(*args),
                              result, "run_ms")
            result.input_set = None
            return [o.detach().numpy() for o in outs]
        params = trainable_params(module)
        grad = tc.grad
        assert grad is not None

        def run(k_feeds: tuple[int, dict[str, np.ndarray]]) -> list[np.ndarray]:
            k, feeds = k_feeds
            xs = [torch.from_numpy(np.array(x, order="C", copy=True)) for x in feeds.values()]
            return [o.numpy() for o in training_step(module, tc.graph_of(k), xs, grad, k,
                                                     params)]

        return self.run_sets(list(enumerate(tc.feed_sets())), run, result)

    def _module(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        """The test's torch module in this dialect and form, run eagerly on every set."""
        import torch

        from ir.materialize.dynshape import torch_module

        dialect = self.dialect
        assert dialect is not None
        result.dialect = self.form.label(dialect)
        module = self.stage(Stage.IMPORT, lambda: torch_module(
            m.tc.graph, m.tc.dynshape, m.tc.params(), dialect=dialect, form=self.form).eval())

        def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            # fresh copies: a graph may write its inputs in place (docs/inplace.md)
            xs = [torch.from_numpy(np.array(x, order="C", copy=True)) for x in feeds.values()]
            with torch.no_grad():
                return [o.numpy() for o in module(*xs)]

        return self.run_sets(m.tc.feed_sets(), run, result)


register("eager", EagerBackend)
register("eager_f64", EagerBackend, float64=True)
