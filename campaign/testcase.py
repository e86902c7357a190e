"""`TestCase`: one graph with the concrete values it runs on, and where it came from."""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ir.dtypes import DType
from ir.graph import Graph

#: ranges for generated data; small enough that int products/sums of a 10-20 op graph rarely
#: overflow (the reference rejects the ones that do, see campaign.backends.eager)
FLOAT_RANGE = 2.0
PARAM_RANGE = 1.0
INT_RANGE = 4


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


def random_values(g: Graph, seed: int) -> dict[str, np.ndarray]:
    """Deterministic data for every input and param of `g`."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for v, scale in [(v, FLOAT_RANGE) for v in g.inputs] + [(p, PARAM_RANGE) for p in g.params]:
        shape, dt = v.type.shape, v.type.dtype
        if dt.is_float:
            arr = rng.uniform(-scale, scale, size=shape)
        elif dt.is_int:
            arr = rng.integers(-INT_RANGE, INT_RANGE + 1, size=shape)
        elif dt is DType.bool:
            arr = rng.random(size=shape) < 0.5
        else:
            raise ValueError(f"no data generator for dtype {dt}")
        out[v.name] = np.asarray(arr, dtype=dt.numpy)
    return out


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz archive (never pickle: `allow_pickle` stays off for readers)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()
