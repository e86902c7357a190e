"""Elementwise unary ops: y = f(x), same shape and dtype.

Most map one-to-one onto a torch function and an ONNX op; the rest say how they differ:
  - `gelu` (exact, erf form): ONNX Gelu exists only from opset 20, so it is built from Erf.
  - `softplus`: torch returns x above its threshold (20); ONNX computes log(exp(x) + 1), which
    overflows in float32 for x > 88: the domain keeps x <= 20, where both agree.
  - `round`: torch.round and ONNX Round both round half to even; the domain keeps inputs away
    from the halves anyway, where rounding noise would flip the result.
  - `floor`, `ceil`, `sign`: discontinuous, so inputs stay a margin away from the jumps, even
    from an exact 0: a value exactly 0 in the reference may be a cancellation of rounded terms
    (cumsum of [h, -h]) that another correct implementation computes as +-tiny, and the value
    cannot tell a structural 0 (relu, padding) from such a one. `sqrt` likewise keeps x >= margin.
  - `clip`: the bounds are attributes, passed to ONNX Clip as constants of x's dtype (CastLike).
Kinks (`kinks`, gradient tests): relu, abs, leaky_relu, selu and elu (alpha != 1) bend at 0,
hardsigmoid and hardswish at -3 and 3, clip at its bounds; inputs keep the margin from them.
Constants in ONNX compositions are float64 tensors cast to x's type with CastLike, so one graph
serves every float dtype.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, Prev, SourceNode, float_attr
from ir.core.op import Op, Signature
from ir.core.types import TensorType
from ir.ops.common import (
    BOOL,
    F16_32,
    FLOATS,
    INTS,
    NUMERIC,
    apart,
    as_float,
    at_least,
    at_most,
    away_from_integers,
    const_like,
    is_float,
    margin,
    same_dtype,
)

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class Unary(Op):
    """y = f(x). Subclasses name f for torch (`torch.<name>` or `F.<name>`, called with the
    attributes positionally after x) and ONNX (called with the attributes as ONNX attributes),
    and may give `safe`: float x -> violation of the op's safe domain, and `kink`: float x ->
    violation of its differentiability (`Op.kinks`)."""

    family: ClassVar[str] = "unary"
    dtypes: ClassVar[frozenset[DType]] = FLOATS
    torch_name: ClassVar[str]
    onnx_name: ClassVar[str]
    safe: ClassVar[Callable | None] = None
    kink: ClassVar[Callable | None] = None
    #: attribute name -> the values `sample` draws from
    choices: ClassVar[dict[str, tuple]] = {}

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(**{k: ctx.rng.choice(v) for k, v in cls.choices.items()})

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]

    def domain(self, x: Tensor) -> list[Tensor]:
        safe = type(self).safe
        if safe is None or not is_float(x):
            return []
        return [safe(x)]

    def kinks(self, x: Tensor) -> list[Tensor]:
        kink = type(self).kink
        if kink is None or not is_float(x):
            return []
        return [kink(x)]

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        torch_name = getattr(cls, "torch_name", None)
        if "name" in cls.__dict__ and "aten_imports" not in cls.__dict__ and torch_name:
            cls.aten_imports = (f"aten.{torch_name.removeprefix('F.')}.default",)
            onnx_name = getattr(cls, "onnx_name", None)
            cls.onnx_imports = (onnx_name,) if onnx_name else ()

    @classmethod
    def from_aten(cls, node: SourceNode) -> Imported | None:
        """x, then the attributes in order (numbers), each given or at its default."""
        fields = [f.name for f in dataclasses.fields(cls)]
        if node.attrs_given or not 1 <= node.n_given <= 1 + len(fields):
            return None
        values = {f: node.arg(1 + i) for i, f in enumerate(fields)}
        if any(v is None for v in values.values()):
            return None
        return Imported.one(cls(**values), node.tensor(0))

    @classmethod
    def from_onnx(cls, node: SourceNode) -> Imported | None:
        """x, the attributes as ONNX attributes of the same names."""
        fields = [f.name for f in dataclasses.fields(cls)]
        if node.n_given != 1 or set(node.attrs_given) - set(fields):
            return None
        values = {f: node.attr(f) for f in fields}
        if any(v is None for v in values.values()):
            return None
        return Imported.one(cls(**{k: float_attr(v) for k, v in values.items()}), node.tensor(0))

    def torch(self, x: Tensor) -> Tensor:
        import torch
        import torch.nn.functional as F

        module, _, name = self.torch_name.rpartition(".")
        fn = getattr(F if module == "F" else torch, name)
        return fn(x, *self.attrs().values())

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node(self.onnx_name, ins, outs, **self.attrs())


def _unary(name: str, torch_name: str, onnx_name: str, dtypes: frozenset[DType] = FLOATS,
           safe: Callable | None = None, doc: str = "", family: str = "unary",
           kink: Callable | None = None, saves: bool = True, exact: bool = False,
           fragile: bool = False) -> type[Unary]:
    """A `Unary` subclass; `saves`: its `saves_for_backward`, `fragile`: its
    `fragile_when_iterated`; the transcendental family's `tolerance_factor` is `LIBM_FACTOR`."""
    cls = type(
        "".join(p.capitalize() for p in name.split("_")),
        (Unary,),
        {"name": name, "torch_name": torch_name, "onnx_name": onnx_name, "dtypes": dtypes,
         "safe": staticmethod(safe) if safe else None, "kink": staticmethod(kink) if kink else None,
         "saves_for_backward": saves, "exact": exact, "fragile_when_iterated": fragile,
         "tolerance_factor": LIBM_FACTOR if family == T else 1.0, "family": family,
         "aten_imports": (f"aten.{torch_name.removeprefix('F.')}.default",),
         "onnx_imports": (onnx_name,),
         "__module__": __name__,
         "__doc__": doc or f"Elementwise {name}."},
    )
    return dataclass(frozen=True)(cls)


#: libm-style functions: correct implementations differ by their approximations, which the
#: oracle's tolerance allows for (their `tolerance_factor`, `LIBM_FACTOR`)
T = "transcendental"
LIBM_FACTOR = 2.0


def _positive(x: Tensor) -> Tensor:
    """Violation of x >= margin (log: undefined at and below 0, steep near it)."""
    return at_least(x, margin(x.dtype, 0.0))


def _nonzero(x: Tensor) -> Tensor:
    """Violation of |x| >= margin (sign's jump; the kink of relu, abs, ...)."""
    return apart(x, 0.0, x.dtype)


def _off_hinges(x: Tensor) -> Tensor:
    """Violation of |x + 3| >= margin and |x - 3| >= margin: relu6(x + 3), the hinge of
    hardsigmoid and hardswish, bends at x = -3 and x = 3."""
    xf = as_float(x)
    return apart(xf + 3.0, 3.0, x.dtype) + apart(xf - 3.0, 3.0, x.dtype)


def _small_argument(x: Tensor) -> Tensor:
    """Periodic functions: |x| <= 64. The result's error is the argument's absolute rounding
    error, which grows with |x| (an exp() upstream easily makes it thousands: float32 spacing
    there is ~1e-3, far beyond any tolerance of the result)."""
    return at_most(as_float(x).abs(), 64.0)


def _off_poles(x: Tensor) -> Tensor:
    """Violation of |cos x| >= 0.3 (|tan| <= 3.2 and its slope <= 11, away from the poles),
    and of a small argument (see `_small_argument`)."""
    import torch

    return at_least(torch.cos(as_float(x)).abs(), 0.3) + _small_argument(x)


# ---- plain maps ---------------------------------------------------------------------------------
Abs = _unary("abs", "abs", "Abs", NUMERIC, kink=_nonzero, exact=True)
Neg = _unary("neg", "neg", "Neg", NUMERIC, saves=False, exact=True)
Relu = _unary("relu", "relu", "Relu", NUMERIC, kink=_nonzero, exact=True)
Sigmoid = _unary("sigmoid", "sigmoid", "Sigmoid", family=T)
Tanh = _unary("tanh", "tanh", "Tanh", family=T)
Sin = _unary("sin", "sin", "Sin", FLOATS, safe=_small_argument, family=T, fragile=True,
             doc="Elementwise sin; |x| <= 64 (see _small_argument).")
Cos = _unary("cos", "cos", "Cos", FLOATS, safe=_small_argument, family=T, fragile=True,
             doc="Elementwise cos; |x| <= 64 (see _small_argument).")
Tan = _unary("tan", "tan", "Tan", F16_32, safe=_off_poles,
             doc="Elementwise tan; |cos x| >= 0.3 keeps it away from its poles.", family=T,
             fragile=True)
Atan = _unary("atan", "atan", "Atan", F16_32, family=T)
Asin = _unary("asin", "asin", "Asin", F16_32, safe=lambda x: at_most(x.abs(), 0.99),
              doc="Elementwise asin; |x| <= 0.99 (undefined beyond 1, steep near it).", family=T,
              fragile=True)
Acos = _unary("acos", "acos", "Acos", F16_32, safe=lambda x: at_most(x.abs(), 0.99),
              doc="Elementwise acos; |x| <= 0.99 (undefined beyond 1, steep near it).", family=T,
              fragile=True)
Sinh = _unary("sinh", "sinh", "Sinh", F16_32, safe=lambda x: at_most(x.abs(), 10.0), family=T,
              fragile=True)
Cosh = _unary("cosh", "cosh", "Cosh", F16_32, safe=lambda x: at_most(x.abs(), 10.0), family=T,
              fragile=True)
Exp = _unary("exp", "exp", "Exp", safe=lambda x: at_most(x, 10.0), fragile=True,
             doc="Elementwise exp; x <= 10 keeps it finite in float16 and the graph tame.", family=T)
Log = _unary("log", "log", "Log", safe=_positive, family=T, fragile=True,
             doc="Elementwise natural log; x >= margin > 0.")
Sqrt = _unary("sqrt", "sqrt", "Sqrt", safe=_positive, family=T, fragile=True,
              doc="Elementwise sqrt; x >= margin > 0.")
Reciprocal = _unary("reciprocal", "reciprocal", "Reciprocal", safe=_nonzero, fragile=True,
                    doc="Elementwise 1/x; |x| >= margin.")
Erf = _unary("erf", "erf", "Erf", F16_32, family=T)
# floor, ceil, round, sign: a zero derivative (away from their jumps, which `safe` avoids);
# exact (integers, or the sign); their jumps rarely stay avoided when iterated
Floor = _unary("floor", "floor", "Floor", FLOATS, safe=away_from_integers, saves=False,
               exact=True, fragile=True, doc="Elementwise floor; float inputs stay a margin away from integers, 0 too.")
Ceil = _unary("ceil", "ceil", "Ceil", FLOATS, safe=away_from_integers, saves=False,
              exact=True, fragile=True, doc="Elementwise ceil; float inputs stay a margin away from integers, 0 too.")
Round = _unary("round", "round", "Round", FLOATS, safe=lambda x: away_from_integers(x, 0.5),
               saves=False, exact=True, fragile=True,
               doc="Round half to even (torch and ONNX agree); inputs stay away from halves.")
Sign = _unary("sign", "sign", "Sign", NUMERIC, safe=_nonzero, saves=False,
              exact=True, fragile=True,
              doc="Elementwise sign; float inputs stay a margin away from 0, even an exact 0.")
Softplus = _unary("softplus", "F.softplus", "Softplus", FLOATS, safe=lambda x: at_most(x, 20.0),
                  doc="log(1 + exp(x)); x <= 20 (torch switches to x above 20, ONNX overflows "
                      "above 88 in float32).", family=T, fragile=True)
Softsign = _unary("softsign", "F.softsign", "Softsign", FLOATS)
Selu = _unary("selu", "F.selu", "Selu", F16_32, family=T, kink=_nonzero,
              doc="SELU with the standard constants (ONNX defaults; float32 attributes, so no f64); "
                  "its slope jumps at 0 (1.05 to 1.76).")
Hardswish = _unary("hardswish", "F.hardswish", "HardSwish", F16_32, kink=_off_hinges,
                  doc="Elementwise hardswish; no f64: ORT evaluates its 1/6 in float32 (6e-7 relative).")
# bool and int only: no gradient, so nothing saved
LogicalNot = _unary("logical_not", "logical_not", "Not", BOOL, saves=False)
BitwiseNot = _unary("bitwise_not", "bitwise_not", "BitwiseNot", INTS, doc="~x on integers.", saves=False)


@dataclass(frozen=True)
class Hardsigmoid(Unary):
    """relu6(x + 3) / 6; ONNX HardSigmoid with alpha = 1/6, beta = 1/2."""

    name: ClassVar[str] = "hardsigmoid"
    torch_name: ClassVar[str] = "F.hardsigmoid"
    dtypes: ClassVar[frozenset[DType]] = F16_32  # ONNX float attributes are float32: no f64
    kink: ClassVar[Callable | None] = staticmethod(_off_hinges)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("HardSigmoid", ins, outs, alpha=1.0 / 6.0, beta=0.5)


@dataclass(frozen=True)
class Gelu(Unary):
    """Exact GELU, 0.5 * x * (1 + erf(x / sqrt(2))) (torch approximate="none"). ONNX Gelu is
    opset 20, so the ONNX side is built from Erf."""

    name: ClassVar[str] = "gelu"
    family: ClassVar[str] = T
    tolerance_factor: ClassVar[float] = LIBM_FACTOR
    torch_name: ClassVar[str] = "F.gelu"
    dtypes: ClassVar[frozenset[DType]] = F16_32

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        (x,) = ins
        t, e, one_plus, h = (b.fresh("gelu") for _ in range(4))
        b.node("Mul", [x, const_like(b, 1.0 / math.sqrt(2.0), x)], [t])
        b.node("Erf", [t], [e])
        b.node("Add", [e, const_like(b, 1.0, x)], [one_plus])
        b.node("Mul", [x, one_plus], [h])
        b.node("Mul", [h, const_like(b, 0.5, x)], outs)


# ---- maps with attributes -----------------------------------------------------------------------
@dataclass(frozen=True)
class LeakyRelu(Unary):
    """x if x >= 0 else alpha * x (continuous: no domain; a kink at 0 unless alpha is 1)."""

    name: ClassVar[str] = "leaky_relu"
    torch_name: ClassVar[str] = "F.leaky_relu"
    onnx_name: ClassVar[str] = "LeakyRelu"
    dtypes: ClassVar[frozenset[DType]] = F16_32  # ONNX float attributes are float32: no f64
    choices: ClassVar[dict[str, tuple]] = {"alpha": (0.01, 0.1, 0.2, 0.5)}
    alpha: float

    def kinks(self, x: Tensor) -> list[Tensor]:
        return [] if self.alpha == 1.0 or not is_float(x) else [_nonzero(x)]


@dataclass(frozen=True)
class Elu(Unary):
    """x if x > 0 else alpha * (exp(x) - 1); its slope jumps at 0 (alpha to 1) unless alpha is 1."""

    name: ClassVar[str] = "elu"
    family: ClassVar[str] = T
    tolerance_factor: ClassVar[float] = LIBM_FACTOR
    torch_name: ClassVar[str] = "F.elu"
    onnx_name: ClassVar[str] = "Elu"
    dtypes: ClassVar[frozenset[DType]] = F16_32  # ONNX float attributes are float32: no f64
    choices: ClassVar[dict[str, tuple]] = {"alpha": (0.5, 1.0, 1.5)}
    alpha: float

    def kinks(self, x: Tensor) -> list[Tensor]:
        return [] if self.alpha == 1.0 or not is_float(x) else [_nonzero(x)]


@dataclass(frozen=True)
class Clip(Unary):
    """min(max(x, lo), hi) with lo <= hi; integer-valued bounds for integer x (continuous).
    Float bounds avoid integers (0 too) and halves: clipped values equal a bound exactly, and a
    later floor/round/sign/asin would find them on a discontinuity no search can leave."""

    name: ClassVar[str] = "clip"
    dtypes: ClassVar[frozenset[DType]] = NUMERIC
    exact: ClassVar[bool] = True  # a selection of x, lo or hi
    lo: float
    hi: float

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Clip:
        if first.dtype.is_int:
            lo, hi = ctx.rng.choice((-3.0, -1.0, 0.0)), ctx.rng.choice((0.0, 1.0, 2.0, 3.0))
        else:
            lo, hi = ctx.rng.choice((-2.25, -0.75, -0.25)), ctx.rng.choice((0.25, 0.75, 1.75))
        return cls(lo=lo, hi=hi)

    def requires(self, ins: Sequence[TensorType]) -> list:
        integral = self.lo == int(self.lo) and self.hi == int(self.hi)
        return [self.lo <= self.hi, integral or not ins[0].dtype.is_int]

    def kinks(self, x: Tensor) -> list[Tensor]:
        """Float x stays the margin away from both bounds (the slope jumps between 0 and 1)."""
        if not is_float(x):
            return []
        xf = as_float(x)
        return [apart(xf - self.lo, self.lo, x.dtype), apart(xf - self.hi, self.hi, x.dtype)]

    def torch(self, x: Tensor) -> Tensor:
        import torch

        if x.dtype.is_floating_point:
            return torch.clamp(x, self.lo, self.hi)
        return torch.clamp(x, int(self.lo), int(self.hi))

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        (x,) = ins
        b.node("Clip", [x, const_like(b, self.lo, x), const_like(b, self.hi, x)], outs)


# ---- import rules beyond the plain ones (`Op.from_aten`, `Op.from_onnx`) ----------------------
def _silu(cls: type[Op], node: SourceNode) -> Imported | None:
    """aten.silu (GraphIR has no silu): x * sigmoid(x)."""
    if node.target == "aten.silu.default":
        from ir.ops.binary import Mul

        x = node.tensor(0)
        return Imported.chain([(Sigmoid(), [x]), (Mul(), [x, Prev(0)])])
    return Unary.from_aten.__func__(cls, node)  # type: ignore[attr-defined]


Sigmoid.aten_imports = ("aten.sigmoid.default", "aten.silu.default")
Sigmoid.onnx_imports = ("Sigmoid",)
Sigmoid.from_aten = classmethod(_silu)  # type: ignore[method-assign,assignment]


def _softsign_aten(cls: type[Op], node: SourceNode) -> Imported | None:
    """torch writes F.softsign out: x / (abs(x) + 1)."""
    add = node.producer(1)
    if add is None or add.target != "aten.add.Tensor" or add.arg(1) != 1 or add.n_given != 2:
        return None
    ab = add.producer(0)
    if ab is None or ab.target != "aten.abs.default" or ab.tensor(0) != node.tensor(0):
        return None
    return Imported.one(cls(), node.tensor(0), absorbed=[add, ab])


Softsign.aten_imports = ("aten.div.Tensor",)
Softsign.import_priority = 1
Softsign.from_aten = classmethod(_softsign_aten)  # type: ignore[method-assign,assignment]


def _softplus_aten(cls: type[Op], node: SourceNode) -> Imported | None:
    if node.attrs_given or node.arg(1, 1) != 1 or node.arg(2, 20) != 20:
        return None
    return Imported.one(cls(), node.tensor(0))


Softplus.from_aten = classmethod(_softplus_aten)  # type: ignore[method-assign,assignment]


def _hardsigmoid_onnx(cls: type[Op], node: SourceNode) -> Imported | None:
    if (abs(node.attr("alpha", 0.2) - 1 / 6) > 1e-6 or abs(node.attr("beta", 0.5) - 0.5) > 1e-6
            or node.n_given != 1):
        return None
    return Imported.one(cls(), node.tensor(0))


Hardsigmoid.onnx_imports = ("HardSigmoid",)
Hardsigmoid.from_onnx = classmethod(_hardsigmoid_onnx)  # type: ignore[method-assign,assignment]


def _scalar(node: SourceNode | None, i: int, value: float) -> bool:
    c = None if node is None else node.const(i)
    return c is not None and c.size == 1 and abs(float(c.reshape(())) - value) <= 1e-6 * max(1.0, abs(value))


def _gelu_onnx(cls: type[Op], node: SourceNode) -> Imported | None:
    """ONNX Gelu (opset 20), or the Erf form GraphIR writes (and torch.onnx exports):
    ((x * (erf(x * c) + 1)) * 0.5) with c = 1/sqrt(2) (or x / sqrt(2))."""
    if node.target == "Gelu":
        if node.attr("approximate", "none") not in ("none", b"none") or node.n_given != 1:
            return None
        return Imported.one(cls(), node.tensor(0))
    if not _scalar(node, 1, 0.5):
        return None
    h = node.producer(0)
    if h is None or h.target != "Mul":
        return None
    x = h.tensor(0)
    one_plus = h.producer(1)
    if one_plus is None or one_plus.target != "Add" or not _scalar(one_plus, 1, 1.0):
        return None
    e = one_plus.producer(0)
    if e is None or e.target != "Erf":
        return None
    t = e.producer(0)
    if t is None or t.tensor(0) != x or not (
            (t.target == "Mul" and _scalar(t, 1, 1 / math.sqrt(2)))
            or (t.target == "Div" and _scalar(t, 1, math.sqrt(2)))):
        return None
    return Imported.one(cls(), x, absorbed=[h, one_plus, e, t])


Gelu.onnx_imports = ("Gelu", "Mul")
Gelu.import_priority = 1
Gelu.from_onnx = classmethod(_gelu_onnx)  # type: ignore[method-assign,assignment]


def _clip_aten(cls: type[Clip], node: SourceNode) -> Imported | None:
    """clamp(x, min, max) with both bounds; hardtanh(x, min=-1, max=1); relu6(x)."""
    if node.target == "aten.relu6.default":
        return Imported.one(cls(lo=0.0, hi=6.0), node.tensor(0))
    if node.target == "aten.hardtanh.default":
        return Imported.one(cls(lo=float(node.arg(1, -1.0)), hi=float(node.arg(2, 1.0))),
                            node.tensor(0))
    lo, hi = node.arg(1), node.arg(2)
    if node.target == "aten.clamp_min.default":
        lo, hi = node.arg(1), None
    if lo is None or hi is None:  # one bound: max(x, lo) or min(x, hi)
        from ir.ops.binary import Maximum, Minimum

        if lo is None and hi is None:
            return None
        op = Maximum() if hi is None else Minimum()
        return Imported.one(op, node.tensor(0), node.tensor(1 if hi is None else 2))
    return Imported.one(cls(lo=float(lo), hi=float(hi)), node.tensor(0))


def _clip_onnx(cls: type[Clip], node: SourceNode) -> Imported | None:
    lo, hi = node.const(1), node.const(2)
    if lo is None or hi is None or lo.size != 1 or hi.size != 1:
        return None
    return Imported.one(cls(lo=float(lo.reshape(())), hi=float(hi.reshape(()))), node.tensor(0))


Clip.aten_imports = ("aten.clamp.default", "aten.clamp_min.default", "aten.hardtanh.default",
                     "aten.relu6.default")
Clip.onnx_imports = ("Clip",)
Clip.from_aten = classmethod(_clip_aten)  # type: ignore[method-assign,assignment]
Clip.from_onnx = classmethod(_clip_onnx)  # type: ignore[method-assign,assignment]


def _rsqrt(cls: type[Op], node: SourceNode) -> Imported | None:
    """aten.rsqrt (GraphIR has none): 1 / sqrt(x)."""
    if node.target == "aten.rsqrt.default":
        return Imported.chain([(Sqrt(), [node.tensor(0)]), (Reciprocal(), [Prev(0)])])
    return Unary.from_aten.__func__(cls, node)  # type: ignore[attr-defined]


Reciprocal.aten_imports = ("aten.reciprocal.default", "aten.rsqrt.default")
Reciprocal.from_aten = classmethod(_rsqrt)  # type: ignore[method-assign,assignment]
