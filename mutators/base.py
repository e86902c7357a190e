"""The mutator interface: propose one rewritten graph (or decline), never mutate in place."""
from __future__ import annotations

import abc
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ir.core.graph import Graph
from ir.gen.builder import GenConfig

MUTATORS: dict[str, type[Mutator]] = {}


@dataclass
class Mutant:
    graph: Graph
    #: what was done, for lineage (JSON-serializable)
    params: dict[str, Any] = field(default_factory=dict)


class Mutator(abc.ABC):
    """A named graph rewrite. `propose` returns a candidate or None when it found nothing to do;
    the engine verifies every candidate and discards (and counts) the ill-formed ones."""

    name: str
    #: where mutators that graft code from other graphs (`splice`) find a donor: a function of
    #: the rng returning (donor id, graph) or None; the engine sets it (from the seed pool)
    donors: Callable[[random.Random], tuple[str, Graph] | None] | None = None
    #: deepest nesting of bodies a mutator may create (`Graph.max_depth`); set by the engine
    max_depth: int = 3

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "name" in cls.__dict__:
            MUTATORS[cls.name] = cls

    @classmethod
    def available(cls) -> bool:
        """Whether this checkout has what the mutator needs (the engine leaves it out if not)."""
        return True

    @abc.abstractmethod
    def propose(self, g: Graph, rng: random.Random, gen: GenConfig) -> Mutant | None: ...
