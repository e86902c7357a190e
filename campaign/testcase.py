"""`TestCase`: one graph with the concrete values it runs on, and where it came from."""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ir.graph import Graph
from ir.values import random_values

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

    def inputs(self) -> list[np.ndarray]:
        return [self.values[v.name] for v in self.graph.inputs]

    def params(self) -> dict[str, np.ndarray]:
        return {p.name: self.values[p.name] for p in self.graph.params}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz archive (never pickle: `allow_pickle` stays off for readers)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()
