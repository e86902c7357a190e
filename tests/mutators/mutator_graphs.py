"""Graphs the mutator tests run on: the shipped seeds and generated graphs with nested control
flow (so every mutator also works inside if/loop/scan bodies)."""
from __future__ import annotations

from functools import lru_cache

from ir import GenConfig, generate
from ir.core.graph import Graph
from mutators.source import ROOT, load_seeds

CONTROL = GenConfig(p_if=0.2, p_loop=0.2, p_scan=0.2, max_depth=2)


@lru_cache(maxsize=1)
def seeds() -> tuple[tuple[str, Graph], ...]:
    return tuple(load_seeds(ROOT / "seeds"))


@lru_cache(maxsize=1)
def graphs() -> tuple[Graph, ...]:
    return tuple(g for _, g in seeds()) + tuple(generate(s, CONTROL) for s in range(16))


def donor(rng):
    return rng.choice(seeds())
