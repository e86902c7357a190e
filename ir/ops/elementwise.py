"""Elementwise ops: unary maps and binary maps with numpy-style broadcasting."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ir.dtypes import DType, FLOAT_DTYPES, NUMERIC_DTYPES
from ir.op import Op, Signature, Slot
from ir.shapes import Or, eq, if_then_else, same
from ir.types import TensorType

# ---------------------------------------------------------------------------------------------
# unary


@dataclass(frozen=True)
class Unary(Op):
    """y = f(x), same shape and dtype. Subclasses name f for torch and ONNX."""

    family: ClassVar[str] = "unary"
    dtypes: ClassVar[frozenset[DType]] = FLOAT_DTYPES
    torch_name: ClassVar[str]
    onnx_name: ClassVar[str]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d,), (d,)) for d in sorted(cls.dtypes, key=lambda d: d.value)]

    def infer(self, ins):
        return [ins[0]]

    def torch(self, x):
        import torch

        return getattr(torch, self.torch_name)(x)

    def onnx(self, b, ins, outs):
        b.node(self.onnx_name, ins, outs)


def _unary(name: str, torch_name: str, onnx_name: str, dtypes=FLOAT_DTYPES) -> type[Unary]:
    cls = type(
        name.capitalize(),
        (Unary,),
        {"name": name, "torch_name": torch_name, "onnx_name": onnx_name, "dtypes": dtypes,
         "__module__": __name__, "__doc__": f"Elementwise {name}."},
    )
    return dataclass(frozen=True)(cls)


Relu = _unary("relu", "relu", "Relu", frozenset({DType.float32, DType.float64}))
Abs = _unary("abs", "abs", "Abs", NUMERIC_DTYPES)
Neg = _unary("neg", "neg", "Neg", NUMERIC_DTYPES)
Sigmoid = _unary("sigmoid", "sigmoid", "Sigmoid")
Tanh = _unary("tanh", "tanh", "Tanh")
Sin = _unary("sin", "sin", "Sin", frozenset({DType.float32, DType.float64}))
Cos = _unary("cos", "cos", "Cos", frozenset({DType.float32, DType.float64}))

# ---------------------------------------------------------------------------------------------
# binary with broadcasting


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
    cons = []
    for da, db in zip(reversed(a.shape), reversed(b.shape)):
        cons.append(Or(eq(da, db), eq(da, 1), eq(db, 1)))
    return cons


@dataclass(frozen=True)
class Binary(Op):
    """z = f(x, y) with numpy broadcasting; both inputs share one dtype."""

    family: ClassVar[str] = "binary"
    arity: ClassVar[int] = 2
    dtypes: ClassVar[frozenset[DType]] = NUMERIC_DTYPES
    torch_name: ClassVar[str]
    onnx_name: ClassVar[str]

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d, d), (d,)) for d in sorted(cls.dtypes, key=lambda d: d.value)]

    @classmethod
    def slots(cls, n_inputs, first):
        return [Slot(tuple(range(first.rank + 1)), param=None)]

    def operand_type(self, index, first, dtype, ctx):
        """A suffix of input 0's dims with some set to 1: broadcasts by construction."""
        rank = ctx.rng.randint(0, first.rank)
        dims = tuple(1 if ctx.rng.random() < 0.25 else d for d in first.shape[first.rank - rank:])
        return TensorType(dims, dtype)

    def infer(self, ins):
        return [TensorType(broadcast_shape(ins[0], ins[1]), ins[0].dtype)]

    def requires(self, ins):
        return broadcast_requires(ins[0], ins[1])

    def torch(self, x, y):
        import torch

        return getattr(torch, self.torch_name)(x, y)

    def onnx(self, b, ins, outs):
        b.node(self.onnx_name, ins, outs)


def _binary(name: str, torch_name: str, onnx_name: str, dtypes=NUMERIC_DTYPES) -> type[Binary]:
    cls = type(
        name.capitalize(),
        (Binary,),
        {"name": name, "torch_name": torch_name, "onnx_name": onnx_name, "dtypes": dtypes,
         "__module__": __name__, "__doc__": f"Broadcasting {name}."},
    )
    return dataclass(frozen=True)(cls)


Add = _binary("add", "add", "Add")
Sub = _binary("sub", "sub", "Sub")
Mul = _binary("mul", "mul", "Mul")
Maximum = _binary("max", "maximum", "Max")
Minimum = _binary("min", "minimum", "Min")
