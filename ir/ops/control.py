"""Control-flow ops: instructions whose bodies are closed sub-graphs (`Inst.blocks`).

`loop(trip, carried...) { body(i, carried...) }`: see `Loop`.
`scan(init..., xs...) { body(carry..., x_t...) }`: see `Scan`.

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


def _hop(call):
    """Run a torch higher-order-op call. Called eagerly (not under Dynamo), torch compiles the
    op with Dynamo, whose automatic dynamic shapes make every call after one with other shapes
    symbolic; then a `torch.cond` whose branches differ symbolically (`c` vs `c[0:8]`) yields
    an unbacked size that an enclosing `torch.while_loop` rejects as a carried shape change, on
    a valid program that ran fine before (minimal reproducer in tests/ir/test_control.py).
    Eager calls therefore keep static shapes; under Dynamo (torch.compile) the op is traced
    as the compiler decides."""
    import torch

    if torch.compiler.is_compiling():
        return call()
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        return call()


def _fresh(ts) -> tuple:
    """Copies with contiguous strides: what torch's higher-order ops need at their boundaries
    (no aliasing between operands or of outputs to inputs; carried metadata, strides included,
    equal between the inputs and the body's outputs)."""
    import torch

    return tuple(t.clone(memory_format=torch.contiguous_format) for t in ts)


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
            return _single(list(_hop(lambda: torch.cond(pred, branch(then_g), branch(else_g), fresh))))
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

            # carried inputs must match the body's outputs in strides too: a plain clone keeps a
            # slice's strides (e.g. (280,56,7,1) for a [1,3,8,7] view), so force contiguous ones
            start = torch.zeros((), dtype=torch.int64)
            final = _hop(lambda: torch.while_loop(cond_fn, body_fn,
                                                 (start, trip.clone(), *_fresh(carried))))
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


@dataclass(frozen=True)
class Scan(Op):
    """`carry..., ys... = scan[num_carries=n, reverse=r](init..., xs...) { body }`: the RNN
    shape. The first `num_carries` (>= 1) operands are the initial carries, the rest (>= 1) the
    scanned sequences, all of rank >= 1 with one length L along axis 0. The body maps
    `(carry..., x_t...)` to `(carry'..., y_t...)`, where x_t is xs[t] (the type of xs without
    axis 0); carried types are invariant. It runs for t = 0..L-1 (L-1..0 when `reverse`); the
    results are the final carries, then each y stacked along a new axis 0 with ys[t] the y_t
    computed from xs[t] (in either direction, as torch's scan and ONNX Scan with reversed
    output direction do). Zero scanned outputs are allowed; zero carries are not (torch's scan
    requires init leaves).

    Length 0 is not expressible: every GraphIR dim is >= 1 (the verifier's rule), so L >= 1 and
    the final carry is always a body result, never the init passed through.

    torch dialects: "python" (a `for` over the L steps, `torch.stack` of the y_t) and "hop"
    (`torch._higher_order_ops.scan.scan`, dim 0, `reverse`; copies at the boundary as for
    `If`); ONNX `Scan` (opset 18: `num_scan_inputs`, directions 1 in and out when reversed)."""

    name: ClassVar[str] = "scan"
    family: ClassVar[str] = "control"
    arity: ClassVar[tuple[int, int]] = (2, 64)
    num_results: ClassVar[None] = None
    takes_blocks: ClassVar[bool] = True

    num_carries: int = 1
    reverse: bool = False

    @classmethod
    def signatures(cls, n_inputs):
        return []  # any dtypes; see result_dtypes

    def result_dtypes(self, in_dtypes):
        return ()

    def _split(self, ins):
        return list(ins[:self.num_carries]), list(ins[self.num_carries:])

    def operand_problem(self, ins: Sequence[TensorType]) -> str | None:
        """Why the operands do not fit `num_carries` (None: they fit)."""
        if self.num_carries < 1:
            return f"num_carries is {self.num_carries}: a scan needs at least 1 carry"
        if len(ins) <= self.num_carries:
            return (f"{len(ins)} operands for {self.num_carries} carries: a scan needs at least "
                    f"1 scanned operand after its carries")
        _, xs = self._split(ins)
        for i, t in enumerate(xs):
            if t.rank == 0:
                return f"scanned operand {i} has type {t}: it needs rank >= 1"
        lengths = sorted({t.shape[0] for t in xs})
        if len(lengths) > 1:
            return (f"scanned operands have lengths {', '.join(map(str, lengths))} along axis 0: "
                    f"they must match")
        return None

    def check_blocks(self, ins, blocks):
        problem = self.operand_problem(ins)
        if problem:
            return problem
        if len(blocks) != 1:
            return f"expects 1 body, got {len(blocks)}"
        (body,) = blocks
        carries, xs = self._split(ins)
        wants = [*carries, *(TensorType(tuple(t.shape[1:]), t.dtype) for t in xs)]
        takes = [v.type for v in body.inputs]
        if takes != wants:
            return (f"body takes {_types(takes)} but must take the carries and the scanned "
                    f"slices {_types(wants)}")
        outs = body.output_types()
        if outs[:len(carries)] != carries:
            return (f"body returns {_types(outs)} but must return the carries "
                    f"{_types(carries)} first")
        return None

    def infer_inst(self, ins, blocks):
        if not blocks or self.operand_problem(ins):
            return []
        carries, xs = self._split(ins)
        length = xs[0].shape[0]
        ys = blocks[0].output_types()[len(carries):]
        return [*carries, *(TensorType((length, *t.shape), t.dtype) for t in ys)]

    def torch_call(self, args, blocks, run_block, dialect="python"):
        import torch

        carries, xs = self._split(args)
        (body,) = blocks
        n = len(carries)
        if dialect == "hop":
            from torch._higher_order_ops.scan import scan

            def combine(carry, x):
                outs = run_block(body, [*carry, *x])
                return _fresh(outs[:n]), _fresh(outs[n:])

            final, ys = _hop(lambda: scan(combine, _fresh(carries), _fresh(xs), dim=0,
                                         reverse=self.reverse))
            return _single([*final, *ys])
        length = xs[0].shape[0]
        steps: list = []
        order = range(length - 1, -1, -1) if self.reverse else range(length)
        for t in order:
            outs = run_block(body, [*carries, *(x[t] for x in xs)])
            carries = list(outs[:n])
            steps.append(outs[n:])
        if self.reverse:
            steps.reverse()
        n_ys = len(body.outputs) - n
        ys = [torch.stack([step[k] for step in steps]) for k in range(n_ys)]
        return _single([*carries, *ys])

    def onnx_call(self, b, ins, outs, blocks, build_block):
        carries, xs = self._split(ins)
        n_ys = len(outs) - len(carries)
        attrs = {"num_scan_inputs": len(xs)}
        if self.reverse:
            attrs["scan_input_directions"] = [1] * len(xs)
            if n_ys:
                attrs["scan_output_directions"] = [1] * n_ys
        b.node("Scan", list(ins), outs, body=build_block(blocks[0]), **attrs)
