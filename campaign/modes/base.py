"""`TestMode`: one kind of test, stated in one place (docs/architecture.md, "Adding a mode").

A test case (`campaign.testcase.TestCase`) is a graph with its input sets; its mode says what
else it is and how it is judged. Every question that depends on the mode is a method here,
answered by the mode's own module, so that the worker, the reference, the backends, the
router, the finding and the reproducer ask the mode and never test which one it is:

  - what a test of it is made of (`generator`, `differentiates`, `make`: the specs drawn
    beside the graph);
  - what its reference computes (`reference`, `shadow`), as one flat list of arrays per input
    set (`n_results`, `labels`);
  - its tolerances and precisions (`tolerances`);
  - the fields it writes into the row (`row_fields`);
  - what a backend needs to take it (`trains_on`, `lacks`, `refusal`, `dialects`,
    `wraps_module`), and what a
    backend that does not train it is judged on (`forward`);
  - its files, in a finding folder and beside a reproducer (`files`);
  - how the reducer keeps it (`refit`), whether it is reduced at all (`unreduced`), whether
    the reducer may try it on one input set alone (`per_set`), and whether it may be merged
    with other tests into one module (`mergeable`).

Invariants: a mode is a stateless singleton, registered by its `name` (the rows' `mode`
column) in `campaign.modes.MODES`; a test case holds its mode's spec in the mode's
`spec_field`, and `campaign.modes.mode_of` is the one place that tells which mode it is.
Dynamic shapes are not a mode: they are a property of the input sets (`TestCase.dynshape`,
`TestCase.graph_of`) that every mode's methods go through, so a mode composes with them by
construction where `combines_with_dynshape` allows it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from campaign.artifacts import Materialized
    from campaign.backends.base import Backend
    from campaign.oracle import Truths
    from campaign.reference import ReferenceResult
    from campaign.testcase import TestCase
    from ir.core.graph import Graph
    from ir.gen.builder import GenConfig

#: what a backend's result is judged against (`TestMode.expected`): the reference's arrays, how
#: many per input set, their tolerances and precisions, and the float64 truth's maker
Expected = tuple[list, int, list, list, Callable[[], Any]]


class TestMode(ABC):
    __test__ = False  # not a pytest class

    #: the rows' `mode` column (`campaign.schema`), and this mode's key in `MODES`
    name: ClassVar[str]
    #: the `TestCase` field that holds this mode's spec (`mode_of`: a test is in the last
    #: registered mode whose spec it holds); None: the mode of a test that holds none
    spec_field: ClassVar[str | None] = None
    #: whether a test of this mode may also have dynamic shapes (`TestCase.dynshape`)
    combines_with_dynshape: ClassVar[bool] = True
    #: whether its inputs must keep every op differentiable where they land (its search
    #: for valid inputs asks `ir.numerics.domain.differentiable`)
    differentiates: ClassVar[bool] = False
    #: whether a torch backend runs a program wrapping the test's module (torch.func's
    #: transform of it, `TransformSpec`) rather than the module itself
    wraps_module: ClassVar[bool] = False
    #: whether a backend that caches compiled programs (`Backend.takes_cache_tests`)
    #: compiles the test twice, warm after a near-twin and cold (`campaign.modes.cache`)
    warms_cache: ClassVar[bool] = False
    #: why the triage confirms a finding of this mode without reducing it (its re-run's
    #: note, `campaign.triage.pipeline.reduction.reduce_finding`); None: it is reduced
    unreduced: ClassVar[str | None] = None
    #: whether the reducer may try the test on one of its input sets alone
    per_set: ClassVar[bool] = True
    #: whether the test may be compiled into one module with others (`campaign.merge`)
    mergeable: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<mode {self.name}>"

    # ---- what a test is made of ---------------------------------------------------------------
    def generator(self, gen: GenConfig) -> GenConfig:
        """The generator's config for this mode's graphs."""
        return gen

    def make(self, tc: TestCase, seed: int, gen: GenConfig) -> TestCase:
        """`tc` (graph and input sets made) with what this mode adds drawn for it; the mode
        it ends up in is `mode_of(tc)` (a draw that finds nothing to differentiate leaves an
        inference test)."""
        return tc

    def refit(self, tc: TestCase, spec: Any, drawn_for: Graph, seed: int,
              keep_leaves: bool = False) -> str | None:
        """How the reducer keeps the mode: `spec` (this mode's, drawn for graph `drawn_for`)
        refitted to `tc`'s graph and set on `tc`; or why `tc` can no longer be a test of this
        mode (its row is then `invalid` with that signature)."""
        return None

    # ---- what its reference computes ------------------------------------------------------------
    @abstractmethod
    def n_results(self, tc: TestCase) -> int:
        """Arrays per input set in the reference's result."""

    @abstractmethod
    def labels(self, tc: TestCase) -> list[str]:
        """What each array of one input set's result is (`output i`, `grad %x`, ...)."""

    @abstractmethod
    def reference(self, m: Materialized, t0: float) -> ReferenceResult:
        """The reference's result of every set (one flat list), or why the test is invalid;
        `t0`: when the reference started (`time.perf_counter`), for its time."""

    @abstractmethod
    def shadow(self, m: Materialized, samples: int | None = None) -> Truths:
        """The reference's result in float64, laid out as `reference`'s (`samples`: rounding
        evaluations per set where the mode measures a rounding spread, None: the default)."""

    @abstractmethod
    def tolerances(self, tc: TestCase) -> tuple[list, list]:
        """Per result of one input set (`labels` order): its tolerance and its precision."""

    # ---- the row and the files ------------------------------------------------------------------
    def row_fields(self, tc: TestCase) -> dict[str, Any]:
        """The row columns a test of this mode sets (`mode`, `grad_leaves`, `transform`)."""
        return {"mode": self.name, "grad_leaves": len(tc.grad.leaves) if tc.grad else 0,
                "transform": ""}

    def row_mode(self, trains: bool) -> str:
        """A backend's row's `mode`: this mode's where the backend runs it (`trains`), else
        `infer` (it ran the test's forward)."""
        return self.name if trains else "infer"

    def files(self, tc: TestCase) -> dict[str, bytes]:
        """What a finding folder and a reproducer's folder hold besides the graph and inputs
        for a test run in this mode."""
        return {}

    # ---- what a backend needs ---------------------------------------------------------------------
    def trains_on(self, backend: Backend) -> bool:
        """Whether `backend` runs the test in this mode (else it runs its forward, and is
        judged on `forward`)."""
        return False

    def lacks(self, backend: Backend) -> frozenset[str]:
        """The ops whose tests of this mode `backend` cannot take (capability routing)."""
        return backend.lacks()

    def refusal(self, backend: Backend, tc: TestCase | None = None) -> str | None:
        """Why `backend` takes no test of this mode at all (`unsupported`), or None."""
        return None

    def dialects(self, tc: TestCase) -> tuple[str, ...] | None:
        """The torch control-flow dialects the test runs in (None: any)."""
        return None

    def expected(self, prep: Any, trains: bool) -> Expected:
        """What a backend's result on prepared test `prep` (`campaign.worker.Prepared`) is
        judged against: the whole reference when it runs the mode (`trains`), else its
        forward (`forward`)."""
        assert prep.ref.outputs is not None
        if trains:
            return (list(prep.ref.outputs), self.n_results(prep.tc), prep.tolerances,
                    prep.precisions, prep.truth)
        return self.forward(prep)

    def forward(self, prep: Any) -> Expected:
        """What a backend that does not run this mode is judged on: the forward outputs."""
        return (list(prep.ref.outputs), self.n_results(prep.tc), prep.tolerances,
                prep.precisions, prep.truth)

    def judged_labels(self, tc: TestCase, trains: bool) -> list[str]:
        """`labels` for a backend that runs the mode, the forward outputs' for one that does
        not."""
        return self.labels(tc) if trains else output_labels(tc.graph)


def output_labels(g: Graph) -> list[str]:
    return [f"output {i}" for i in range(len(g.outputs))]

