"""Random data for graph inputs and params, deterministic per seed.

Floats are uniform in [-scale, scale]; ints uniform in [-int_range, int_range]; bools fair coins.
Ranges are small so that int sums and products of a 10–20 op graph rarely overflow (the reference
rejects the ones that could, see `ir.numerics.domain`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ir.core.dtypes import DType
from ir.core.graph import Graph, Value


@dataclass(frozen=True)
class ValueRanges:
    input_scale: float = 2.0
    param_scale: float = 1.0
    int_range: int = 4


def sample_value(v: Value, rng: np.random.Generator, scale: float, int_range: int) -> np.ndarray:
    shape, dt = v.type.shape, v.type.dtype
    arr: np.ndarray
    if dt.is_float:
        arr = rng.uniform(-scale, scale, size=shape)
    elif dt.is_int:
        arr = rng.integers(-int_range, int_range + 1, size=shape)
    elif dt is DType.bool:
        arr = rng.random(size=shape) < 0.5
    else:
        raise ValueError(f"no data generator for dtype {dt}")
    return np.asarray(arr, dtype=dt.numpy)


def random_values(g: Graph, seed: int | np.random.Generator, ranges: ValueRanges = ValueRanges()
                  ) -> dict[str, np.ndarray]:
    """Data for every input and param of `g`."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    out = {v.name: sample_value(v, rng, ranges.input_scale, ranges.int_range) for v in g.inputs}
    out.update({p.name: sample_value(p, rng, ranges.param_scale, ranges.int_range) for p in g.params})
    return out


def as_tensors(values: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Torch tensors of a values dict (inputs and params by name), each a fresh C-contiguous
    copy: evaluation may write in place or attach gradients without touching `values`."""
    return {k: torch.from_numpy(np.array(v, order="C", copy=True)) for k, v in values.items()}
