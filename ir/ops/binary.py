"""Binary elementwise ops with numpy broadcasting, comparisons, logical ops and `where`.

Semantics kept equal on both sides:
  - `div` is float only: torch's int division is true division (a float result) while ONNX Div
    truncates integers.
  - `pow` is float only with base >= margin and |exponent * log(base)| <= 10, so the result is
    defined, finite and not steep.
  - comparisons on floats need |x - y| above a margin (rounding noise flips a near-tie); so do
    `max` and `min` in gradient tests (`kinks`: at a tie the gradient may go to either operand).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, SourceNode
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import Or, eq, if_then_else, same
from ir.core.types import TensorType
from ir.ops.common import (
    ALL,
    BOOL,
    FLOATS,
    INTS,
    NO_BOOL,
    NUMERIC,
    apart,
    as_float,
    at_least,
    at_most,
    is_float,
    margin,
    ordered,
    same_dtype,
    tie_apart,
)

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


def broadcast_shape(a: TensorType, b: TensorType) -> tuple:
    ra, rb = a.rank, b.rank
    out = []
    for i in range(max(ra, rb)):
        da = a.shape[ra - 1 - i] if i < ra else 1
        db = b.shape[rb - 1 - i] if i < rb else 1
        if same(da, db) or same(db, 1):
            out.append(da)
        elif same(da, 1):
            out.append(db)
        else:
            out.append(if_then_else(eq(da, 1), db, da))
    return tuple(reversed(out))


def broadcast_requires(a: TensorType, b: TensorType) -> list:
    # zip strict=False: broadcast: trailing dims paired, ranks may differ
    return [Or(eq(da, db), eq(da, 1), eq(db, 1)) for da, db in zip(reversed(a.shape), reversed(b.shape), strict=False)]


def broadcast_operand(first: TensorType, dtype: DType, ctx: SampleContext) -> TensorType:
    """A suffix of `first`'s dims with some set to 1: broadcasts against it by construction."""
    rank = ctx.rng.randint(0, first.rank)
    dims = tuple(1 if ctx.rng.random() < 0.25 else d for d in first.shape[first.rank - rank:])
    return TensorType(dims, dtype)


@dataclass(frozen=True)
class Broadcasting(Op):
    """An elementwise op over all its inputs, broadcast together (numpy rules)."""

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot(tuple(range(first.rank + 1)), param=None) for _ in range(n_inputs - 1)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return broadcast_operand(first, dtype, ctx)

    @staticmethod
    def _shape(ins: Sequence[TensorType]) -> TensorType:
        out = ins[0]
        for t in ins[1:]:
            out = TensorType(broadcast_shape(out, t), out.dtype)
        return out

    def requires(self, ins: Sequence[TensorType]) -> list:
        cons, acc = [], ins[0]
        for t in ins[1:]:
            cons += broadcast_requires(acc, t)
            acc = TensorType(broadcast_shape(acc, t), acc.dtype)
        return cons


@dataclass(frozen=True)
class Binary(Broadcasting):
    """z = f(x, y); both inputs share one dtype, the result has it too (or `result`)."""

    family: ClassVar[str] = "binary"
    arity: ClassVar[int] = 2
    dtypes: ClassVar[frozenset[DType]] = NUMERIC
    result: ClassVar[DType | None] = None
    torch_name: ClassVar[str]
    onnx_name: ClassVar[str]
    #: float (x, y) -> violation of the safe domain; `kink`: of differentiability (`Op.kinks`)
    safe: ClassVar[Callable | None] = None
    kink: ClassVar[Callable | None] = None

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, 2, cls.result)

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(self._shape(ins).shape, self.result or ins[0].dtype)]

    def domain(self, x: Tensor, y: Tensor) -> list[Tensor]:
        safe = type(self).safe
        if safe is None or not (is_float(x) or is_float(y)):
            return []
        return [safe(x, y)]

    def kinks(self, x: Tensor, y: Tensor) -> list[Tensor]:
        kink = type(self).kink
        if kink is None or not (is_float(x) or is_float(y)):
            return []
        return [kink(x, y)]

    def torch(self, x: Tensor, y: Tensor) -> Tensor:
        import torch

        return getattr(torch, self.torch_name)(x, y)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node(self.onnx_name, ins, outs)


def _binary(name: str, torch_name: str, onnx_name: str, dtypes: frozenset[DType] = NUMERIC,
            result: DType | None = None, safe: Callable | None = None, doc: str = "",
            family: str = "binary", number: bool = True, kink: Callable | None = None,
            saves: bool = True, exact: bool = False, factor: float = 1.0, fragile: bool = False,
            combines: bool = False, sign: int | None = None) -> type[Binary]:
    """A `Binary` subclass; `saves`: its `saves_for_backward`, `factor`: its `tolerance_factor`,
    `fragile`: `fragile_when_iterated`, `combines`: `combines_with_copy`, `sign`:
    `comparison_sign`."""
    cls = type(
        "".join(p.capitalize() for p in name.split("_")),
        (Binary,),
        {"name": name, "torch_name": torch_name, "onnx_name": onnx_name, "dtypes": dtypes,
         "result": result, "safe": staticmethod(safe) if safe else None,
         "kink": staticmethod(kink) if kink else None, "saves_for_backward": saves,
         "exact": exact, "tolerance_factor": factor, "fragile_when_iterated": fragile,
         "combines_with_copy": combines, "comparison_sign": sign, "family": family,
         "number_operand": 1 if number else None,
         "aten_imports": tuple(f"aten.{torch_name}.{o}" for o in (
             ("Tensor", "Scalar") if torch_name not in ("maximum", "minimum") and
             not torch_name.startswith("logical") else ("default",))),
         "onnx_imports": (onnx_name,),
         "__module__": __name__,
         "__doc__": doc or f"Broadcasting {name}."},
    )
    return dataclass(frozen=True)(cls)


def _divisor(x: Tensor, y: Tensor) -> Tensor:
    """Violation of |y| >= margin."""
    return apart(y, 0.0, y.dtype)


def _pow_safe(x: Tensor, y: Tensor) -> Tensor:
    """Violation of: x >= margin and |y * log x| <= 10 (x ** y within [e^-10, e^10])."""
    import torch

    low = at_least(x, margin(x.dtype, 0.0))
    logx = torch.log(torch.clamp(as_float(x), min=margin(x.dtype, 0.0)))
    steep = at_most((as_float(y) * logx).abs(), 10.0)
    return low + steep


def _apart(x: Tensor, y: Tensor) -> Tensor:
    """Violation of |x - y| >= margin(max(|x|, |y|)); none when x and y are the same value
    (the comparison of a value with itself is exact; max(x, x)'s gradient is x's whichever
    operand gets it)."""
    import torch

    if x is y:
        return torch.zeros(x.shape, dtype=as_float(x).dtype)
    xf, yf = as_float(x), as_float(y)
    return apart(xf - yf, torch.maximum(xf.abs(), yf.abs()), x.dtype)


def _tie_apart(x: Tensor, y: Tensor) -> Tensor:
    """max/min's kink: `_apart`, except an exact tie at 0, which carries no gradient
    (`ir.ops.common.tie_apart`)."""
    import torch

    if x is y:
        return torch.zeros(x.shape, dtype=as_float(x).dtype)
    xf, yf = torch.broadcast_tensors(as_float(x), as_float(y))
    return tie_apart(xf, yf, x.dtype)


Add = _binary("add", "add", "Add", saves=False, combines=True)
Sub = _binary("sub", "sub", "Sub", saves=False)
Mul = _binary("mul", "mul", "Mul", combines=True)
Div = _binary("div", "div", "Div", FLOATS, safe=_divisor, fragile=True,
              doc="Float division; |y| >= margin (int division differs: true vs truncating).")
# libm's pow vs. vectorized approximations: the transcendental family's tolerance
Pow = _binary("pow", "pow", "Pow", FLOATS, safe=_pow_safe, fragile=True,
              doc="x ** y on floats with x > 0 and a bounded result.", family="transcendental",
              factor=2.0)
Pow.aten_imports = ("aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar")
# torch.maximum / minimum take tensors only; at a tie torch splits the gradient evenly
Maximum = _binary("max", "maximum", "Max", number=False, kink=_tie_apart, exact=True,
                  combines=True)
Minimum = _binary("min", "minimum", "Min", number=False, kink=_tie_apart, exact=True,
                  combines=True)
# int and bool only (no gradient), and comparisons (not differentiable): nothing saved
BitwiseAnd = _binary("bitwise_and", "bitwise_and", "BitwiseAnd", INTS, saves=False, combines=True)
BitwiseOr = _binary("bitwise_or", "bitwise_or", "BitwiseOr", INTS, saves=False, combines=True)
BitwiseXor = _binary("bitwise_xor", "bitwise_xor", "BitwiseXor", INTS, saves=False)

# comparisons -> bool; float operands must differ by the margin, which iterating rarely keeps
Equal = _binary("eq", "eq", "Equal", ALL, DType.bool, _apart, "x == y (bool).", saves=False,
                fragile=True)
Less = _binary("lt", "lt", "Less", NUMERIC, DType.bool, _apart, "x < y (bool).", saves=False,
               fragile=True, sign=-1)
Greater = _binary("gt", "gt", "Greater", NUMERIC, DType.bool, _apart, "x > y (bool).", saves=False,
                  fragile=True, sign=1)
LessEqual = _binary("le", "le", "LessOrEqual", NUMERIC, DType.bool, _apart, "x <= y (bool).",
                    saves=False, fragile=True, sign=-1)
GreaterEqual = _binary("ge", "ge", "GreaterOrEqual", NUMERIC, DType.bool, _apart, "x >= y (bool).",
                       saves=False, fragile=True, sign=1)

# torch.logical_* take tensors only
LogicalAnd = _binary("logical_and", "logical_and", "And", BOOL, number=False, saves=False,
                     combines=True)
LogicalOr = _binary("logical_or", "logical_or", "Or", BOOL, number=False, saves=False,
                    combines=True)
LogicalXor = _binary("logical_xor", "logical_xor", "Xor", BOOL, number=False, saves=False)


@dataclass(frozen=True)
class Where(Broadcasting):
    """where(cond, x, y): x where cond else y; all three broadcast together. Exact selection
    (a float-derived condition gets its margin from the comparison that made it)."""

    name: ClassVar[str] = "where"
    family: ClassVar[str] = "binary"
    arity: ClassVar[int] = 3
    exact: ClassVar[bool] = True  # a selection

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((DType.bool, d, d), (d,)) for d in ordered(NO_BOOL)]  # ORT: no bool Where

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(self._shape(ins).shape, ins[1].dtype)]

    aten_imports: ClassVar[tuple[str, ...]] = ("aten.where.self",)
    onnx_imports: ClassVar[tuple[str, ...]] = ("Where",)

    @classmethod
    def from_aten(cls, node: SourceNode) -> Imported | None:
        if node.n_given != 3 or node.attrs_given:
            return None
        return Imported.one(cls(), node.tensor(0), node.tensor(1, like=2), node.tensor(2, like=1))

    def torch(self, c: Tensor, x: Tensor, y: Tensor) -> Tensor:
        import torch

        return torch.where(c, x, y)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Where", ins, outs)
