"""The maker of a test: a graph from a seed (generated, or a mutant of the seed pool), valid
inputs, the coverage input sets, dynamic shapes when drawn, and what its mode adds
(`campaign.modes`). Deterministic given the seed, the config and the seed pool's history.
Plain code: no process, no Ray.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from campaign.dynamic_shapes import add_shapes
from campaign.modes import drawn_mode
from campaign.testcase import TestCase
from ir.core.graph import Graph
from ir.gen.builder import GenConfig
from ir.gen.generate import generate
from ir.gen.symbolic_shapes import generate_dyn, wants_dynshape
from ir.numerics.domain import differentiable
from ir.numerics.flow_coverage import CoverConfig, cover
from ir.numerics.input_search import make_valid, search_inputs
from mutators.source import MutationSource


class TestMaker:
    """Makes tests (`make_test`) from the generator's config, the input-set coverage config and
    the seed pool (`mutation`, shared with the worker that feeds it back)."""

    __test__ = False  # not a pytest class

    def __init__(self, generator: GenConfig, coverage: CoverConfig,
                 mutation: MutationSource) -> None:
        self.generator = generator
        self.coverage = coverage
        self.mutation = mutation

    def make_test(self, test_id: str, seed: int, avoid: Iterable[str] = (),
                  dynshape: bool | None = None) -> TestCase:
        """Test `test_id` from `seed`: deterministic given the seed, the config, the seed
        pool's history and `avoid`, ops the graph must not hold (capability routing: made for
        a backend that lacks them; the lineage header records them). The steps: a graph,
        valid inputs (repairing the graph), the coverage input sets, and for a
        dynamic-shape test (`dynshape`; None: as `GenConfig.p_dynshape` draws for the seed)
        its other shapes (`campaign.dynamic_shapes.add_shapes`)."""
        if dynshape is None:
            dynshape = wants_dynshape(seed, self.generator)
        # the mode's own graphs (a gradient test's: float graphs, and every check below also
        # wants the ops differentiable where the inputs land; docs/training.md)
        mode = drawn_mode(seed, self.generator)
        gen = mode.generator(self.generator)
        if dynshape:
            # symbolic dims (docs/dynshape.md); not mutated: mutators rewrite the seed pool's
            # concrete graphs, and `avoid` is not applied
            g, dseed = generate_dyn(seed, gen)
            lineage: list[dict[str, Any]] = [{"seed": seed}]
        else:
            # a mutant of a seed-pool entry, or a graph generated from the seed (mutators.source)
            g, lineage = self.mutation.make(test_id, seed, gen)
            dseed = None
            avoid = frozenset(avoid)
            if avoid:
                g, lineage = self._without(g, lineage, seed, avoid)
        with differentiable(mode.differentiates):
            # inputs for which every value is valid (NNSmith-style gradient search), dropping
            # the instructions no input can make valid; if nothing valid remains, the plain
            # search's last try is kept and the reference marks the test invalid
            # a window of a model starts from the model's weights (mutation.model_weights)
            valid = make_valid(g, seed, params=self.mutation.start_values(g, lineage) or None)
            if valid is None:
                return TestCase(test_id, seed, g, search_inputs(g, seed).values, lineage)
            if valid.dropped:
                lineage.append({"repair": "drop", "insts": valid.dropped})
            g, values = valid.graph, valid.search.values
            # more input sets, so every `if` takes both branches and loops run other trip
            # counts
            covered = cover(g, values, seed, self.coverage)
            tc = TestCase(test_id, seed, g, values, lineage, covered.extra,
                          covered.coverage.summary(), ref_outputs=covered.outputs)
            if dynshape:
                tc = add_shapes(tc, dseed, self.generator)
        return mode.make(tc, seed, gen)

    def _without(self, g: Graph, lineage: list[dict[str, Any]], seed: int,
                 avoid: frozenset[str]) -> tuple[Graph, list[dict[str, Any]]]:
        """`g` if it holds none of `avoid`, else a graph generated from `seed` by the
        generator restricted to the rest (no loop/scan/if when those are avoided)."""
        if not avoid & set(g.op_counts()):
            lineage[0]["avoid"] = sorted(avoid)
            return g, lineage
        gen = drawn_mode(seed, self.generator).generator(self.generator)
        return generate(seed, gen.without(avoid)), [{"seed": seed, "seed_id": f"gen/{seed}",
                                                    "avoid": sorted(avoid)}]

