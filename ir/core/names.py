"""Fresh value names: the one service that invents names for new values of a graph.

Value names are unique across every nesting level of a graph (`ir.core.verify`), so a rewrite that
adds a value (the generator, the mutators, the reducer, functionalization) needs a name none of
the graph's levels uses. `Names.of(graph)` knows them all and hands out new ones.
"""
from __future__ import annotations

import itertools
import typing
from collections.abc import Iterable

if typing.TYPE_CHECKING:
    from ir.core.graph import Graph


class Names:
    """The names taken in one graph and fresh ones beside them.

    Invariant: every name handed out is taken from then on, so no two calls give the same name
    and none clashes with a name the graph (or the caller) had taken. Two forms:
      - `fresh(prefix)`: `prefix` followed by the next number of one counter shared by every
        prefix (x0, v1, b2, v3, ...; taken ones are skipped), as the generator has always
        numbered its values: the names of a fixed-seed run depend on this order;
      - `suffixed(hint)`: `hint_k` with the smallest k >= 1 free (`x_1`, `x_2`: a value derived
        from `x`, as functionalization names them).
    """

    def __init__(self, taken: Iterable[str] = ()):
        self.taken: set[str] = set(taken)
        self._ids = itertools.count()

    @classmethod
    def of(cls, g: Graph) -> Names:
        """The service for `g`: every value name of it taken (inputs, params, results, nested
        bodies included)."""
        return cls(v.name for v in g.all_values())

    def __contains__(self, name: str) -> bool:
        return name in self.taken

    def take(self, name: str) -> None:
        """Mark `name` as used (a value the caller defined under a name of its choosing)."""
        self.taken.add(name)

    def fresh(self, prefix: str) -> str:
        """A new name: `prefix` and the next free number of the shared counter."""
        while True:
            name = f"{prefix}{next(self._ids)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def suffixed(self, hint: str) -> str:
        """A new name derived from `hint`: `hint_k`, the smallest k >= 1 not taken."""
        k = 1
        while f"{hint}_{k}" in self.taken:
            k += 1
        name = f"{hint}_{k}"
        self.taken.add(name)
        return name
