"""What an op's import rules take and give (`Op.from_aten`, `Op.from_onnx`; `ir.importers`).

An importer (torch.export's ATen graph, an ONNX model) walks the source nodes in order and asks
the ops that declared the node's kind (`Op.aten_imports`, `Op.onnx_imports`) for a rule: each
gets a `SourceNode`, a view of the node that hides the frontend (operands as `Ref`s, Python
arguments, ONNX attributes, constant inputs, the result types), and answers an `Imported` (the
GraphIR instructions computing the node's results), or None when this node is not its kind
(another op, or none, may take it). The importer checks the answer with the op's own type rule
against the node's result types, so a rule only reads attributes; it never checks shapes.

A rule may read through the node's producers (`SourceNode.producer`: the node making an operand
when that operand has no other reader) to recognize a pattern several source nodes make for
one GraphIR op (torch's softsign is `x / (abs(x) + 1)`); those producers are `absorbed`, and
dropped when nothing else reads them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ir.core.op import Op
    from ir.core.types import TensorType


@dataclass(frozen=True)
class Ref:
    """A source value, as the importer knows it (opaque to the rules)."""

    key: str


@dataclass(frozen=True)
class Prev:
    """Result `result` of an earlier step of the same `Imported`."""

    step: int
    result: int = 0


Operand = Ref | Prev


@dataclass(frozen=True)
class Step:
    """One GraphIR instruction of an import: `op` on `operands`."""

    op: Op
    operands: tuple[Operand, ...]


@dataclass(frozen=True)
class Imported:
    """A source node as GraphIR: the steps in order; the last step's results are the node's
    results `results` (its result indices, in order; None: all of them). `absorbed`: producer
    nodes the rule read through (`SourceNode.producer`)."""

    steps: tuple[Step, ...]
    absorbed: tuple[SourceNode, ...] = ()
    results: tuple[int, ...] | None = None
    #: the node's results, when not all of the last step's: result j is `outputs[j]`
    outputs: tuple[Prev, ...] | None = None
    #: no steps: the node's one result is this operand (a no-op the op's type rule refuses,
    #: such as an expand to the same shape)
    alias: Ref | None = None

    @staticmethod
    def same(ref: Ref) -> Imported:
        return Imported((), alias=ref)

    @staticmethod
    def one(op: Op, *operands: Operand, absorbed: Sequence[SourceNode] = (),
            results: Sequence[int] | None = None) -> Imported:
        return Imported((Step(op, tuple(operands)),), tuple(absorbed),
                        None if results is None else tuple(results))

    @staticmethod
    def chain(steps: Sequence[tuple[Op, Sequence[Operand]]], absorbed: Sequence[SourceNode] = (),
              results: Sequence[int] | None = None) -> Imported:
        return Imported(tuple(Step(op, tuple(ops)) for op, ops in steps), tuple(absorbed),
                        None if results is None else tuple(results))


class NotImportable(Exception):
    """Raised by a `SourceNode` accessor when the node cannot be mapped (an operand that is no
    tensor, a constant where none can go): the rule's answer is then None."""


class SourceNode(Protocol):
    """A source node as an import rule sees it. Inputs are addressed by position or, for ATen
    nodes, by the schema's argument name; ONNX attributes and ATen keyword arguments by name."""

    #: the node's kind: an ATen overload (`aten.conv2d.default`) or an ONNX op type (`Conv`)
    target: str

    @property
    def n_given(self) -> int:
        """How many arguments the node gives: an ATen node's positional and keyword arguments,
        an ONNX node's inputs (trailing empty ones not counted)."""

    @property
    def attrs_given(self) -> frozenset[str]:
        """The names of the ONNX attributes given; for an ATen node, its keyword arguments."""

    @property
    def out_types(self) -> tuple[TensorType | None, ...]:
        """The types of the node's results (None: not a GraphIR tensor)."""

    def tensor(self, i: int | str, like: int | str | None = None) -> Ref:
        """Operand `i` as a tensor; a Python number becomes a 0-d constant of the dtype of
        operand `like` (default: the first tensor operand). NotImportable if it is neither."""

    def tensors(self, i: int | str) -> list[Ref]:
        """Operand `i`, a list of tensors (`aten.cat`'s), or the variadic ONNX inputs from `i`."""

    def is_tensor(self, i: int | str) -> bool:
        """Whether operand `i` is given and is a tensor."""

    def type(self, i: int | str) -> TensorType:
        """The type of tensor operand `i` (NotImportable if none)."""

    def arg(self, i: int | str, default: Any = None) -> Any:
        """A non-tensor argument: an ATen int/float/list/bool/dtype (its default when not given),
        or the value of a constant ONNX input as a Python number or list (`default` if absent)."""

    def attr(self, name: str, default: Any = None) -> Any:
        """An ONNX attribute (ints, floats, lists; tensors as numpy) or an ATen keyword."""

    def const(self, i: int | str) -> np.ndarray | None:
        """The value of operand `i` when it is a constant (an ONNX initializer or Constant, a
        torch constant), else None."""

    def constant(self, value: np.ndarray) -> Ref:
        """A new constant operand with this value (a param of the imported graph)."""

    def producer(self, i: int | str) -> SourceNode | None:
        """The node making operand `i` when that operand has no other reader (pattern rules)."""

    def producer_of(self, ref: Ref) -> SourceNode | None:
        """The node making `ref` when `ref` has no other reader."""

    def const_of(self, ref: Ref) -> np.ndarray | None:
        """The value of `ref` when it is a constant (weights included), else None."""


def norm_axis(axis: int, rank: int) -> int:
    """A source's axis (maybe negative) as GraphIR's (0 <= axis < rank)."""
    if not -rank <= axis < max(rank, 1):
        raise NotImportable(f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def float_attr(v: float) -> float:
    """An ONNX float attribute (stored as float32) as the shortest float that rounds to it
    (0.1 rather than 0.10000000149011612), which is what the op was built from."""
    import numpy as np

    return float(str(np.float32(v)))


def ints(v: object, n: int | None = None) -> tuple[int, ...]:
    """An int or a list of ints as a tuple (of length `n`, an int repeated)."""
    if isinstance(v, int):
        return (v,) * (n or 1)
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) for x in v):
        raise NotImportable(f"not ints: {v!r}")
    out = tuple(v)
    if n is not None and len(out) == 1 and n > 1:
        out = out * n
    if n is not None and len(out) != n:
        raise NotImportable(f"{len(out)} ints where {n} are needed")
    return out
