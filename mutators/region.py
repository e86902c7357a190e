"""`mark_regions`: spans of a seed or mutant become compile regions (`ir.gen.region`): one
group, a first call and a second of the generator's forms (another call on other weights, on
its own results or on inputs of other shapes, another body chosen by a flag, a region around
it). Windows of real models hold the repeated blocks regional compilation is made for.

Off unless a campaign weighs it (`mutation.weights`; cpu_extend does)."""
from __future__ import annotations

import random

from ir.core.graph import Graph
from ir.gen.builder import GenConfig
from ir.gen.region import add_regions
from ir.ops.region import region_sites
from mutators.base import Mutant, Mutator


class MarkRegions(Mutator):
    """One more group of compile-region calls."""

    name = "mark_regions"

    def propose(self, g: Graph, rng: random.Random, gen: GenConfig) -> Mutant | None:
        before = region_sites(g)
        made = add_regions(g, rng, groups=1)
        calls = region_sites(made) - before
        if not calls:
            return None
        return Mutant(made, {"calls": calls})
