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


def sample_value(v: Value, rng: np.random.Generator, scale: float, int_range: int,
                 within: tuple[int, int] | None = None) -> np.ndarray:
    """`within`: an int value's valid range (`index_ranges`), which the draw keeps to."""
    shape, dt = v.type.shape, v.type.dtype
    arr: np.ndarray
    if dt.is_float:
        arr = rng.uniform(-scale, scale, size=shape)
    elif dt.is_int:
        lo, hi = -int_range, int_range
        if within is not None and within[0] <= within[1]:
            if within[0] > hi:  # the valid range lies beyond the usual one: its nearest end
                lo, hi = within[0], min(within[1], within[0] + int_range)
            elif within[1] < lo:
                lo, hi = max(within[0], within[1] - int_range), within[1]
            else:
                lo, hi = max(lo, within[0]), min(hi, within[1])
        arr = rng.integers(lo, hi + 1, size=shape)
    elif dt is DType.bool:
        arr = rng.random(size=shape) < 0.5
    else:
        raise ValueError(f"no data generator for dtype {dt}")
    return np.asarray(arr, dtype=dt.numpy)


def index_ranges(g: Graph) -> dict[str, tuple[int, int]]:
    """The valid range of each int input or param that top-level instructions read directly as
    an operand with one (`Op.index_range`: embedding's indices), intersected over its readers."""
    out: dict[str, tuple[int, int]] = {}
    leaves = {v.name for v in (*g.inputs, *g.params) if v.type.dtype.is_int}
    types = None
    for inst in g.insts:
        for k, a in enumerate(inst.args):
            if a not in leaves:
                continue
            types = types or g.types()
            r = inst.op.index_range(k, [types[x] for x in inst.args])
            if r is not None and all(isinstance(e, int) for e in r):
                lo, hi = out.get(a, r)
                out[a] = (max(lo, r[0]), min(hi, r[1]))
    return out


def random_values(g: Graph, seed: int | np.random.Generator, ranges: ValueRanges = ValueRanges()
                  ) -> dict[str, np.ndarray]:
    """Data for every input and param of `g` (an int one read as indices within their range)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    within = index_ranges(g)
    out = {v.name: sample_value(v, rng, ranges.input_scale, ranges.int_range, within.get(v.name))
           for v in g.inputs}
    out.update({p.name: sample_value(p, rng, ranges.param_scale, ranges.int_range, within.get(p.name))
                for p in g.params})
    return out


def as_tensors(values: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Torch tensors of a values dict (inputs and params by name), each a fresh C-contiguous
    copy: evaluation may write in place or attach gradients without touching `values`."""
    return {k: torch.from_numpy(np.array(v, order="C", copy=True)) for k, v in values.items()}
