"""Control-flow ops: instructions whose bodies are closed sub-graphs (`Inst.blocks`).

`loop(trip, carried...) { body(i, carried...) }`: see `Loop`.

`if(pred, operands...) { then(...) else(...) }`: pred is a bool scalar computed from data; both
bodies take the operands (explicitly: a body sees only its own inputs) and return values of one
signature, which are the instruction's results.

Materialization: torch in two dialects that reach different compiler paths, "python" (plain
`if` on the predicate's value: Dynamo specializes or graph-breaks) and "hop" (`torch.cond`, a
higher-order op traced as a whole); ONNX `If`, whose bodies capture the operands by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ir.dtypes import DType
from ir.op import Op
from ir.types import TensorType


def _types(ts: Sequence[TensorType]) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"


def _single(out: list):
    return out[0] if len(out) == 1 else out


@dataclass(frozen=True)
class If(Op):
    name: ClassVar[str] = "if"
    family: ClassVar[str] = "control"
    arity: ClassVar[tuple[int, int]] = (1, 64)
    num_results: ClassVar[None] = None
    takes_blocks: ClassVar[bool] = True

    @classmethod
    def signatures(cls, n_inputs):
        return []  # any operand dtypes after a bool predicate; see result_dtypes

    def result_dtypes(self, in_dtypes):
        return () if in_dtypes and in_dtypes[0] is DType.bool else None

    def requires(self, ins):
        return [ins[0].rank == 0]

    def infer_inst(self, ins, blocks):
        return blocks[0].output_types() if blocks else []

    def check_blocks(self, ins, blocks):
        if len(blocks) != 2:
            return f"expects 2 bodies (then, else), got {len(blocks)}"
        operands = list(ins[1:])
        for body in blocks:
            takes = [v.type for v in body.inputs]
            if takes != operands:
                return f"body {body.name} takes {_types(takes)} but the operands are {_types(operands)}"
        if blocks[0].output_types() != blocks[1].output_types():
            return (f"bodies return {_types(blocks[0].output_types())} and "
                    f"{_types(blocks[1].output_types())}: they must match")
        return None

    def torch_call(self, args, blocks, run_block, dialect="python"):
        pred, *operands = args
        then_g, else_g = blocks
        if dialect == "hop":
            import torch

            def branch(body):
                # torch.cond forbids returning an alias of an operand and wants both branches'
                # outputs to agree in strides too: return fresh contiguous tensors
                def fn(*xs):
                    return tuple(t.clone(memory_format=torch.contiguous_format)
                                 for t in run_block(body, list(xs)))
                return fn

            # ... and operands that alias one another (a view and its base): pass copies
            fresh = tuple(t.clone() for t in operands)
            return _single(list(torch.cond(pred, branch(then_g), branch(else_g), fresh)))
        return _single(run_block(then_g if bool(pred) else else_g, operands))

    def onnx_call(self, b, ins, outs, blocks, build_block):
        pred, *operands = ins
        b.node("If", [pred], outs, then_branch=build_block(blocks[0], bind=operands),
               else_branch=build_block(blocks[1], bind=operands))


MAX_TRIPS = 8


@dataclass(frozen=True)
class Loop(Op):
    """`results = loop(trip, carried...) { body(i, carried...) -> carried... }`: runs the body
    `trip` times (0 allowed), `i` counting from 0; carried types are invariant. `trip` is an
    int64 scalar from data, kept in [0, MAX_TRIPS] by the op's domain.

    torch dialects: "python" (a `for` over `range(int(trip))`) and "hop" (`torch.while_loop`
    with the counter carried); ONNX `Loop` with an empty condition input (its body gets and
    returns the condition, passed through)."""

    name: ClassVar[str] = "loop"
    family: ClassVar[str] = "control"
    arity: ClassVar[tuple[int, int]] = (2, 64)
    num_results: ClassVar[None] = None
    takes_blocks: ClassVar[bool] = True

    @classmethod
    def signatures(cls, n_inputs):
        return []

    def result_dtypes(self, in_dtypes):
        return () if in_dtypes and in_dtypes[0] is DType.int64 else None

    def requires(self, ins):
        return [ins[0].rank == 0]

    def infer_inst(self, ins, blocks):
        return list(ins[1:])

    def check_blocks(self, ins, blocks):
        if len(blocks) != 1:
            return f"expects 1 body, got {len(blocks)}"
        (body,) = blocks
        takes = [v.type for v in body.inputs]
        wants = [TensorType((), DType.int64), *ins[1:]]
        if takes != wants:
            return f"body takes {_types(takes)} but must take the counter and the carried values {_types(wants)}"
        if body.output_types() != list(ins[1:]):
            return f"body returns {_types(body.output_types())} but carries {_types(ins[1:])}"
        return None

    def domain(self, trip, *carried):
        import torch

        t = trip.to(torch.float32)
        return [torch.relu(-t) + torch.relu(t - MAX_TRIPS)]

    def torch_call(self, args, blocks, run_block, dialect="python"):
        import torch

        trip, *carried = args
        (body,) = blocks
        if dialect == "hop":
            def cond_fn(i, n, *vs):
                return i < n

            def body_fn(i, n, *vs):
                outs = run_block(body, [i, *vs])
                return (i + 1, n.clone(), *(t.clone(memory_format=torch.contiguous_format) for t in outs))

            start = torch.zeros((), dtype=torch.int64)
            final = torch.while_loop(cond_fn, body_fn, (start, trip.clone(), *(t.clone() for t in carried)))
            return _single(list(final[2:]))
        for i in range(int(trip)):
            carried = run_block(body, [torch.tensor(i, dtype=torch.int64), *carried])
        return _single(list(carried))

    def onnx_call(self, b, ins, outs, blocks, build_block):
        from onnx import TensorProto, helper

        trip, *carried = ins
        body = build_block(blocks[0])
        cond_in, cond_out = b.fresh("cond_in"), b.fresh("cond_out")
        body.input.insert(1, helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []))
        body.node.append(helper.make_node("Identity", [cond_in], [cond_out], name=b.fresh("n")))
        body.output.insert(0, helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []))
        b.node("Loop", [trip, "", *carried], outs, body=body)
