"""GraphIR: graphs of SSA instructions whose sub-graphs are ordinary fields.

A `Graph` has inputs (data fed at run time), params (weights: also graph inputs, materialized as
ONNX initializers and torch buffers), a list of `Inst`, and outputs. An `Inst` applies one
side-effect-free `Op` to named values and binds all of its results at once (no tuple/get-item);
control-flow ops keep their bodies in `Inst.blocks`, each a closed `Graph` (operands are explicit,
a body sees only its own inputs).

Everything here is immutable: a rewrite builds a new graph (see `ir.core.rewrite`), which makes
structural equality, hashing and "seen" sets of canonical forms trivial. `ir.core.verify` is the only
judge of well-formedness; nothing in this module checks it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from ir.core.op import Op
from ir.core.types import TensorType


@dataclass(frozen=True)
class Value:
    """A named SSA value with its static type."""

    name: str
    type: TensorType


@dataclass(frozen=True)
class Inst:
    """`results = op(args)`, with sub-graphs in `blocks` for control-flow ops."""

    op: Op
    args: tuple[str, ...]
    results: tuple[Value, ...]
    blocks: tuple[Graph, ...] = ()

    @property
    def result_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.results)


@dataclass(frozen=True)
class Graph:
    name: str
    inputs: tuple[Value, ...]
    insts: tuple[Inst, ...]
    outputs: tuple[str, ...]
    params: tuple[Value, ...] = field(default=())

    # ---- queries (this level only unless said otherwise) --------------------------------------
    def types(self) -> dict[str, TensorType]:
        """Every value defined at this level (inputs, params, results) -> its type."""
        out = {v.name: v.type for v in (*self.inputs, *self.params)}
        for inst in self.insts:
            out.update((r.name, r.type) for r in inst.results)
        return out

    def output_types(self) -> list[TensorType]:
        t = self.types()
        return [t[o] for o in self.outputs]

    def users(self, name: str) -> list[int]:
        """Indices of instructions at this level that read `name`."""
        return [i for i, inst in enumerate(self.insts) if name in inst.args]

    def walk(self, depth: int = 0) -> Iterator[tuple[Inst, int]]:
        """Every instruction, nested ones included, with its nesting depth (0 = top level)."""
        for inst in self.insts:
            yield inst, depth
            for block in inst.blocks:
                yield from block.walk(depth + 1)

    def num_insts(self) -> int:
        """Instruction count with nested instructions counted (the reducer's main size)."""
        return sum(1 for _ in self.walk())

    def max_depth(self) -> int:
        return max((d + 1 for inst, d in self.walk() if inst.blocks), default=0)

    def op_counts(self) -> Counter[str]:
        return Counter(inst.op.name for inst, _ in self.walk())

    def all_values(self) -> Iterator[Value]:
        """Every value defined anywhere in the graph, nested bodies included."""
        yield from self.inputs
        yield from self.params
        for inst in self.insts:
            yield from inst.results
            for block in inst.blocks:
                yield from block.all_values()

    @property
    def is_concrete(self) -> bool:
        return all(v.type.is_concrete for v in self.all_values()) and all(
            inst.op.is_concrete for inst, _ in self.walk()
        )

    def with_insts(self, insts: Iterable[Inst], outputs: Iterable[str] | None = None) -> Graph:
        return replace(
            self, insts=tuple(insts), outputs=self.outputs if outputs is None else tuple(outputs)
        )
