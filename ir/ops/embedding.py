"""embedding: rows of a table selected by a tensor of indices (a token embedding).

`embedding(weight: float [V, D], indices: int32/int64 of any rank) -> [*indices.shape, D]`
== torch's `F.embedding(indices, weight)` == ONNX `Gather(weight, indices, axis=0)`. Unlike
`gather` (ir/ops/index.py), whose indices are an attribute of solved symbols, the indices here
are a tensor operand whose values are data (a model's token ids), so:

  - their validity, 0 <= i < V, is a `domain` (torch raises on an index out of range, ONNX wraps
    negative ones around, ONNX Runtime refuses large ones), and the input search draws an int
    graph input or param read directly as indices within it (`index_range`,
    `ir.numerics.values.random_values`): a gradient never moves integers;
  - the op is a selection: exact, differentiable in `weight` (no kinks: the gradient scatters
    into the selected rows), not in `indices`; torch's backward reads the indices, an operand,
    so it saves for backward (the default).

Import-only (`generic = False`): the generator does not place it (its integer operand would have
to come from an int value of the graph, whose values the generator does not control); the model
importers map `aten.embedding` and ONNX `Gather` with a non-constant (or, beyond `gather`'s
1-D constants, a multi-dimensional constant) index tensor to it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, SourceNode, norm_axis
from ir.core.op import Op, Signature
from ir.core.types import TensorType
from ir.ops.common import FLOATS, ordered

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder

INDEX_DTYPES = (DType.int32, DType.int64)


@dataclass(frozen=True)
class Embedding(Op):
    """weight[indices]: row indices[...] of the [V, D] table for every index."""

    name: ClassVar[str] = "embedding"
    family: ClassVar[str] = "index"
    arity: ClassVar[int] = 2
    exact: ClassVar[bool] = True  # a selection
    generic: ClassVar[bool] = False  # import-only (module docstring)

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, i), (d,)) for d in ordered(FLOATS) for i in INDEX_DTYPES]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (2,)

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [ins[0].rank == 2]

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        if ins[0].rank != 2:
            return f"weight must be a [V, D] table, got rank {ins[0].rank}"
        return None

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        weight, indices = ins
        return [TensorType((*indices.shape, weight.shape[1]), weight.dtype)]

    def index_range(self, index: int, ins: Sequence[TensorType]) -> tuple[int, int] | None:
        """Operand 1's valid values: [0, V - 1]."""
        return (0, ins[0].shape[0] - 1) if index == 1 else None

    def domain(self, weight: Tensor, indices: Tensor) -> list[Tensor]:
        import torch

        i = indices.to(torch.float64)
        return [(-i).clamp(min=0) + (i - (weight.shape[0] - 1)).clamp(min=0)]

    def torch(self, weight: Tensor, indices: Tensor) -> Tensor:
        import torch.nn.functional as F

        return F.embedding(indices, weight)

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        b.node("Gather", ins, outs, axis=0)


# ---- import rules (`Op.from_aten`, `Op.from_onnx`; ir.core.importing) -------------------------
def _embedding_aten(cls: type[Embedding], node: SourceNode) -> Imported | None:
    """aten.embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    padding_idx only zeroes that row's gradient (the forward reads the row as it is), so it is
    dropped; scale_grad_by_freq and sparse change the gradient's form: refused. (A max_norm
    renormalizes the table in place first: torch.export shows it as aten.embedding_renorm_,
    a node of its own.)"""
    if node.arg("scale_grad_by_freq", False) or node.arg("sparse", False):
        return None
    return Imported.one(cls(), node.tensor("weight"), node.tensor("indices"))


def _embedding_onnx(cls: type[Embedding], node: SourceNode) -> Imported | None:
    """Gather(data, indices) along axis 0 of a float [V, D] table with data-dependent indices.
    Constant 1-D indices are `gather`'s (an attribute); other constant indices (a position
    table's [1, L] ids) become a constant operand here, negative ones wrapped as ONNX does."""
    data = node.type(0)
    if data.rank != 2 or not data.dtype.is_float or norm_axis(node.attr("axis", 0), 2) != 0:
        return None
    idx = node.const(1)
    if idx is None:
        return Imported.one(cls(), node.tensor(0), node.tensor(1))
    if idx.ndim == 1:
        return None  # gather's
    import numpy as np

    wrapped = np.where(idx < 0, idx + int(data.shape[0]), idx).astype(idx.dtype)
    return Imported.one(cls(), node.tensor(0), node.constant(wrapped))


Embedding.aten_imports = ("aten.embedding.default",)
Embedding.onnx_imports = ("Gather",)
Embedding.from_aten = classmethod(_embedding_aten)  # type: ignore[method-assign,assignment]
Embedding.from_onnx = classmethod(_embedding_onnx)  # type: ignore[method-assign,assignment]
