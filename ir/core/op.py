"""The operator base class, its registry, and the attribute conventions every op follows.

An `Op` is a frozen dataclass whose fields are its attributes. It owns, for one operator:
  - its signatures (accepted input dtypes -> result dtypes) and input slots (ranks, param role);
  - `infer`: result types from input types (works on z3 shapes and on ints);
  - `requires`: the constraints under which the op is defined (z3 terms or Python bools);
  - `sample`: fresh attributes for the generator (numeric ones may be z3 terms);
  - materializers: `torch(*tensors)` and `onnx(builder, ins, outs)`.
Ops are registered by `name`, which is how the text form refers to them. Most are side-effect
free; the in-place and view ops (`ir/ops/inplace.py`, `ir/ops/views.py`) declare what they do to
memory in `Op.effect`, and `ir.analysis.inplace` (the in-place analysis, run by `ir.core.verify`) judges it.
"""
from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import z3

from ir.core.dtypes import DType
from ir.core.shapes import concretize, holds, is_symbolic
from ir.core.types import TensorType

if typing.TYPE_CHECKING:
    from ir.core.graph import Graph
    from ir.core.importing import Imported, SourceNode
    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext, SymbolicSampleContext

Signature = tuple[tuple[DType, ...], tuple[DType, ...]]

#: `Op.torch_call`'s `run_block(body, tensors) -> the body's output tensors`
RunBlock: typing.TypeAlias = "Callable[[Graph, list], list]"
#: `Op.onnx_call`'s `build_block(body, bind=None) -> onnx.GraphProto`
BuildBlock: typing.TypeAlias = "Callable[..., Any]"

OP_REGISTRY: dict[str, type[Op]] = {}


class OpError(ValueError):
    """An op was named or configured wrongly (unknown op, bad attribute)."""


class TypeRuleError(ValueError):
    """An instruction's type rule refuses its operand types or bodies (`Op.type_rule`); the
    message is the one-line reason the verifier reports."""


@dataclass(frozen=True)
class Slot:
    """How the generator may fill one input: allowed ranks, and what a new placeholder for it
    is: a weight (`param=True`), a graph input (False), or either (None: `GenConfig.param_rate`)."""

    ranks: tuple[int, ...]
    param: bool | None = False


@dataclass(frozen=True)
class Effect:
    """What an op does to memory besides computing its results (see docs/inplace.md).

    `writes`: the operand whose storage the op overwrites (all of it, or the region its
    `written_region` names); the op's one result is that operand itself (same storage and
    layout), as torch's `x.add_(y)` returns `x`. `view_of`: the op's one result is a view of
    this operand: it shares its storage, so a write through either is seen by both.
    `mutates`: the operands whose whole storage the op overwrites with new contents while its
    results are new values (a custom op declared with `mutates_args`, `ir.ops.custom`).
    None of these: the op is pure (its results are new values)."""

    writes: int | None = None
    view_of: int | None = None
    mutates: tuple[int, ...] = ()

    @property
    def pure(self) -> bool:
        return self.writes is None and self.view_of is None and not self.mutates

    @property
    def writes_memory(self) -> bool:
        """The op overwrites some operand's storage (in place, or as a mutating custom op)."""
        return self.writes is not None or bool(self.mutates)


PURE = Effect()


@dataclass(frozen=True)
class Op:
    name: ClassVar[str]
    family: ClassVar[str]
    #: number of inputs, or (min, max) for variadic ops
    arity: ClassVar[int | tuple[int, int]] = 1
    #: number of results, or None when the sub-graphs decide it (control flow)
    num_results: ClassVar[int | None] = 1
    #: control-flow ops hold sub-graphs in `Inst.blocks`; every other op must have none
    takes_blocks: ClassVar[bool] = False
    #: the operand position at which `torch` takes a Python number (or SymInt) for a 0-d
    #: value, with the same result as for the 0-d tensor, when operand 0 is a tensor (the
    #: `number` scalars form, `ir.materialize.form`); None: tensors only
    number_operand: ClassVar[int | None] = None
    #: memory effect: in-place write or view (`Effect`); PURE for ordinary ops
    effect: ClassVar[Effect] = PURE
    #: placed by the plain generator step (`GenConfig.enabled_ops`); False for ops only
    #: `ir.gen.inplace` places (views, in-place writes) and functionalization's helpers
    generic: ClassVar[bool] = True
    #: autograd: whether the op's backward may read its operands or its results (what torch
    #: saves for backward, which an in-place write may then not change: eager's "modified by
    #: an inplace operation", `ir.analysis.autograd`). True unless the op's derivative is a
    #: constant map (add, neg, copies, concatenation, data movement): the safe default
    saves_for_backward: ClassVar[bool] = True
    #: every correct implementation computes the op's float results exactly: data movement,
    #: selection (max, where, max-pooling, nearest resizing), sign changes, rounding to
    #: integers, correctly rounded casts; control flow (its results are its bodies'); views
    #: and in-place writes (the reference evaluates the functionalized graph, where only pure
    #: ops round). The reference's rounding spread never perturbs them
    #: (`campaign.reference.evaluate_perturbed`). Default False: the op rounds
    exact: ClassVar[bool] = False
    #: torch.func transforms (by name) torch eager cannot run this op under once an operand
    #: carries the transform's data (vmap: is batched; jvp, jacfwd: has a tangent), with
    #: eager's message (`ir.materialize.transforms.eager_problem` refuses such a test)
    eager_transform_refusals: ClassVar[Mapping[str, str]] = {}
    #: how much more than the base tolerance correct implementations of the op may differ: long
    #: accumulations (summation order: matmul, conv, reductions, norms, softmax, rnn) and
    #: transcendental functions (libm vs. vectorized approximations). An output's tolerance is
    #: the base one times the product of the factors of the op families in its cone, each
    #: family counted once (`ir.analysis.precision`), so the ops of one family share one
    #: factor. Default 1.0
    tolerance_factor: ClassVar[float] = 1.0
    #: may be in a custom op's body (`ir.ops.custom`), whose autograd formula is the body's
    #: vjp run inside an autograd.Function's backward (`ir.gen.custom` places no other).
    #: Default True
    in_custom_kernels: ClassVar[bool] = True
    #: the op's safe domain (`domain`) rarely survives iteration (poles, steep growth,
    #: discontinuities, ties): mutators keep it out of loop and scan bodies (`Scope.iterated`),
    #: where a recurrent value cannot be steered by the input search, and place it anywhere
    #: else. Default False
    fragile_when_iterated: ClassVar[bool] = False
    #: a binary op that combines a value with its copy without degenerating (x + x, max(x, x);
    #: not x - x = 0, x / x = 1, nor a comparison's tie, which leave nothing for the input
    #: search to work with): `duplicate_region` may join a result and its copy by it. Default
    #: False
    combines_with_copy: ClassVar[bool] = False
    #: an order comparison `a <cmp> b`: the sign s with which (a - b) * s > 0 makes it true
    #: (gt, ge: 1; lt, le: -1), which tells `ir.numerics.flow_coverage` which way to move a
    #: threshold. Default None: not an order comparison (eq included: no side makes it true)
    comparison_sign: ClassVar[int | None] = None
    #: a pure op whose torch form may return an operand's memory (a view of it, or the operand
    #: itself): slicing and reshaping movement ops, and control flow (a body may return its
    #: input). The in-place analysis copies its results in the torch form whenever the memory
    #: involved is written (docs/inplace.md). Default False: torch returns new storage
    torch_may_alias: ClassVar[bool] = False
    #: the in-place op that writes this op's result into operand 0's storage, with the same
    #: attributes (add -> add_, clip -> clamp_; `inplace_form`). Set by that op when it is
    #: defined (`ir.ops.inplace.InPlace`: its `pure`). Default None: none
    inplace_twin: ClassVar[type[Op] | None] = None
    #: the view op, with this movement op's attributes, whose result shares operand 0's storage
    #: (slice -> view_slice): the `to_inplace` mutator turns the one into the other so that a
    #: write lands in the base. Set by that op when it is defined (`ir.ops.views.ViewOp`: its
    #: `movement`). Default None: none
    view_twin: ClassVar[type[Op] | None] = None
    #: importing (`ir.importers`, `ir.core.importing`): the ATen overloads of a torch.export
    #: graph (`aten.relu.default`) and the ONNX op types (`Relu`) whose nodes this op's rule
    #: (`from_aten`, `from_onnx`) may take. Default: none
    aten_imports: ClassVar[tuple[str, ...]] = ()
    onnx_imports: ClassVar[tuple[str, ...]] = ()
    #: the order in which the rules of the ops declaring one source kind are asked, highest
    #: first: a pattern rule (reading through producers) before the plain one. Default 0
    import_priority: ClassVar[int] = 0

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "name" in cls.__dict__:
            if cls.name in OP_REGISTRY:
                raise OpError(f"op {cls.name!r} registered twice")
            OP_REGISTRY[cls.name] = cls

    # ---- typing ------------------------------------------------------------------------------
    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        raise NotImplementedError

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        """Slots for inputs 1.. given input 0's type (input 0 is always an existing value)."""
        return [Slot((first.rank,)) for _ in range(n_inputs - 1)]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        """Ranks input 0 may have."""
        return tuple(range(0, 5))

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        raise NotImplementedError

    def requires(self, ins: Sequence[TensorType]) -> list:
        return []

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        """Why these (concrete) operand types are refused, as a one-line reason the verifier
        reports (None: accepted). For rules that deserve a message of their own, e.g. what
        torch refuses for an in-place op; `requires` holds the constraints the generator
        solves."""
        return None

    def type_rule(self, ins: Sequence[TensorType], blocks: Sequence[Graph] = (),
                  require: Callable[[Any], bool] = holds) -> list[TensorType]:
        """The instruction's one type rule: the result types of this op (these attributes) on
        operands of types `ins` and bodies `blocks`, or `TypeRuleError` with the one-line reason
        it refuses them. In order: the input dtypes (`result_dtypes`), `problem` (concrete types
        only), each constraint of `requires` (judged by `require`: `holds` on concrete types; a
        symbolic caller collects z3 terms and answers True), the bodies (`check_blocks`), and
        `infer_inst`. What the verifier, the reducer's re-typing and the mutators ask; it does
        not check the arity, the bodies as graphs, or concrete attributes (the verifier's)."""
        in_dtypes = tuple(t.dtype for t in ins)
        if self.result_dtypes(in_dtypes) is None:
            shown = ", ".join(d.short for d in in_dtypes)
            raise TypeRuleError(f"does not accept input dtypes ({shown})")
        if type(self).problem is not Op.problem and not any(  # (most ops have no such rule)
                is_symbolic(d) for t in ins for d in t.shape):
            problem = self.problem(ins)
            if problem:
                raise TypeRuleError(problem)
        for c in self.requires(ins):
            if not require(c):
                raise TypeRuleError(f"constraint violated: {c}")
        problem = self.check_blocks(ins, blocks)
        if problem:
            raise TypeRuleError(problem)
        return self.infer_inst(ins, blocks)

    # ---- sub-graphs (control flow) -------------------------------------------------------------
    def infer_inst(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> list[TensorType]:
        """Result types of an instruction; control-flow ops read them off their bodies."""
        return self.infer(ins)

    def check_blocks(self, ins: Sequence[TensorType], blocks: Sequence[Graph]) -> str | None:
        """Why these bodies do not fit this op and operands (None: they fit). Each body has
        already been verified as a graph on its own."""
        return "op takes no sub-graphs" if blocks else None

    def result_dtypes(self, in_dtypes: tuple[DType, ...]) -> tuple[DType, ...] | None:
        """The result dtypes for these input dtypes, or None if the op does not accept them."""
        for ins, outs in self.signatures(len(in_dtypes)):
            if ins == in_dtypes:
                return outs
        return None

    # ---- generation --------------------------------------------------------------------------
    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        """Fresh attributes given input 0's type. Default: an op with no attributes."""
        return cls()

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        """The type of a *new* placeholder for input `index` (>= 1), built from input 0's dims
        so the op's constraints hold by construction; None: fresh dims of a slot rank."""
        return None

    @classmethod
    def sample_symbolic(cls, ctx: SymbolicSampleContext, first: TensorType
                        ) -> dict[str, Any] | None:
        """Fresh attributes written over the symbols of a dynamic-shape test (`ir.gen.symbolic_shapes`),
        given input 0's symbolic type: z3 terms where they follow a symbolic dim (a reshape
        target `(B*2, 6)`, a slice end `L + -1`), ints elsewhere, so that the op follows the
        dims when the test runs at other sizes. None (the default, and when these dims give
        nothing to follow): `sample` as usual, concrete attributes."""
        return None

    def onnx_inferred_attrs(self, attrs: Mapping[str, Any], in_dims: tuple,
                            offset: Callable[[Any, Any], int | None]) -> Op | None:
        """The op with constant attributes that ONNX resolves against its first input's shape,
        standing for `attrs` (its attributes as dim expressions over the symbols: a dynamic-
        shape test, `ir.materialize.dynshape`, `shape_lowering="infer"`); None when they cannot
        say it (then the attributes are computed from the inputs' `Shape`). `in_dims`: the
        first input's dims (ints and expressions); `offset(a, b)`: a - b when it is the same
        int for every assignment, else None."""
        return None

    def inplace_form(self) -> Op | None:
        """This op computed in place into operand 0's storage: its `inplace_twin` with the same
        attributes (add -> add_, clip[lo, hi] -> clamp_[lo, hi]); None when it has none."""
        twin = type(self).inplace_twin
        return twin(**self.attrs()) if twin is not None else None

    @classmethod
    def arities(cls) -> range:
        if isinstance(cls.arity, int):
            return range(cls.arity, cls.arity + 1)
        return range(cls.arity[0], cls.arity[1] + 1)

    @classmethod
    def sample_arity(cls, ctx: SampleContext) -> int:
        if isinstance(cls.arity, int):
            return cls.arity
        lo, hi = cls.arity
        return ctx.rng.randint(lo, hi)

    # ---- numerical domain ----------------------------------------------------------------------
    def domain(self, *xs: Any) -> list:
        """Violations of the op's numerically safe input domain, as float torch tensors that are
        >= 0 everywhere and == 0 exactly where the inputs are safe (e.g. log:
        `relu(1e-3 - x)`; floor: distance to the nearest integer below a margin). The input
        search drives them to zero by gradient descent and the reference rejects a test whose
        values violate any of them, so undefined results (NaN, overflow) and discontinuities
        that amplify rounding (floor, comparisons) never become false alarms. Default: none."""
        return []

    def index_range(self, index: int, ins: Sequence[TensorType]) -> tuple[int, int] | None:
        """The values, inclusive, that integer operand `index` must take on operands of types
        `ins` (an index into a table: [0, V - 1]), which its `domain` requires: the random
        draw of graph inputs and params (`ir.numerics.values.random_values`) keeps an int
        value an instruction reads directly within it, as the input search moves floats only.
        Default None: any value."""
        return None

    def kinks(self, *xs: Any) -> list:
        """Violations of the op's differentiability, for gradient tests: float torch tensors
        >= 0 everywhere and == 0 exactly where the op is differentiable with a margin around
        every point where its derivative jumps (relu and abs at 0, clip at its bounds, ties of
        max/min, of sorting and of max-pooling windows), so that the gradient is well-defined
        and no correct implementation can pick another one-sided derivative. Checked, with
        `domain`, on every instruction of a gradient test (`ir.numerics.domain.differentiable`)
        and driven to zero by the input search. Default: none (smooth where `domain` holds)."""
        return []

    # ---- materialization ---------------------------------------------------------------------
    def torch(self, *xs: Any) -> Any:
        """The results from the operand tensors: a tensor, or a tuple of them for an op with
        several results."""
        raise NotImplementedError

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        """Evaluate with sub-graphs: `run_block(graph, tensors) -> list of tensors` runs a body;
        `dialect` says how control flow is expressed ("python": plain if/for on concrete values;
        "hop": torch.cond / torch.while_loop higher-order ops); `numbers`: the `number` scalars
        form (`ir.materialize.form`: a loop counter is a Python int / SymInt). Returns one
        tensor for a one-result instruction, else a sequence. Plain ops ignore all this and
        call `torch`."""
        return self.torch(*args)

    def transparent(self) -> Op:
        """The op as an interpreter that checks every value runs it (`ir.numerics.domain`):
        itself, or, for an op whose torch call hides work in an opaque kernel (a custom op),
        a form that runs its bodies through the interpreter's `run_block`, same results."""
        return self

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        raise NotImplementedError

    def onnx_call(self, b: OnnxBuilder, ins: list[str], outs: list[str],
                  blocks: Sequence[Graph], build_block: BuildBlock) -> None:
        """Emit nodes with sub-graphs: `build_block(graph, bind=None) -> onnx.GraphProto` builds
        a body; with `bind` (outer value names, one per body input) the body takes no ONNX
        inputs and reads those outer values instead (ONNX If bodies capture, not take,
        operands). Plain ops ignore both and call `onnx`."""
        self.onnx(b, ins, outs)

    # ---- importing ---------------------------------------------------------------------------
    @classmethod
    def from_aten(cls, node: SourceNode) -> Imported | None:
        """This op for an ATen node of one of its `aten_imports` (None: not this op). Default,
        for an op without attributes: the node's arguments, all tensors (or numbers), are its
        operands, and it gives no other argument."""
        return cls._plain_import(node)

    @classmethod
    def from_onnx(cls, node: SourceNode) -> Imported | None:
        """This op for an ONNX node of one of its `onnx_imports` (None: not this op). Default,
        for an op without attributes: the node's inputs are its operands, and it has no
        attribute."""
        return cls._plain_import(node)

    @classmethod
    def _plain_import(cls, node: SourceNode) -> Imported | None:
        from ir.core.importing import Imported

        if dataclasses.fields(cls) or node.n_given not in cls.arities() or node.attrs_given:
            return None
        return Imported.one(cls(), *(node.tensor(i) for i in range(node.n_given)))

    # ---- attributes --------------------------------------------------------------------------
    def attrs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def is_concrete(self) -> bool:
        return not any(_has_symbol(v) for v in self.attrs().values())

    def concretize(self, model: z3.ModelRef) -> Op:
        return dataclasses.replace(
            self, **{k: _concretize_attr(v, model) for k, v in self.attrs().items()}
        )

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> Op:
        """Build from parsed attribute values, coercing lists to tuples and names to dtypes."""
        hints = typing.get_type_hints(cls)
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(attrs) - fields)
        if unknown:
            raise OpError(f"op {cls.name!r} has no attribute {unknown[0]!r}")
        missing = sorted(fields - set(attrs))
        if missing:
            raise OpError(f"op {cls.name!r} needs attribute {missing[0]!r}")
        return cls(**{k: _coerce(cls.name, k, hints[k], v) for k, v in attrs.items()})


def _has_symbol(v: Any) -> bool:
    if isinstance(v, tuple):
        return any(_has_symbol(x) for x in v)
    return is_symbolic(v)


def _concretize_attr(v: Any, model: z3.ModelRef) -> Any:
    if isinstance(v, tuple):
        return tuple(_concretize_attr(x, model) for x in v)
    if is_symbolic(v):
        return concretize(v, model)
    return v


_SCALARS: dict[Any, Callable[[Any], bool]] = {
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    bool: lambda v: isinstance(v, bool),
    str: lambda v: isinstance(v, str),
}


def _coerce(op: str, key: str, hint: Any, v: Any) -> Any:
    shown = "[" + ",".join(map(str, v)) + "]" if isinstance(v, tuple) else repr(v)
    bad = OpError(f"op {op!r} attribute {key!r}: bad value {shown}")
    if hint is DType:
        if not isinstance(v, str):
            raise bad
        try:
            return DType.from_name(v)
        except ValueError as e:
            raise OpError(f"op {op!r} attribute {key!r}: {e}") from None
    if typing.get_origin(hint) is tuple:
        (elem, *_) = typing.get_args(hint)
        if not isinstance(v, (tuple, list)) or not all(_SCALARS[elem](x) for x in v):
            raise bad
        return tuple(v)
    if not _SCALARS[hint](v):
        raise bad
    return float(v) if hint is float else v


def lookup_op(name: str) -> type[Op]:
    try:
        return OP_REGISTRY[name]
    except KeyError:
        raise OpError(f"unknown op {name!r}") from None


