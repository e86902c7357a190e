"""`MutationEngine`: applies a chain of weighted mutators to a seed, verifying every step."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ir.generate import GenConfig
from ir.graph import Graph
from ir.verify import VerifyError, verify
from mutators.base import MUTATORS, Mutator


@dataclass
class MutationConfig:
    """`rate`: share of tests that are mutated; `max_steps`: chain length is 1..max_steps;
    `weights`: mutator name -> relative weight; `retries`: attempts per step."""

    rate: float = 0.5
    max_steps: int = 3
    retries: int = 4
    weights: dict[str, float] = field(default_factory=lambda: {"insert_op": 1.0})


@dataclass
class MutationOutcome:
    graph: Graph
    steps: list[dict[str, Any]]
    #: candidates that failed `verify` or were declined
    discarded: int = 0


class MutationEngine:
    def __init__(self, cfg: MutationConfig, gen: GenConfig):
        unknown = sorted(set(cfg.weights) - set(MUTATORS))
        if unknown:
            raise ValueError(f"mutation.weights: unknown mutator {unknown[0]!r} (known: {', '.join(sorted(MUTATORS))})")
        self.cfg = cfg
        self.gen = gen
        self.mutators: list[Mutator] = [MUTATORS[n]() for n, w in cfg.weights.items() if w > 0]
        self.weights = [cfg.weights[m.name] for m in self.mutators]

    def mutate(self, g: Graph, rng: random.Random) -> MutationOutcome:
        out = MutationOutcome(g, [])
        if not self.mutators:
            return out
        for _ in range(rng.randint(1, self.cfg.max_steps)):
            for _ in range(self.cfg.retries):
                mutator = rng.choices(self.mutators, self.weights)[0]
                mutant = mutator.propose(out.graph, rng, self.gen)
                if mutant is None:
                    out.discarded += 1
                    continue
                try:
                    verify(mutant.graph)
                except VerifyError:
                    out.discarded += 1
                    continue
                out.graph = mutant.graph
                out.steps.append({"mutator": mutator.name, **mutant.params})
                break
        return out
