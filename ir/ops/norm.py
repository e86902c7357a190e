"""Normalizations in inference mode; scale, bias (and batch_norm's running stats) are params.

Domains: batch_norm's running variance must be clearly positive. layer_norm and instance_norm
divide by the standard deviation of a group of input values; a nearly constant group (std below
the margin, but not exactly one element) amplifies rounding noise, so it is rejected.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, Operand, Prev, Ref, SourceNode
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import Dim, Or, eq
from ir.core.types import TensorType
from ir.ops.common import F32, FLOATS, as_float, at_least, is_float, margin, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

EPS = 1e-5


def spread(x: Tensor, dims: tuple[int, ...]) -> list[Tensor]:
    """Violation of: the variance of x over `dims` is at least margin**2 (groups of one element
    are exact: x - mean(x) = 0)."""
    import math

    if not is_float(x) or math.prod(x.shape[d] for d in dims) < 2:
        return []
    var = as_float(x).var(dim=dims, unbiased=False)
    return [at_least(var, margin(x.dtype, 0.0) ** 2)]


@dataclass(frozen=True)
class Norm(Op):
    """x plus per-channel (or per-element) params built from x's dims."""

    family: ClassVar[str] = "norm"
    #: mean and variance: two accumulations, and a division by the spread
    tolerance_factor: ClassVar[float] = 4.0
    dtypes: ClassVar[frozenset[DType]] = FLOATS

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, n_inputs)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((1, 2), param=True) for _ in range(n_inputs - 1)]

    def param_shape(self, first: TensorType) -> tuple:
        return (first.shape[1],)

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return TensorType(self.param_shape(first), dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        shape = self.param_shape(ins[0])
        return [all(p.rank == len(shape) for p in ins[1:])] + [
            eq(p.shape[i], shape[i]) for p in ins[1:] for i in range(len(shape)) if p.rank == len(shape)]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [ins[0]]


@dataclass(frozen=True)
class BatchNorm(Norm):
    """batch_norm(x[N, C, ...], scale, bias, mean, var) with running statistics (inference);
    var >= margin."""

    name: ClassVar[str] = "batch_norm"
    arity: ClassVar[int] = 5

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    def domain(self, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor) -> list[Tensor]:
        if not is_float(var):
            return []
        return [at_least(var, margin(var.dtype, 0.0))]

    def torch(self, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor) -> Tensor:
        """Written out rather than F.batch_norm, which is not differentiable in the running
        statistics (the input search differentiates the whole graph)."""
        import torch

        shape = (1, -1) + (1,) * (x.dim() - 2)
        inv = torch.rsqrt(var + EPS).reshape(shape)
        return (x - mean.reshape(shape)) * inv * scale.reshape(shape) + bias.reshape(shape)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("BatchNormalization", ins, outs, epsilon=EPS)


@dataclass(frozen=True)
class LayerNorm(Norm):
    """layer_norm over the last `dims` dims, with elementwise scale and bias of those dims."""

    name: ClassVar[str] = "layer_norm"
    arity: ClassVar[int] = 3
    dims: int

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(dims=ctx.rng.randint(1, min(2, first.rank)))

    def param_shape(self, first: TensorType) -> tuple[Dim, ...]:
        return first.shape[first.rank - self.dims:]

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [1 <= self.dims <= ins[0].rank] + super().requires(ins)

    def domain(self, x: Tensor, scale: Tensor, bias: Tensor) -> list[Tensor]:
        return spread(x, tuple(range(x.dim() - self.dims, x.dim())))

    def torch(self, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.layer_norm(x, tuple(x.shape[x.dim() - self.dims:]), scale, bias, eps=EPS)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("LayerNormalization", ins, outs, axis=-self.dims, epsilon=EPS)


@dataclass(frozen=True)
class InstanceNorm(Norm):
    """instance_norm(x[N, C, *S], scale[C], bias[C]): per (n, c) statistics over S."""

    name: ClassVar[str] = "instance_norm"
    arity: ClassVar[int] = 3
    dtypes: ClassVar[frozenset[DType]] = F32  # ORT: no double kernel

    def requires(self, ins: Sequence[TensorType]) -> list:
        # torch's instance_norm rejects a single spatial element
        return super().requires(ins) + [Or(*[d >= 2 for d in ins[0].shape[2:]])]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (3, 4)

    def domain(self, x: Tensor, scale: Tensor, bias: Tensor) -> list[Tensor]:
        return spread(x, tuple(range(2, x.dim())))

    def torch(self, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.instance_norm(x, weight=scale, bias=bias, eps=EPS)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("InstanceNormalization", ins, outs, epsilon=EPS)


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _eps_ok(eps: object) -> bool:
    """GraphIR's norms have the one epsilon EPS (float32 attributes round it)."""
    return isinstance(eps, (int, float)) and abs(float(eps) - EPS) <= 1e-9


def _or_const(node: SourceNode, i: int, fill: float, shape: Sequence[int], like: int = 0) -> Ref:
    import numpy as np

    if node.is_tensor(i):
        return node.tensor(i)
    return node.constant(np.full(tuple(shape), fill, dtype=node.type(like).dtype.numpy))


def _batch_norm_aten(cls: type[BatchNorm], node: SourceNode) -> Imported | None:
    """_native_batch_norm_legit_no_training(x, w, b, mean, var, momentum, eps) (result 0), or
    batch_norm(x, w, b, mean, var, training=False, momentum, eps, cudnn). Another epsilon than
    EPS goes into the variance: `var + (eps - EPS)` first (GoogLeNet's and MobileNet v3's
    1e-3), which is the same formula."""
    if node.target == "aten.add.Tensor":
        return _batch_norm_written_out(cls, node)
    if node.target == "aten.batch_norm.default":
        if node.arg(5):
            return None
        eps, results = node.arg(7, 1e-5), None
    else:
        eps, results = node.arg(6, 1e-5), (0,)
    if not (node.is_tensor(3) and node.is_tensor(4)) or not isinstance(eps, (int, float)):
        return None
    c = (int(node.type(0).shape[1]),)
    operands = (node.tensor(0), _or_const(node, 1, 1.0, c), _or_const(node, 2, 0.0, c),
                node.tensor(3))
    if _eps_ok(eps):
        return Imported.one(cls(), *operands, node.tensor(4), results=results)
    return _with_variance_shift(cls, node, list(operands), node.tensor(4), float(eps), results)


def _with_variance_shift(cls: type[BatchNorm], node: SourceNode, operands: list[Operand],
                         var: Ref, eps: float, results: tuple[int, ...] | None) -> Imported:
    """batch_norm(x, w, b, mean, var + (eps - EPS)): epsilon `eps` with GraphIR's EPS."""
    import numpy as np

    from ir.ops.binary import Add

    dtype = node.type(4).dtype.numpy
    delta = node.constant(np.asarray(eps - EPS, dtype=dtype))
    return Imported.chain([(Add(), [var, delta]), (cls(), [*operands, Prev(0)])],
                          results=results)


def _batch_norm_onnx(cls: type[BatchNorm], node: SourceNode) -> Imported | None:
    """BatchNormalization in inference mode; another epsilon than EPS into the variance, as
    `_batch_norm_aten` does."""
    eps = node.attr("epsilon", 1e-5)
    if node.attr("training_mode", 0) or not isinstance(eps, (int, float)):
        return None
    if _eps_ok(eps):
        return Imported.one(cls(), *(node.tensor(i) for i in range(5)), results=(0,))
    return _with_variance_shift(cls, node, [node.tensor(i) for i in range(4)], node.tensor(4),
                                float(eps), (0,))


def _batch_norm_written_out(cls: type[BatchNorm], node: SourceNode) -> Imported | None:
    """The form `BatchNorm.torch` writes (and models that write batch norm out):
    (x - mean.reshape(s)) * rsqrt(var + EPS).reshape(s) * scale.reshape(s) + bias.reshape(s)."""

    def reshaped(n: SourceNode | None) -> SourceNode | None:
        return n if n is not None and n.target in ("aten.reshape.default", "aten.view.default") else None

    def is_(n: SourceNode | None, target: str) -> bool:
        return n is not None and n.target == target

    rb, m2 = reshaped(node.producer(1)), node.producer(0)
    if rb is None or not is_(m2, "aten.mul.Tensor") or node.n_given != 2:
        return None
    assert m2 is not None
    rs, m1 = reshaped(m2.producer(1)), m2.producer(0)
    if rs is None or not is_(m1, "aten.mul.Tensor"):
        return None
    assert m1 is not None
    d, ri = m1.producer(0), reshaped(m1.producer(1))
    if not is_(d, "aten.sub.Tensor") or ri is None:
        return None
    assert d is not None
    rm, rsq = reshaped(d.producer(1)), ri.producer(0)
    if rm is None or not is_(rsq, "aten.rsqrt.default"):
        return None
    assert rsq is not None
    veps = rsq.producer(0)
    if not is_(veps, "aten.add.Tensor") or veps is None or not _eps_ok(veps.arg(1)):
        return None
    return Imported.one(cls(), d.tensor(0), rs.tensor(0), rb.tensor(0), rm.tensor(0),
                        veps.tensor(0), absorbed=[rb, m2, rs, m1, d, ri, rm, rsq, veps])


BatchNorm.aten_imports = ("aten._native_batch_norm_legit_no_training.default",
                          "aten.batch_norm.default", "aten.add.Tensor")
BatchNorm.import_priority = 1
BatchNorm.onnx_imports = ("BatchNormalization",)
BatchNorm.from_aten = classmethod(_batch_norm_aten)  # type: ignore[method-assign,assignment]
BatchNorm.from_onnx = classmethod(_batch_norm_onnx)  # type: ignore[method-assign,assignment]


def _layer_norm_aten(cls: type[LayerNorm], node: SourceNode) -> Imported | None:
    """layer_norm(x, normalized_shape, w, b, eps) (or native_layer_norm's result 0); another
    epsilon than EPS (ConvNeXt's and ViT's 1e-6) as its formula (`_layer_norm_formula`)."""
    shape = tuple(node.arg(1))
    eps = node.arg(4, 1e-5)
    results = (0,) if node.target == "aten.native_layer_norm.default" else None
    if not isinstance(eps, (int, float)):
        return None
    if not _eps_ok(eps):
        return _layer_norm_formula(node, len(shape), float(eps),
                                   node.tensor(2) if node.is_tensor(2) else None,
                                   node.tensor(3) if node.is_tensor(3) else None, results)
    return Imported.one(cls(dims=len(shape)), node.tensor(0), _or_const(node, 2, 1.0, shape),
                        _or_const(node, 3, 0.0, shape), results=results)


def _layer_norm_formula(node: SourceNode, dims: int, eps: float, weight: Ref | None,
                        bias: Ref | None, results: tuple[int, ...] | None) -> Imported:
    """x (operand 0)'s last `dims` dims normalized with epsilon `eps` in GraphIR's ops
    (`_normalized`), times `weight`, plus `bias` (each when given)."""
    from ir.ops.binary import Add, Mul

    steps: list = []
    _normalized(steps, node, node.tensor(0), node.type(0).rank, dims, eps)
    if weight is not None:
        steps.append((Mul(), [Prev(len(steps) - 1), weight]))
    if bias is not None:
        steps.append((Add(), [Prev(len(steps) - 1), bias]))
    return Imported.chain(steps, results=results)


def _normalized(steps: list, node: SourceNode, x: Operand, rank: int, dims: int,
                eps: float, center: bool = True) -> Operand:
    """Append to `steps` the normalization of `x` (rank `rank`, operand 0's dtype) over its
    last `dims` dims: `d = x - mean(x)` (`d = x` when not `center`: RMS norm),
    `d / sqrt(mean(d * d) + eps)`; its result."""
    import numpy as np

    from ir.ops.binary import Add, Div, Mul, Sub
    from ir.ops.elementwise import Sqrt
    from ir.ops.reduce import ReduceMean

    axes = range(rank - 1, rank - 1 - dims, -1)

    def mean_of(first: Operand) -> Prev:
        for i, axis in enumerate(axes):
            steps.append((ReduceMean(axis=axis, keepdim=True), [first if i == 0 else
                                                                 Prev(len(steps) - 1)]))
        return Prev(len(steps) - 1)

    d: Operand = x
    if center:
        steps.append((Sub(), [x, mean_of(x)]))
        d = Prev(len(steps) - 1)
    steps.append((Mul(), [d, d]))
    var = mean_of(Prev(len(steps) - 1))
    steps += [(Add(), [var, node.constant(np.asarray(eps, dtype=node.type(0).dtype.numpy))]),
              (Sqrt(), [Prev(len(steps))])]
    steps.append((Div(), [d, Prev(len(steps) - 1)]))
    return Prev(len(steps) - 1)


def _layer_norm_onnx(cls: type[LayerNorm], node: SourceNode) -> Imported | None:
    rank = node.type(0).rank
    axis = node.attr("axis", -1)
    dims = -axis if axis < 0 else rank - axis
    eps = node.attr("epsilon", 1e-5)
    if node.attr("stash_type", 1) != 1 or not isinstance(eps, (int, float)):
        return None
    if not _eps_ok(eps):
        return _layer_norm_formula(node, dims, float(eps), node.tensor(1),
                                   node.tensor(2) if node.n_given > 2 else None, (0,))
    shape = tuple(node.type(0).shape[rank - dims:])
    bias = node.tensor(2) if node.n_given > 2 else _or_const(node, 99, 0.0, shape)
    return Imported.one(cls(dims=dims), node.tensor(0), node.tensor(1), bias, results=(0,))


def _rms_norm_aten(node: SourceNode) -> Imported | None:
    """rms_norm(x, normalized_shape, weight, eps) (GraphIR has no RMS norm): x divided by
    sqrt(mean(x * x over the normalized dims) + eps) (`_normalized`, not centered), times the
    weight."""
    import numpy as np

    from ir.ops.binary import Mul

    x = node.type(0)
    eps = node.arg(3)
    eps = float(np.finfo(x.dtype.numpy).eps) if eps is None else float(eps)
    steps: list = []
    out = _normalized(steps, node, node.tensor(0), x.rank, len(tuple(node.arg(1))), eps,
                      center=False)
    if node.is_tensor(2):
        steps.append((Mul(), [out, node.tensor(2)]))
    return Imported.chain(steps)


def _layer_norm_or_rms(cls: type[LayerNorm], node: SourceNode) -> Imported | None:
    if node.target == "aten.rms_norm.default":
        return _rms_norm_aten(node)
    return _layer_norm_aten(cls, node)


LayerNorm.aten_imports = ("aten.layer_norm.default", "aten.native_layer_norm.default",
                          "aten.rms_norm.default")
LayerNorm.onnx_imports = ("LayerNormalization",)
LayerNorm.from_aten = classmethod(_layer_norm_or_rms)  # type: ignore[method-assign,assignment]
LayerNorm.from_onnx = classmethod(_layer_norm_onnx)  # type: ignore[method-assign,assignment]


def _instance_norm_aten(cls: type[InstanceNorm], node: SourceNode) -> Imported | None:
    """instance_norm(x, w, b, running_mean, running_var, use_input_stats, momentum, eps)."""
    if node.is_tensor(3) or node.is_tensor(4) or not node.arg(5, True) or not _eps_ok(node.arg(7)):
        return None
    c = (int(node.type(0).shape[1]),)
    return Imported.one(cls(), node.tensor(0), _or_const(node, 1, 1.0, c), _or_const(node, 2, 0.0, c))


def _instance_norm_onnx(cls: type[InstanceNorm], node: SourceNode) -> Imported | None:
    if not _eps_ok(node.attr("epsilon", 1e-5)):
        return None
    return Imported.one(cls(), *(node.tensor(i) for i in range(3)))


def _group_norm_aten(node: SourceNode) -> Imported | None:
    """group_norm(x, groups, w, b, eps): x (N, C, ...) as (N, groups, rest) normalized over
    the last dim (`_normalized`), back to x's shape, times w and plus b per channel (GraphIR
    has no group norm; with one channel per group it is an instance norm's formula)."""
    from ir.ops.binary import Add, Mul
    from ir.ops.shape import Reshape

    x = node.type(0)
    groups, eps = node.arg(1), node.arg(4, 1e-5)
    if not isinstance(groups, int) or not isinstance(eps, (int, float)) or x.rank < 2:
        return None
    shape = tuple(int(d) for d in x.shape)
    n, c = shape[0], shape[1]
    if groups < 1 or c % groups:
        return None
    rest = 1
    for d in shape[1:]:
        rest *= d
    steps: list = [(Reshape(shape=(n, groups, rest // groups)), [node.tensor(0)])]
    _normalized(steps, node, Prev(0), 3, 1, float(eps))
    steps.append((Reshape(shape=shape), [Prev(len(steps) - 1)]))
    per_channel = (c,) + (1,) * (len(shape) - 2)
    for i, op in ((2, Mul()), (3, Add())):
        if node.is_tensor(i):
            steps.append((Reshape(shape=per_channel), [node.tensor(i)]))
            steps.append((op, [Prev(len(steps) - 2), Prev(len(steps) - 1)]))
    return Imported.chain(steps)


def _instance_or_group_norm(cls: type[InstanceNorm], node: SourceNode) -> Imported | None:
    if node.target == "aten.group_norm.default":
        return _group_norm_aten(node)
    return _instance_norm_aten(cls, node)


InstanceNorm.aten_imports = ("aten.instance_norm.default", "aten.group_norm.default")
InstanceNorm.onnx_imports = ("InstanceNormalization",)
InstanceNorm.from_aten = classmethod(_instance_or_group_norm)  # type: ignore[method-assign,assignment]
InstanceNorm.from_onnx = classmethod(_instance_norm_onnx)  # type: ignore[method-assign,assignment]
