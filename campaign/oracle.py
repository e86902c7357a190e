"""Comparison of a backend's outputs with the reference, with dtype-aware tolerances.

|actual - expected| <= atol + rtol * |expected| elementwise. The tolerance of an output is that of
the least precise float dtype in its dependency cone (`ir.precision`), so a float64 output computed
through float32 gets float32 tolerances; outputs with no float in their cone must be exact. Shapes and dtypes must match exactly. NaN positions must agree (the reference has
none: it is rejected when non-finite).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ir.dtypes import DType

#: (rtol, atol) per numpy dtype name; missing dtypes compare exactly
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "float32": (1e-3, 1e-4),
    "float64": (1e-7, 1e-9),
}


@dataclass
class Comparison:
    ok: bool
    output: int | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str = ""


def compare(
    expected: Sequence[np.ndarray],
    actual: Sequence[np.ndarray],
    precisions: Sequence[DType | None] | None = None,
) -> Comparison:
    """First failing output wins; errors are reported for that output. `precisions[i]` is the
    float dtype whose tolerance applies to output i (default: the output's own dtype)."""
    if len(expected) != len(actual):
        return Comparison(False, None, message=f"{len(actual)} outputs, expected {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual)):
        a = np.asarray(a)
        if a.shape != e.shape:
            return Comparison(False, i, message=f"output {i}: shape {a.shape}, expected {e.shape}")
        if a.dtype != e.dtype:
            return Comparison(False, i, message=f"output {i}: dtype {a.dtype}, expected {e.dtype}")
        if e.size == 0:
            continue
        prec = precisions[i].numpy.name if precisions and precisions[i] else e.dtype.name
        rtol, atol = TOLERANCES.get(prec, (0.0, 0.0))
        ef, af = e.astype(np.float64), a.astype(np.float64)
        diff = np.abs(af - ef)
        nan_mismatch = np.isnan(af) != np.isnan(ef)
        bad = nan_mismatch | ~(diff <= atol + rtol * np.abs(ef))
        bad &= ~(np.isnan(af) & np.isnan(ef))
        max_abs = float(np.nanmax(diff)) if not np.all(np.isnan(diff)) else float("nan")
        rel = diff / np.maximum(np.abs(ef), np.finfo(np.float64).tiny)
        max_rel = float(np.nanmax(rel)) if not np.all(np.isnan(rel)) else float("nan")
        if bad.any():
            n = int(bad.sum())
            return Comparison(False, i, max_abs, max_rel,
                              f"output {i}: {n}/{e.size} elements differ (max abs {max_abs:.3g}, "
                              f"max rel {max_rel:.3g}, rtol {rtol}, atol {atol})")
    return Comparison(True)
