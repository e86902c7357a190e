"""Matrix products: `matmul` (x[..., k] @ w[k, n]) and `linear` (x @ W^T + b, weights as params)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, Prev, SourceNode
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import eq
from ir.core.types import TensorType
from ir.ops.common import NUMERIC, is_float, no_wraparound, same_dtype

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext


@dataclass(frozen=True)
class MatMul(Op):
    """ONNX MatMul / torch.matmul with a rank-2 right operand (a value or a weight), as the
    generator places it; imports also bring batched ones (both ranks >= 2, batch dims
    broadcast, as numpy's matmul)."""

    name: ClassVar[str] = "matmul"
    family: ClassVar[str] = "matmul"
    tolerance_factor: ClassVar[float] = 2.0  # long accumulations: summation order
    arity: ClassVar[int] = 2
    dtypes: ClassVar[frozenset[DType]] = NUMERIC

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return same_dtype(cls.dtypes, n_inputs)

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2, 3, 4)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((2,), param=None)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        return TensorType((first.shape[-1], ctx.dim(2)), dtype)

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, w = ins
        if w.rank in (1, 2):  # the generator's forms: a matrix, or a vector (matrix @ vector)
            return [eq(x.shape[-1], w.shape[0])]
        # batched (numpy's matmul: what imports bring, e.g. attention's q @ k^T; the generator
        # feeds rank 2): batch dims broadcast
        if x.rank < 2 or w.rank < 2:
            return [False]
        from ir.ops.binary import broadcast_requires

        return [eq(x.shape[-1], w.shape[-2])] + broadcast_requires(
            TensorType(x.shape[:-2], x.dtype), TensorType(w.shape[:-2], w.dtype))

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        x, w = ins
        if w.rank in (1, 2):
            return [TensorType(x.shape[:-1] + w.shape[1:], x.dtype)]
        from ir.ops.binary import broadcast_shape

        batch = broadcast_shape(TensorType(x.shape[:-2], x.dtype), TensorType(w.shape[:-2], w.dtype))
        return [TensorType(tuple(batch) + (x.shape[-2], w.shape[-1]), x.dtype)]

    def domain(self, x: Tensor, w: Tensor) -> list[Tensor]:
        """Integers: no partial sum of products wraps around (`no_wraparound`; |x| @ |w|
        bounds them all); floats: none."""
        return _int_matmul_bound(x, w)

    def torch(self, x: Tensor, w: Tensor) -> Tensor:
        import torch

        return torch.matmul(x, w)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("MatMul", ins, outs)


@dataclass(frozen=True)
class Linear(MatMul):
    """torch.nn.functional.linear: x[..., k] @ W[n, k]^T + b[n]; W and b are weights. ONNX:
    Transpose + MatMul + Add (Gemm would need rank 2)."""

    name: ClassVar[str] = "linear"
    arity: ClassVar[int] = 3

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        return [Slot((2,), param=True), Slot((1,), param=True)]

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        if index == 1:
            return TensorType((ctx.dim(2), first.shape[-1]), dtype)
        return None  # the bias: any rank-1 dims; `requires` ties it to W's rows

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, w, bias = ins
        return [eq(x.shape[-1], w.shape[1]), eq(bias.shape[0], w.shape[0])]

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        return [TensorType(ins[0].shape[:-1] + ins[1].shape[:1], ins[0].dtype)]

    # override ignored: linear is a matmul with a third operand (the bias); an op is called with
    # its operand list, never through MatMul's two-operand signature
    def domain(self, x: Tensor, w: Tensor, bias: Tensor) -> list[Tensor]:  # type: ignore[override]
        """As matmul's, the bias added to the bound (ONNX: MatMul, then Add)."""
        return _int_matmul_bound(x, w.T, bias)

    def torch(self, x: Tensor, w: Tensor, bias: Tensor) -> Tensor:  # type: ignore[override]
        import torch

        return torch.nn.functional.linear(x, w, bias)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        x, w, bias = ins
        wt, xw = b.fresh("wt"), b.fresh("xw")
        b.node("Transpose", [w], [wt], perm=[1, 0])
        b.node("MatMul", [x, wt], [xw])
        b.node("Add", [xw, bias], outs)


def _int_matmul_bound(x: Tensor, w: Tensor, bias: Tensor | None = None) -> list[Tensor]:
    """`no_wraparound` for integer x @ w (+ bias): |x| @ |w| (+ |bias|) in float64 bounds every
    partial sum of products, in any order."""
    if is_float(x) or not x.numel() or not w.numel():
        return []
    import torch

    bound = torch.matmul(x.to(torch.float64).abs(), w.to(torch.float64).abs())
    if bias is not None:
        bound = bound + bias.to(torch.float64).abs()
    return [no_wraparound(torch.log2(bound), x.dtype)]


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _matmul_aten(cls: type[Op], node: SourceNode) -> Imported | None:
    if node.target == "aten.addmm.default":  # bias + x @ m
        if node.attrs_given or node.n_given != 3:
            return None
        from ir.ops.binary import Add

        return Imported.chain([(MatMul(), [node.tensor(1), node.tensor(2)]),
                               (Add(), [Prev(0), node.tensor(0)])])
    if node.n_given != 2 or node.attrs_given:
        return None
    return Imported.one(cls(), node.tensor(0), node.tensor(1))


def _attention(node: SourceNode) -> Imported | None:
    """scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale) without
    dropout or grouped heads: softmax(q @ k^T * scale [+ mask]) @ v. A float mask is added; a
    boolean one and the causal mask (`is_causal`: key j > query i) put the dtype's lowest
    value where attention is not allowed (torch puts -inf: the same softmax unless a whole
    row is masked, where torch gives NaN)."""
    import math

    import numpy as np

    from ir.ops.binary import Add, Mul, Where
    from ir.ops.shape import Transpose
    from ir.ops.softmax import Softmax

    q, k = node.type(0), node.type(1)
    if node.arg(4, 0.0) or node.arg(7, False) or q.rank < 2:
        return None
    causal = bool(node.arg(5, False))
    if causal and node.is_tensor(3):
        return None  # torch refuses both
    scale = node.arg(6)
    scale = 1.0 / math.sqrt(int(q.shape[-1])) if scale is None else float(scale)
    perm = (*range(k.rank - 2), k.rank - 1, k.rank - 2)
    dt = q.dtype.numpy
    steps: list = [(Transpose(perm=perm), [node.tensor(1)]),
                   (MatMul(), [node.tensor(0), Prev(0)]),
                   (Mul(), [Prev(1), node.constant(np.asarray(scale, dtype=dt))])]
    lowest = node.constant(np.asarray(np.finfo(dt).min, dtype=dt))
    if causal:
        n_q, n_k = int(q.shape[-2]), int(k.shape[-2])
        allowed = np.tril(np.ones((n_q, n_k), dtype=bool))
        steps.append((Where(), [node.constant(allowed), Prev(2), lowest]))
    elif node.is_tensor(3):
        mask = node.type(3).dtype
        if mask == q.dtype:
            steps.append((Add(), [Prev(2), node.tensor(3)]))
        elif mask == DType.bool:
            steps.append((Where(), [node.tensor(3), Prev(2), lowest]))
        else:
            return None
    steps += [(Softmax(axis=q.rank - 1), [Prev(len(steps) - 1)]),
              (MatMul(), [Prev(len(steps)), node.tensor(2)])]
    return Imported.chain(steps)


_plain_matmul = _matmul_aten


def _matmul_or_attention(cls: type[Op], node: SourceNode) -> Imported | None:
    if node.target == "aten.scaled_dot_product_attention.default":
        return _attention(node)
    return _plain_matmul(cls, node)


MatMul.aten_imports = ("aten.matmul.default", "aten.mm.default", "aten.bmm.default",
                       "aten.addmm.default", "aten.scaled_dot_product_attention.default")
MatMul.onnx_imports = ("MatMul",)
MatMul.from_aten = classmethod(_matmul_or_attention)  # type: ignore[method-assign,assignment]


def _linear_aten(cls: type[Op], node: SourceNode) -> Imported | None:
    import numpy as np

    w = node.type(1)
    bias = node.tensor(2) if node.is_tensor(2) else node.constant(
        np.zeros(w.shape[:1], dtype=w.dtype.numpy))
    return Imported.one(cls(), node.tensor(0), node.tensor(1), bias)


def _linear_onnx(cls: type[Op], node: SourceNode) -> Imported | None:
    """Gemm(x, w, b) with transB (nn.Linear's export), or the form GraphIR writes:
    Add(MatMul(x, Transpose(w)), b)."""
    if node.target == "Gemm":
        if (node.attr("transA", 0) or node.attr("transB", 0) != 1 or node.attr("alpha", 1.0) != 1.0
                or node.attr("beta", 1.0) != 1.0 or node.n_given != 3):
            return None
        return Imported.one(cls(), node.tensor(0), node.tensor(1), node.tensor(2))
    mm = node.producer(0)
    if mm is None or mm.target != "MatMul":
        return None
    tr = mm.producer(1)
    if tr is None or tr.target != "Transpose" or list(tr.attr("perm", [])) != [1, 0]:
        return None
    return Imported.one(cls(), mm.tensor(0), tr.tensor(0), node.tensor(1), absorbed=[mm, tr])


Linear.aten_imports = ("aten.linear.default",)
Linear.onnx_imports = ("Gemm", "Add")
Linear.import_priority = 1
Linear.from_aten = classmethod(_linear_aten)  # type: ignore[method-assign,assignment]
Linear.from_onnx = classmethod(_linear_onnx)  # type: ignore[method-assign,assignment]
