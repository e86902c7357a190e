"""`TestCase`: one graph with the concrete values it runs on, and where it came from.

A test runs on one or more *input sets*: set 0 is `values` (every input and param); the others,
`extra_inputs`, give new values to the graph inputs only (params are the model's weights, the
same in every set). Several sets let one compiled model see an `if` take both branches and a
`loop` run different trip counts; backends compile once and run every set.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ir.core.graph import Graph
from ir.core.npz import npz_bytes
from ir.materialize.grad import GradSpec
from ir.numerics.values import random_values

if TYPE_CHECKING:
    from campaign.modes.base import TestMode
    from campaign.modes.shapes import StaticShapes

__all__ = ["TestCase", "npz_bytes", "random_values"]

@dataclass
class TestCase:
    __test__ = False  # not a pytest class

    test_id: str
    seed: int
    graph: Graph
    #: values for every graph input and param, by name
    values: dict[str, np.ndarray]
    #: the generation/mutation history: [{"seed": s}, {"mutator": name, ...params}, ...]
    lineage: list[dict[str, Any]] = field(default_factory=list)
    #: input sets 1.., each a value for every graph input (not params), by name
    extra_inputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    #: what the input sets exercise (`ir.numerics.flow_coverage.Coverage.summary()`), when measured
    coverage: dict[str, Any] | None = None
    #: dynamic shapes (`ir.materialize.dynshape.DynShape`, docs/dynshape.md): which dims are symbolic and
    #: the shape of each input set; `graph` is then the concrete graph of set 0
    dynshape: Any = None
    #: the reference outputs of every set (`ir.numerics.flow_coverage.Covered.outputs`), when the input-set
    #: search computed them already; None: `campaign.reference.run_reference` runs the sets
    #: (always None for a dynamic-shape test: `campaign.dynamic_shapes.add_shapes`)
    ref_outputs: list[np.ndarray] | None = None
    #: a gradient test's leaves and cotangents (`ir.materialize.grad.GradSpec`,
    #: docs/training.md); None: an inference test
    grad: GradSpec | None = None
    #: a transform test's transform (`ir.materialize.transforms.TransformSpec`: vmap, or a
    #: torch.func derivative): its results replace the outputs and gradients (docs/training.md)
    transform: Any = None
    #: a repeat test's `campaign.modes.repeat.RepeatSpec` (its last set repeats an earlier one)
    repeat: Any = None
    #: a cache test's `campaign.modes.cache.CacheSpec` (the near-twin compiled first)
    cache: Any = None

    def graph_of(self, k: int) -> Graph:
        """The concrete graph input set `k` runs: `graph`, unless the sets differ in shape."""
        return self.shapes.graph_of(self, k)

    @property
    def shapes(self) -> StaticShapes:
        """Its shapes, static or dynamic (`campaign.modes.shapes`)."""
        from campaign.modes.shapes import shapes_of

        return shapes_of(self)

    @property
    def mode(self) -> TestMode:
        """What kind of test this is (`campaign.modes`: infer, grad, transform); its `name`
        is the rows' `mode`."""
        from campaign.modes import mode_of

        return mode_of(self)

    def n_results(self) -> int:
        """Arrays per input set in the reference's result (`TestMode.n_results`)."""
        return self.mode.n_results(self)

    @property
    def n_sets(self) -> int:
        return 1 + len(self.extra_inputs)

    def inputs(self) -> list[np.ndarray]:
        return [self.values[v.name] for v in self.graph.inputs]

    def feed_sets(self) -> list[dict[str, np.ndarray]]:
        """Per input set: graph input name -> value, in graph input order."""
        sets = [self.values, *self.extra_inputs]
        return [{v.name: s[v.name] for v in self.graph.inputs} for s in sets]

    def value_sets(self) -> list[dict[str, np.ndarray]]:
        """Per input set: every graph input and param by name (params shared)."""
        return [self.values] + [{**self.values, **extra} for extra in self.extra_inputs]

    def params(self) -> dict[str, np.ndarray]:
        return {p.name: self.values[p.name] for p in self.graph.params}
