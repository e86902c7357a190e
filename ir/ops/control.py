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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Protocol, TypeGuard, TypeVar, cast

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import BuildBlock, Op, RunBlock, Signature
from ir.core.types import TensorType

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder


_T = TypeVar("_T")


def types_text(ts: Sequence[TensorType]) -> str:
    """`(f32[2], i64[])`: a signature in messages."""
    return "(" + ", ".join(str(t) for t in ts) + ")"


def _single(out: list) -> Any:
    return out[0] if len(out) == 1 else out


def _hop(call: Callable[[], Any]) -> Any:
    """Run a torch higher-order-op call. Called eagerly (not under Dynamo), torch compiles the
    op with Dynamo, whose automatic dynamic shapes make every call after one with other shapes
    symbolic; then a `torch.cond` whose branches differ symbolically (`c` vs `c[0:8]`) yields
    an unbacked size that an enclosing `torch.while_loop` rejects as a carried shape change, on
    a valid program that ran fine before (minimal reproducer in tests/ir/ops/test_control.py).
    Eager calls therefore keep static shapes; under Dynamo (torch.compile) the op is traced
    as the compiler decides."""
    import torch

    if torch.compiler.is_compiling():
        return call()
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        return call()


def _fresh(ts: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """Copies with contiguous strides: what torch's higher-order ops need at their boundaries
    (no aliasing between operands or of outputs to inputs; carried metadata, strides included,
    equal between the inputs and the body's outputs)."""
    import torch

    return tuple(t.clone(memory_format=torch.contiguous_format) for t in ts)


class Relation(Protocol):
    """How a caller of `ControlFlow.relate` states the constraints between operands and body
    results: checked at once on concrete types, collected as z3 terms on symbolic ones."""

    def same(self, a: Sequence[TensorType], b: Sequence[TensorType]) -> None:
        """The two signatures are equal (dims compared with `eq`)."""

    def eq(self, a: Any, b: Any) -> None:
        """The two dims (ints or z3 terms) are equal."""

    def fail(self, why: str) -> NoReturn:
        """The operands cannot fit the op at all."""


#: a body with only the given outputs kept (their indices), dead code removed: how a caller
#: of `ControlFlow.prune` prunes inside bodies
KeepOutputs = Callable[[Graph, Sequence[int]], Graph]


@dataclass(frozen=True)
class Inlining:
    """One way to replace a control-flow instruction by straight-line code in its place, which
    is what the reducer's `unwrap_control` pass makes of it (`ControlFlow.inlinings`): body
    `body` run once where the instruction was (None: no body runs).

    `inputs`, one per input of that body: the operand whose value it binds and the op applied
    to it first (a scan's slice: `squeeze(axis=0)` of a length-1 sequence), or operand None: a
    value the op makes (a loop's counter), a new graph input holding zeros of its type (so only
    at the top level, when the body reads it). `results`, one per result: the index of the
    body output it is (of the operand it is, when no body runs) and the op applied to it (a
    scan's stacked y: `unsqueeze(axis=0)`)."""

    desc: str
    body: int | None
    inputs: tuple[tuple[int | None, Op | None], ...]
    results: tuple[tuple[int, Op | None], ...]


def is_control(op: Op) -> TypeGuard[ControlFlow]:
    """Whether `op` follows the control-flow protocol (holds bodies)."""
    return isinstance(op, ControlFlow)


def holds_choice(g: Graph) -> bool:
    """Whether an instruction of `g`, at any depth, chooses which body runs (an `if`)."""
    return any(is_control(inst.op) and inst.op.chooses_body for inst, _ in g.walk())


def reads(body: Graph) -> set[str]:
    """The names `body` reads: its instructions' operands and its outputs."""
    used = set(body.outputs)
    for inst in body.insts:
        used.update(inst.args)
    return used


@dataclass(frozen=True)
class ControlFlow(Op):
    """The control-flow op protocol: an op whose instructions hold bodies (`Inst.blocks`,
    closed sub-graphs) owns every rule about how its operands, bodies and results relate, so a
    pass asks the op and never tests its name (JAX's per-primitive rule tables are the model).
    docs/architecture.md lists what a new control-flow op implements.

    Positions: an operand is an index into `Inst.args`, a body input an index into
    `blocks[k].inputs`, a body output an index into `blocks[k].outputs`."""

    family: ClassVar[str] = "control"
    num_results: ClassVar[None] = None
    takes_blocks: ClassVar[bool] = True
    exact: ClassVar[bool] = True  # the results are the bodies'
    torch_may_alias: ClassVar[bool] = True  # a body may return its input
    #: a predicate chooses which one body runs (coverage counts the bodies taken); otherwise
    #: the body runs a number of times (coverage counts the trip counts)
    chooses_body: ClassVar[bool] = False
    #: the body runs repeatedly, its inputs fed back from its outputs (`carried_output`)
    iterates: ClassVar[bool] = False
    #: the operand holding a data-dependent trip count (None: the op has none)
    trip_operand: ClassVar[int | None] = None
    #: the torch higher-order op the `hop` dialect calls for it (what a localization names
    #: when the program fails without torch.compile)
    torch_hop: ClassVar[str] = ""

    # ---- binding: what the bodies take -------------------------------------------------------
    def body_inputs(self, ins: Sequence[TensorType], n_blocks: int) -> list[list[TensorType]]:
        """The types each body binds, given the operand types."""
        raise NotImplementedError

    def passed_operand(self, block: int, i: int) -> int | None:
        """The operand whose value body input `i` of body `block` receives unchanged when the
        body starts (None: a value the op makes, a counter or a slice)."""
        raise NotImplementedError

    def operand_inputs(self, pos: int) -> list[tuple[int, int]]:
        """The (body, body input) pairs operand `pos` is passed into unchanged: the inverse of
        `passed_operand` (empty: the op reads it as a predicate, trip count or sequence)."""
        raise NotImplementedError

    def carried_output(self, i: int) -> int | None:
        """The body output fed back into body input `i` at the next step (None: not carried)."""
        return None

    def passthrough_operand(self, result: int) -> int | None:
        """The operand that result `result` equals when no body runs (a loop at zero trips);
        None: a body always computes it."""
        return None

    # ---- typing: the constraints between operands and body results ---------------------------
    def relate(self, ins: Sequence[TensorType], body_outs: Sequence[Sequence[TensorType]],
               rel: Relation) -> list[TensorType]:
        """The result types, given the operand types and each body's output types, stating
        through `rel` the constraints between them (over ints and z3 dims alike)."""
        raise NotImplementedError

    def sequence_length(self, ins: Sequence[TensorType]) -> Any:
        """The number of steps fixed by the operands' shapes (a scan's length), which a
        generator bounds; None when the op has none."""
        return None

    # ---- pruning and threading ---------------------------------------------------------------
    def prune(self, inst: Inst, used: set[int], keep_outputs: KeepOutputs) -> Inst:
        """`inst` keeping only the results in `used` (and what they need: a carried value a
        kept one reads), with the operands no body reads any more dropped."""
        raise NotImplementedError

    def add_operands(self, inst: Inst, block: int, inner: Sequence[Value],
                     outer: Sequence[str], fresh: Callable[[str], str]) -> Inst:
        """`inst` passing outer values `outer` into body `block`, where it reads them as
        `inner` (new body inputs, not yet declared in the body): one more operand each, or one
        more carried value the body returns unchanged (a result nobody reads)."""
        raise NotImplementedError

    #: the `Inlining.desc` of every way `inlinings` may offer (a note's cause names one)
    inlining_names: ClassVar[tuple[str, ...]] = ()

    def inlinings(self, inst: Inst, ins: Sequence[TensorType]) -> list[Inlining]:
        """The ways to replace `inst` (operand types `ins`) by straight-line code: one body run
        once, or none (see `Inlining`), each equal to the instruction on some inputs. Empty:
        none."""
        return []

    def exact_inlining(self, inst: Inst, ins: Sequence[TensorType], ran: Sequence[int]
                       ) -> Inlining | None:
        """The inlining (of `inlinings`) equal to `inst` on a run that ran bodies `ran`, in
        order (an if: `[1]`, its else; a loop: `[0]` per trip; `ir.numerics.domain`'s control
        trace), or None when no inlining is. What a cause probe takes out
        (`ir.shrink.take_out`): a loop that ran zero trips is its zero-trip inlining."""
        return None

    # ---- explore: bodies these inputs do not run ---------------------------------------------
    #: some inputs run a body not at all (an if's other branch, a loop at zero trips)
    may_skip_bodies: ClassVar[bool] = False

    def unexplored(self, args: Sequence[Any]) -> list[tuple[int, list, str]]:
        """The bodies these concrete operands (torch tensors) do not run, each with the values
        it would bind and a note for messages: the validity check runs them too, so a value
        that is invalid only on a path not taken is still caught."""
        return []


@dataclass(frozen=True)
class If(ControlFlow):
    name: ClassVar[str] = "if"
    torch_hop: ClassVar[str] = "torch.cond"
    arity: ClassVar[tuple[int, int]] = (1, 64)
    chooses_body: ClassVar[bool] = True
    may_skip_bodies: ClassVar[bool] = True
    inlining_names: ClassVar[tuple[str, ...]] = ("its then branch", "its else branch")

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return []  # any operand dtypes after a bool predicate; see result_dtypes

    def result_dtypes(self, in_dtypes: tuple[DType, ...]) -> tuple[DType, ...] | None:
        return () if in_dtypes and in_dtypes[0] is DType.bool else None

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [ins[0].rank == 0]

    def infer_inst(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> list[TensorType]:
        return blocks[0].output_types() if blocks else []

    def check_blocks(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> str | None:
        if len(blocks) != 2:
            return f"expects 2 bodies (then, else), got {len(blocks)}"
        operands = list(ins[1:])
        for body in blocks:
            takes = [v.type for v in body.inputs]
            if takes != operands:
                return f"body {body.name} takes {types_text(takes)} but the operands are {types_text(operands)}"
        if blocks[0].output_types() != blocks[1].output_types():
            return (f"bodies return {types_text(blocks[0].output_types())} and "
                    f"{types_text(blocks[1].output_types())}: they must match")
        return None

    def body_inputs(self, ins: Sequence[TensorType], n_blocks: int) -> list[list[TensorType]]:
        return [list(ins[1:]) for _ in range(n_blocks)]

    def passed_operand(self, block: int, i: int) -> int | None:
        return 1 + i

    def operand_inputs(self, pos: int) -> list[tuple[int, int]]:
        return [(0, pos - 1), (1, pos - 1)] if pos >= 1 else []

    def relate(self, ins: Sequence[TensorType], body_outs: Sequence[Sequence[TensorType]],
               rel: Relation) -> list[TensorType]:
        a, b = body_outs
        rel.same(a, b)
        return list(a)

    def prune(self, inst: Inst, used: set[int], keep_outputs: KeepOutputs) -> Inst:
        keep = sorted(used)
        bodies = [keep_outputs(b, keep) for b in inst.blocks]
        operands = [k for k in range(len(inst.args) - 1)
                    if any(b.inputs[k].name in reads(b) for b in bodies)]
        bodies = [replace(b, inputs=tuple(b.inputs[k] for k in operands)) for b in bodies]
        args = (inst.args[0], *(inst.args[k + 1] for k in operands))
        return Inst(inst.op, args, tuple(inst.results[k] for k in keep), tuple(bodies))

    def add_operands(self, inst: Inst, block: int, inner: Sequence[Value], outer: Sequence[str],
                     fresh: Callable[[str], str]) -> Inst:
        # the other body gets inputs of its own, unused
        blocks = list(inst.blocks)
        for j, b in enumerate(blocks):
            extra = tuple(inner) if j == block else tuple(Value(fresh("b"), v.type) for v in inner)
            blocks[j] = replace(b, inputs=b.inputs + extra)
        return replace(inst, args=inst.args + tuple(outer), blocks=tuple(blocks))

    def inlinings(self, inst: Inst, ins: Sequence[TensorType]) -> list[Inlining]:
        # each branch in its place (it takes operands 1..; the results are its outputs)
        return [Inlining(f"its {which} branch", k,
                         tuple((1 + i, None) for i in range(len(inst.blocks[k].inputs))),
                         tuple((j, None) for j in range(len(inst.results))))
                for k, which in ((0, "then"), (1, "else"))]

    def exact_inlining(self, inst: Inst, ins: Sequence[TensorType], ran: Sequence[int]
                       ) -> Inlining | None:
        return self.inlinings(inst, ins)[ran[0]] if len(ran) == 1 else None

    def unexplored(self, args: Sequence[Any]) -> list[tuple[int, list, str]]:
        taken = 0 if bool(args[0]) else 1
        return [(k, list(args[1:]), "not taken") for k in (0, 1) if k != taken]

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        pred, *operands = args
        then_g, else_g = blocks
        if dialect == "hop":
            import torch

            def branch(body: Graph) -> Callable[..., tuple[Tensor, ...]]:
                # torch.cond forbids returning an alias of an operand and wants both branches'
                # outputs to agree in strides too: return fresh contiguous tensors
                def fn(*xs: Tensor) -> tuple[Tensor, ...]:
                    return tuple(t.clone(memory_format=torch.contiguous_format)
                                 for t in run_block(body, list(xs)))
                return fn

            # ... and operands that alias one another (a view and its base): pass copies
            fresh = tuple(t.clone() for t in operands)
            return _single(list(_hop(lambda: torch.cond(pred, branch(then_g), branch(else_g), fresh))))
        return _single(run_block(then_g if bool(pred) else else_g, operands))

    def onnx_call(self, b: OnnxBuilder, ins: list[str], outs: list[str], blocks: Sequence[Graph],
                  build_block: BuildBlock) -> None:
        pred, *operands = ins
        b.node("If", [pred], outs, then_branch=build_block(blocks[0], bind=operands),
               else_branch=build_block(blocks[1], bind=operands))


MAX_TRIPS = 8


@dataclass(frozen=True)
class Loop(ControlFlow):
    """`results = loop(trip, carried...) { body(i, carried...) -> carried... }`: runs the body
    `trip` times (0 allowed), `i` counting from 0; carried types are invariant. `trip` is an
    int64 scalar from data, kept in [0, MAX_TRIPS] by the op's domain.

    torch dialects: "python" (a `for` over `range(int(trip))`) and "hop" (`torch.while_loop`
    with the counter carried); the counter is a 0-d int64 tensor, or a Python int (a SymInt
    when traced) in the `number` scalars form; ONNX `Loop` with an empty condition input (its body gets and
    returns the condition, passed through)."""

    name: ClassVar[str] = "loop"
    torch_hop: ClassVar[str] = "torch.while_loop"
    arity: ClassVar[tuple[int, int]] = (2, 64)
    iterates: ClassVar[bool] = True
    trip_operand: ClassVar[int | None] = 0
    may_skip_bodies: ClassVar[bool] = True
    inlining_names: ClassVar[tuple[str, ...]] = ("zero trips", "its body once")

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return []

    def result_dtypes(self, in_dtypes: tuple[DType, ...]) -> tuple[DType, ...] | None:
        return () if in_dtypes and in_dtypes[0] is DType.int64 else None

    def requires(self, ins: Sequence[TensorType]) -> list:
        return [ins[0].rank == 0]

    def infer_inst(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> list[TensorType]:
        return list(ins[1:])

    def check_blocks(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> str | None:
        if len(blocks) != 1:
            return f"expects 1 body, got {len(blocks)}"
        (body,) = blocks
        takes = [v.type for v in body.inputs]
        wants = [TensorType((), DType.int64), *ins[1:]]
        if takes != wants:
            return (f"body takes {types_text(takes)} but must take the counter and the carried "
                    f"values {types_text(wants)}")
        if body.output_types() != list(ins[1:]):
            return f"body returns {types_text(body.output_types())} but carries {types_text(ins[1:])}"
        return None

    def body_inputs(self, ins: Sequence[TensorType], n_blocks: int) -> list[list[TensorType]]:
        return [[TensorType((), DType.int64), *ins[1:]]]

    def passed_operand(self, block: int, i: int) -> int | None:
        return i if i >= 1 else None  # input 0 is the trip counter

    def operand_inputs(self, pos: int) -> list[tuple[int, int]]:
        return [(0, pos)] if pos >= 1 else []

    def carried_output(self, i: int) -> int | None:
        return i - 1 if i >= 1 else None

    def passthrough_operand(self, result: int) -> int | None:
        return result + 1

    def relate(self, ins: Sequence[TensorType], body_outs: Sequence[Sequence[TensorType]],
               rel: Relation) -> list[TensorType]:
        rel.same(body_outs[0], list(ins[1:]))
        return list(ins[1:])

    def prune(self, inst: Inst, used: set[int], keep_outputs: KeepOutputs) -> Inst:
        (body,) = inst.blocks
        n = len(inst.results)
        keep = set(used)
        while True:  # a carry stays if its result is read or a kept carry's update reads it
            pruned = keep_outputs(body, sorted(keep))
            read = reads(pruned)
            more = {j for j in range(n) if j not in keep and body.inputs[j + 1].name in read}
            if not more:
                break
            keep |= more
        order = sorted(keep)
        pruned = replace(pruned, inputs=(body.inputs[0], *(body.inputs[j + 1] for j in order)))
        args = (inst.args[0], *(inst.args[j + 1] for j in order))
        return Inst(inst.op, args, tuple(inst.results[j] for j in order), (pruned,))

    def add_operands(self, inst: Inst, block: int, inner: Sequence[Value], outer: Sequence[str],
                     fresh: Callable[[str], str]) -> Inst:
        b = inst.blocks[0]
        body = replace(b, inputs=b.inputs + tuple(inner),
                       outputs=b.outputs + tuple(v.name for v in inner))
        results = inst.results + tuple(Value(fresh("v"), v.type) for v in inner)
        return replace(inst, args=inst.args + tuple(outer), results=results, blocks=(body,))

    def inlinings(self, inst: Inst, ins: Sequence[TensorType]) -> list[Inlining]:
        n = len(inst.results)
        zero = Inlining("zero trips", None, (),
                        tuple((cast(int, self.passthrough_operand(j)), None) for j in range(n)))
        once = Inlining("its body once", 0, ((None, None), *((1 + j, None) for j in range(n))),
                        tuple((j, None) for j in range(n)))
        return [zero, once]

    def exact_inlining(self, inst: Inst, ins: Sequence[TensorType], ran: Sequence[int]
                       ) -> Inlining | None:
        # the counter of the one trip is 0: the zeros "its body once" binds
        return self.inlinings(inst, ins)[len(ran)] if len(ran) <= 1 else None

    def unexplored(self, args: Sequence[Any]) -> list[tuple[int, list, str]]:
        import torch

        if int(args[0]) != 0:
            return []
        return [(0, [torch.zeros((), dtype=torch.int64), *args[1:]], "not run")]

    def domain(self, trip: Tensor, *carried: Tensor) -> list[Tensor]:
        import torch

        t = trip.to(torch.float32)
        return [torch.relu(-t) + torch.relu(t - MAX_TRIPS)]

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        import torch

        trip, *carried = args
        (body,) = blocks
        if dialect == "hop":
            def cond_fn(i: Tensor, n: Tensor, *vs: Tensor) -> Tensor:
                return i < n

            def body_fn(i: Tensor, n: Tensor, *vs: Tensor) -> tuple[Tensor, ...]:
                outs = run_block(body, [i, *vs])
                return (i + 1, n.clone(), *(t.clone(memory_format=torch.contiguous_format) for t in outs))

            # carried inputs must match the body's outputs in strides too: a plain clone keeps a
            # slice's strides (e.g. (280,56,7,1) for a [1,3,8,7] view), so force contiguous ones.
            # The counter: a 0-d tensor, or (numbers) a Python int carried, a SymInt when traced
            start: Any = 0 if numbers else torch.zeros((), dtype=torch.int64)
            final = _hop(lambda: torch.while_loop(cond_fn, body_fn,
                                                 (start, trip.clone(), *_fresh(carried))))
            return _single(list(final[2:]))
        for i in range(int(trip)):
            counter: Any = i if numbers else torch.tensor(i, dtype=torch.int64)
            carried = run_block(body, [counter, *carried])
        return _single(list(carried))

    def onnx_call(self, b: OnnxBuilder, ins: list[str], outs: list[str], blocks: Sequence[Graph],
                  build_block: BuildBlock) -> None:
        from onnx import TensorProto, helper

        trip, *carried = ins
        body = build_block(blocks[0])
        cond_in, cond_out = b.fresh("cond_in"), b.fresh("cond_out")
        body.input.insert(1, helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []))
        body.node.append(helper.make_node("Identity", [cond_in], [cond_out], name=b.fresh("n")))
        body.output.insert(0, helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []))
        b.node("Loop", [trip, "", *carried], outs, body=body)


@dataclass(frozen=True)
class Scan(ControlFlow):
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

    inlining_names: ClassVar[tuple[str, ...]] = ("its body once (length 1)",)
    name: ClassVar[str] = "scan"
    torch_hop: ClassVar[str] = "torch._higher_order_ops.scan"
    arity: ClassVar[tuple[int, int]] = (2, 64)
    iterates: ClassVar[bool] = True

    num_carries: int = 1
    reverse: bool = False

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return []  # any dtypes; see result_dtypes

    def result_dtypes(self, in_dtypes: tuple[DType, ...]) -> tuple[DType, ...] | None:
        return ()

    def _split(self, ins: Sequence[_T]) -> tuple[list[_T], list[_T]]:
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

    def check_blocks(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> str | None:
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
            return (f"body takes {types_text(takes)} but must take the carries and the scanned "
                    f"slices {types_text(wants)}")
        outs = body.output_types()
        if outs[:len(carries)] != carries:
            return (f"body returns {types_text(outs)} but must return the carries "
                    f"{types_text(carries)} first")
        return None

    def body_inputs(self, ins: Sequence[TensorType], n_blocks: int) -> list[list[TensorType]]:
        carries, xs = self._split(ins)
        return [[*carries, *(TensorType(tuple(t.shape[1:]), t.dtype) for t in xs)]]

    def passed_operand(self, block: int, i: int) -> int | None:
        return i if i < self.num_carries else None  # then the slices x_t

    def operand_inputs(self, pos: int) -> list[tuple[int, int]]:
        return [(0, pos)] if pos < self.num_carries else []

    def carried_output(self, i: int) -> int | None:
        return i if i < self.num_carries else None

    def relate(self, ins: Sequence[TensorType], body_outs: Sequence[Sequence[TensorType]],
               rel: Relation) -> list[TensorType]:
        carries, xs = self._split(ins)
        if any(t.rank == 0 for t in xs):
            rel.fail("scanned operand of rank 0")
        (outs,) = body_outs
        rel.same(outs[:self.num_carries], carries)
        length = xs[0].shape[0]
        for t in xs[1:]:
            rel.eq(t.shape[0], length)
        return [*carries, *(TensorType((length, *t.shape), t.dtype) for t in outs[self.num_carries:])]

    def sequence_length(self, ins: Sequence[TensorType]) -> Any:
        return self._split(ins)[1][0].shape[0]

    def prune(self, inst: Inst, used: set[int], keep_outputs: KeepOutputs) -> Inst:
        (body,) = inst.blocks
        nc = self.num_carries
        n_xs = len(inst.args) - nc
        keep_c = {j for j in used if j < nc}
        keep_y = sorted(j - nc for j in used if j >= nc)
        while True:
            outs = sorted(keep_c) + [nc + j for j in keep_y]
            pruned = keep_outputs(body, outs)
            read = reads(pruned)
            more = {j for j in range(nc) if j not in keep_c and body.inputs[j].name in read}
            if not keep_c and not more:
                more = {0}  # a scan needs one carry
            if not more:
                break
            keep_c |= more
        cs = sorted(keep_c)
        xs = [k for k in range(n_xs) if body.inputs[nc + k].name in read] or [0]
        pruned = replace(pruned, inputs=(*(body.inputs[j] for j in cs),
                                         *(body.inputs[nc + k] for k in xs)))
        args = (*(inst.args[j] for j in cs), *(inst.args[nc + k] for k in xs))
        results = (*(inst.results[j] for j in cs), *(inst.results[nc + j] for j in keep_y))
        op = replace(self, num_carries=len(cs)) if len(cs) != nc else self
        return Inst(op, args, results, (pruned,))

    def add_operands(self, inst: Inst, block: int, inner: Sequence[Value], outer: Sequence[str],
                     fresh: Callable[[str], str]) -> Inst:
        nc = self.num_carries
        b = inst.blocks[0]
        body = replace(b, inputs=b.inputs[:nc] + tuple(inner) + b.inputs[nc:],
                       outputs=b.outputs[:nc] + tuple(v.name for v in inner) + b.outputs[nc:])
        results = (inst.results[:nc] + tuple(Value(fresh("v"), v.type) for v in inner)
                   + inst.results[nc:])
        return Inst(replace(self, num_carries=nc + len(inner)),
                    inst.args[:nc] + tuple(outer) + inst.args[nc:], results, (body,))

    def inlinings(self, inst: Inst, ins: Sequence[TensorType]) -> list[Inlining]:
        # length 1: the body once on the squeezed slices, the ys unsqueezed
        _, xs = self._split(ins)
        if not xs or any(t.rank == 0 or t.shape[0] != 1 for t in xs):
            return []
        from ir.core.op import lookup_op

        squeeze, unsqueeze = lookup_op("squeeze")(axis=0), lookup_op("unsqueeze")(axis=0)  # type: ignore[call-arg]
        nc = self.num_carries
        return [Inlining("its body once (length 1)", 0,
                         tuple((k, None if k < nc else squeeze) for k in range(len(ins))),
                         tuple((j, None if j < nc else unsqueeze)
                               for j in range(len(inst.results))))]

    def exact_inlining(self, inst: Inst, ins: Sequence[TensorType], ran: Sequence[int]
                       ) -> Inlining | None:
        ways = self.inlinings(inst, ins)
        return ways[0] if ways and list(ran) == [0] else None

    def infer_inst(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> list[TensorType]:
        if not blocks or self.operand_problem(ins):
            return []
        carries, xs = self._split(ins)
        length = xs[0].shape[0]
        ys = blocks[0].output_types()[len(carries):]
        return [*carries, *(TensorType((length, *t.shape), t.dtype) for t in ys)]

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        import torch

        carries, xs = self._split(args)
        (body,) = blocks
        n = len(carries)
        if dialect == "hop":
            from torch._higher_order_ops.scan import scan

            def combine(carry: Sequence[Tensor], x: Sequence[Tensor]
                        ) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
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

    def onnx_call(self, b: OnnxBuilder, ins: list[str], outs: list[str], blocks: Sequence[Graph],
                  build_block: BuildBlock) -> None:
        carries, xs = self._split(ins)
        n_ys = len(outs) - len(carries)
        attrs: dict[str, int | list[int]] = {"num_scan_inputs": len(xs)}
        if self.reverse:
            attrs["scan_input_directions"] = [1] * len(xs)
            if n_ys:
                attrs["scan_output_directions"] = [1] * n_ys
        b.node("Scan", list(ins), outs, body=build_block(blocks[0]), **attrs)
