"""`SampleContext`: what an op's `sample` may use to invent attributes (randomness, fresh z3 ints)."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import z3


@dataclass
class SampleContext:
    """Deterministic given `rng`'s seed; z3 names are unique within one generator run."""

    rng: random.Random
    #: every attribute symbol handed out, so the solver can nudge them towards varied values
    symbols: list[z3.ArithRef] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=itertools.count)

    def sym(self, prefix: str) -> z3.ArithRef:
        s = z3.Int(f"{prefix}_{next(self._ids)}")
        self.symbols.append(s)
        return s
