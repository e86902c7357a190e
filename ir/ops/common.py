"""Helpers shared by the op families: dtype sets, signature builders and numerical-domain measures.

Domain measures (see `Op.domain`) are float torch tensors that are >= 0 and == 0 exactly where
the inputs are safe. They are computed with differentiable torch ops so the input search can
drive them to zero by gradient descent; `torch.round`/`floor` have a zero gradient, so distances
such as `x - round(x)` keep the gradient of `x`.

Margins: a value within `margin(x)` of a discontinuity (an integer for floor, zero for sign, the
other operand for a comparison) could land on either side in two correct implementations, so it
is rejected. The margin is absolute plus relative to the magnitude, larger for float16. A value
exactly on the discontinuity is rejected too: an exact 0 may be a cancellation that another
implementation rounds to +-tiny, and a value does not tell how it was made. (A comparison of a
value with itself is the one exact case: the same tensor, not an equal one.)

Kink measures (`Op.kinks`: where the derivative jumps, for gradient tests) are built the same
way, with the same margins: two correct implementations may land on either side of a kink.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ir.core.dtypes import FLOAT_DTYPES, INT_DTYPES, DType
from ir.core.op import Op, Signature
from ir.core.types import TensorType

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

F32_64 = frozenset({DType.float32, DType.float64})
F16_32 = frozenset({DType.float16, DType.float32})
F32 = frozenset({DType.float32})
NO_BOOL = frozenset(DType) - {DType.bool}
FLOATS = FLOAT_DTYPES
INTS = INT_DTYPES
F32_64_INTS = F32_64 | INT_DTYPES
NUMERIC = FLOAT_DTYPES | INT_DTYPES
BOOL = frozenset({DType.bool})
ALL = frozenset(DType)


class FunctionalEmitter(Protocol):
    """What an in-place or view op emits its functional form through (`functional`,
    `scatter`): `ir.analysis.inplace.Emitter`, a layer above."""

    def type(self, name: str) -> TensorType:
        """The type of a value."""

    def emit(self, op: Op, args: Sequence[str], hint: str) -> str:
        """A one-result pure op over `args`; returns its result's name."""

#: (absolute, relative) distance to a discontinuity under which a float input is unsafe
MARGINS: dict[str, tuple[float, float]] = {
    "float16": (5e-2, 1e-2),
    "float32": (1e-2, 1e-3),
    "float64": (1e-2, 1e-3),
}


def ordered(dtypes: Iterable[DType]) -> list[DType]:
    return sorted(dtypes, key=lambda d: d.value)


def same_dtype(dtypes: Iterable[DType], n_inputs: int = 1, result: DType | None = None) -> list[Signature]:
    """(d, ..., d) -> (d,) (or -> (result,)) for each d."""
    return [((d,) * n_inputs, (result or d,)) for d in ordered(dtypes)]


def const_like(b: OnnxBuilder, value: float, like: str) -> str:
    """An ONNX value holding scalar `value` in the element type of ONNX value `like` (a float64
    constant through CastLike, so one graph serves every dtype)."""
    import numpy as np

    out = b.fresh("cl")
    b.node("CastLike", [b.const(np.asarray(value, dtype=np.float64)), like], [out])
    return out


@dataclass(frozen=True)
class AxisOp(Op):
    """An op along one axis (0 <= axis < rank) of its rank >= 1 first input."""

    axis: int

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(axis=ctx.rng.randrange(first.rank))

    def axis_ok(self, x: TensorType) -> bool:
        return 0 <= self.axis < x.rank

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [self.axis_ok(ins[0])]


# ---- domain measures ------------------------------------------------------------------------


def as_float(x: Tensor) -> Tensor:
    """`x` as a float tensor fit for measuring (float16 and ints widened to float32)."""
    import torch

    return x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)


def is_float(x: Tensor) -> bool:
    return x.dtype.is_floating_point


def margin(dtype: torch.dtype, magnitude: float | Tensor) -> float | Tensor:
    """The unsafe distance around a discontinuity for values of `dtype` of size `magnitude`."""
    absolute, relative = MARGINS.get(str(dtype).removeprefix("torch."), MARGINS["float32"])
    return absolute + relative * magnitude


def at_least(x: Tensor, lo: float | Tensor) -> Tensor:
    """Violation of x >= lo."""
    import torch

    return torch.relu(lo - as_float(x))


def at_most(x: Tensor, hi: float) -> Tensor:
    """Violation of x <= hi."""
    import torch

    return torch.relu(as_float(x) - hi)


def no_wraparound(log2_bound: Tensor, dtype: torch.dtype) -> Tensor:
    """Violation of: every partial result of an integer op that multiplies or sums products
    (reduce_prod, matmul, linear) stays exact, given `log2_bound` (float64), the log2 of a bound
    on the magnitude of every partial result in any evaluation order. `ir.numerics.domain` checks only
    the final result (|x| < 2**(bits/2 - 1)), which bounds a product of two values and a sum,
    but not these: a wrapped-around result can land back in range (the product of 63 values in
    {3, 4} is 0 mod 2**64 in torch, where ORT's int64 ReduceProd, computed in float64,
    saturates to 2**63 - 1).
    The limit 2**(bits - 2) leaves room for the rounding of the float64 bound."""
    import torch

    return torch.relu(log2_bound - float(torch.iinfo(dtype).bits - 2))


def apart(d: Tensor, magnitude: float | Tensor, dtype: torch.dtype) -> Tensor:
    """Violation of |d| >= margin: `d` is the distance of values of `dtype` and size
    `magnitude` to a discontinuity."""
    import torch

    size = as_float(magnitude).abs() if isinstance(magnitude, torch.Tensor) else abs(magnitude)
    return torch.relu(margin(dtype, size) - as_float(d).abs())


def away_from_integers(x: Tensor, offset: float = 0.0) -> Tensor:
    """Violation of: x - offset is not within the margin of an integer (floor, ceil; round with
    offset 0.5)."""
    import torch

    xf = as_float(x) - offset
    return apart(xf - torch.round(xf).detach(), xf + offset, x.dtype)


def float_only(fn: Callable[..., list[Tensor]]) -> Callable[..., list[Tensor]]:
    """Decorator for `domain` and `kinks`: integer and bool inputs are exact (and carry no
    gradient), so they have neither."""

    def domain(self: Op, *xs: Tensor) -> list[Tensor]:
        if not any(is_float(x) for x in xs):
            return []
        return fn(self, *xs)

    domain.__doc__ = fn.__doc__
    domain.__name__ = fn.__name__
    return domain


def tie_apart(hi: Tensor, lo: Tensor, dtype: torch.dtype) -> Tensor:
    """Violation of: two competing values (a max's candidates) differ by the margin, except
    an exact tie at 0: a structural zero (relu's, padding's, a mask's) that carries no
    gradient, so either element may take it (relu then max-pooling ties its negative windows
    exactly, which no input search can move)."""
    import torch

    gap = apart(hi - lo, torch.maximum(hi.abs(), lo.abs()), dtype)
    return torch.where((hi == 0) & (lo == 0), torch.zeros_like(gap), gap)


def distinct_sorted(x: Tensor, dim: int, count: int | None = None, largest: bool = True,
                    zero_ties: bool = False) -> Tensor | None:
    """Violation of: the `count` largest (or smallest) values along `dim` and the next one differ
    pairwise by the margin (all values when `count` is None). Ties in argmax/topk are broken
    differently by different implementations, and near-ties flip with rounding. `zero_ties`:
    exact ties at 0 are allowed (`tie_apart`: a max's gradient, not an index)."""
    import torch

    n = x.shape[dim]
    if n < 2:
        return None
    xf = as_float(x)
    s = torch.sort(xf, dim=dim, descending=largest).values
    upto = n - 1 if count is None else min(count, n - 1)
    hi = s.narrow(dim, 0, upto)
    lo = s.narrow(dim, 1, upto)
    if zero_ties:
        return tie_apart(hi, lo, x.dtype)
    return apart(hi - lo, torch.maximum(hi.abs(), lo.abs()), x.dtype)


def nonempty(measures: Sequence[Tensor | None]) -> list[Tensor]:
    return [m for m in measures if m is not None]
