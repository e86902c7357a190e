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
    #: every attribute symbol handed out, so the solver can draw a value for each
    symbols: list[z3.ArithRef] = field(default_factory=list)
    #: every dimension symbol with the rank of the tensor it belongs to
    dims: list[tuple[z3.ArithRef, int]] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=itertools.count)

    def sym(self, prefix: str) -> z3.ArithRef:
        """A fresh integer attribute (stride, padding, slice bound, ...)."""
        s = z3.Int(f"{prefix}_{next(self._ids)}")
        self.symbols.append(s)
        return s

    def dim(self, rank: int) -> z3.ArithRef:
        """A fresh dimension of a rank-`rank` tensor (drawn from [1, cap for that rank])."""
        d = z3.Int(f"d_{next(self._ids)}")
        self.dims.append((d, rank))
        return d


@dataclass
class SymbolicSampleContext:
    """What an op's `sample_symbolic` may use to write attributes over the symbols of a
    dynamic-shape test (`ir.gen.symbolic_shapes`); deterministic given `rng`'s seed."""

    rng: random.Random
    #: the test's dimension symbols
    symbols: list[z3.ArithRef]
    #: the size a new concrete dim is drawn up to (at least 2)
    dim_hint: int
    #: the largest rank a result may have
    max_rank: int
