"""Body calls: the ops whose one body is a function called once on the operands.

    results = <op>[label, ...](operands) { body(operands...) -> (new contents..., results...) }

Two ops are body calls: a custom operator (`ir.ops.custom`: the body is a registered kernel
that may overwrite operands) and a compile region (`ir.ops.region`: the body is a
`torch.compiler.nested_compile_region` function). `BodyCall` owns what they share: the body
binds the operands one to one; its first `len(written)` outputs are the new contents of the
operands named by `written` (ascending operand indices; empty for an op that writes nothing),
the rest are the results; pruning, threading and inlining follow from that. A subclass says
which instructions its body may hold (`body_problem`) and how it is materialized.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import BuildBlock, Signature
from ir.core.text import print_graph
from ir.core.types import TensorType
from ir.ops.control import ControlFlow, Inlining, KeepOutputs, Relation, reads, types_text

if TYPE_CHECKING:
    from ir.core.onnx_builder import OnnxBuilder

#: the ONNX domain of the model-local functions a body call lowers to
ONNX_DOMAIN = "dynsmith"


@dataclass(frozen=True)
class BodyCall(ControlFlow):
    """An instruction calling its one body on its operands (the module doc)."""

    arity: ClassVar[tuple[int, int]] = (1, 64)
    generic: ClassVar[bool] = False
    inlining_names: ClassVar[tuple[str, ...]] = ("its body in place",)
    #: its body is straight-line pure code: a mutation scope only for mutators that keep it
    #: so (`mutators.scope.Scope.kernel`)
    kernel_body: ClassVar[bool] = True

    label: str = "k0"

    @property
    def written(self) -> tuple[int, ...]:
        """The operands whose storage the op overwrites with its body's first outputs."""
        return ()

    def with_written(self, written: tuple[int, ...]) -> BodyCall:
        """The op writing operands `written` instead (pruning renumbers them)."""
        assert not written, f"{self.name} writes no operand"
        return self

    def body_problem(self, inst: Inst) -> str | None:
        """Why `inst` may not be in this op's body (None: it may)."""
        raise NotImplementedError

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return []  # any dtypes: the body's

    def result_dtypes(self, in_dtypes: tuple[DType, ...]) -> tuple[DType, ...] | None:
        return ()

    def check_blocks(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> str | None:
        if len(blocks) != 1:
            return f"expects 1 body, got {len(blocks)}"
        (body,) = blocks
        takes = [v.type for v in body.inputs]
        if takes != list(ins):
            return f"body takes {types_text(takes)} but the operands are {types_text(ins)}"
        outs = body.output_types()
        new = [ins[k] for k in self.written]
        if outs[:len(new)] != new:
            return (f"body returns {types_text(outs)} but must return the new contents of the "
                    f"mutated operands {types_text(new)} first")
        for inst in body.insts:
            why = self.body_problem(inst)
            if why is not None:
                return why
        return None

    def infer_inst(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> list[TensorType]:
        return blocks[0].output_types()[len(self.written):] if blocks else []

    # ---- binding ----------------------------------------------------------------------------
    def body_inputs(self, ins: Sequence[TensorType], n_blocks: int) -> list[list[TensorType]]:
        return [list(ins)]

    def passed_operand(self, block: int, i: int) -> int | None:
        return i

    def operand_inputs(self, pos: int) -> list[tuple[int, int]]:
        return [(0, pos)]

    def relate(self, ins: Sequence[TensorType], body_outs: Sequence[Sequence[TensorType]],
               rel: Relation) -> list[TensorType]:
        (outs,) = body_outs
        m = len(self.written)
        rel.same(outs[:m], [ins[k] for k in self.written])
        return list(outs[m:])

    # ---- pruning and threading ----------------------------------------------------------------
    def prune(self, inst: Inst, used: set[int], keep_outputs: KeepOutputs) -> Inst:
        m = len(self.written)
        keep = sorted(used)
        body = keep_outputs(inst.blocks[0], [*range(m), *(m + j for j in keep)])
        read = reads(body)
        operands = [k for k in range(len(inst.args))
                    if k in self.written or body.inputs[k].name in read]
        body = replace(body, inputs=tuple(body.inputs[k] for k in operands))
        op = self.with_written(tuple(operands.index(k) for k in self.written))
        return Inst(op, tuple(inst.args[k] for k in operands),
                    tuple(inst.results[j] for j in keep), (body,))

    def add_operands(self, inst: Inst, block: int, inner: Sequence[Value], outer: Sequence[str],
                     fresh: Callable[[str], str]) -> Inst:
        b = inst.blocks[0]
        return replace(inst, args=inst.args + tuple(outer),
                       blocks=(replace(b, inputs=b.inputs + tuple(inner)),))

    def inlinings(self, inst: Inst, ins: Sequence[TensorType]) -> list[Inlining]:
        if self.written:  # the writes would be lost (the mutators' unwrap adds copy_ for them)
            return []
        return [Inlining("its body in place", 0, tuple((i, None) for i in range(len(ins))),
                         tuple((j, None) for j in range(len(inst.results))))]

    def exact_inlining(self, inst: Inst, ins: Sequence[TensorType], ran: Sequence[int]
                       ) -> Inlining | None:
        ways = self.inlinings(inst, ins)
        return ways[0] if ways else None

    # ---- naming and ONNX ----------------------------------------------------------------------
    def digest(self, body: Graph) -> str:
        """12 hex chars naming one distinct (op, body) pair."""
        text = f"{self.name}|{self.attrs()}|{print_graph(body)}"
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def function_name(self, body: Graph) -> str:
        """The ONNX local function the body lowers to."""
        return f"{self.label}_{self.digest(body)}"

    def onnx_call(self, b: OnnxBuilder, ins: list[str], outs: list[str], blocks: Sequence[Graph],
                  build_block: BuildBlock) -> None:
        from onnx import helper

        from ir.core.onnx_builder import OPSET

        assert not self.written, "ONNX is built from the functionalized graph"
        (body,) = blocks
        fname = self.function_name(body)
        if fname not in b.functions:
            g = build_block(body)
            b.functions[fname] = helper.make_function(
                ONNX_DOMAIN, fname, [i.name for i in g.input], [o.name for o in g.output],
                list(g.node), [helper.make_opsetid("", OPSET),
                               helper.make_opsetid(ONNX_DOMAIN, 1)])  # a call in the body
        b.node(fname, list(ins), outs, domain=ONNX_DOMAIN)
