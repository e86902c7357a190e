"""The generator's config and its per-op builder: `SymbolicGraphBuilder` grows a graph one op
at a time, each op solved with z3 as it is placed (`ir.gen.generate` drives it).

Per step: pick an op, pick its first input among existing values, fill its other inputs with
existing values or new placeholders (graph inputs, or params for weights), sample attributes
(numeric ones as fresh z3 ints), and keep the op only if its constraints can be met; its
symbols are then fixed, so the graph under construction is concrete at every step (see
`SymbolicGraphBuilder` for why per op and not per graph).

Element bound: every value of rank r has each dim <= floor(max_elems ** (1/r)), which bounds its
element count (weights included) by `max_elems` with linear constraints only.

Determinism: all choices come from one `random.Random(seed)`, z3 names come from one counter,
and every symbol's value is drawn from the RNG or found by a search whose steps depend only on
sat/unsat answers, so a seed always yields the same graph. Solver effort is capped by z3's
resource limit (`rlimit`), never by wall-clock time, so a hard (nonlinear) query fails the same
way on every machine instead of hanging.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3

import ir.ops  # noqa: F401  (registers the op library)
from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.op import OP_REGISTRY, Op
from ir.core.sampling import SampleContext
from ir.core.shapes import eq, holds, is_symbolic
from ir.core.types import TensorType


@dataclass
class GenConfig:
    """Generator options (also the `generator` group of the campaign config)."""

    nodes: int = 10
    max_elems: int = 4096
    max_rank: int = 4
    dtypes: list[str] = field(default_factory=lambda: ["f32", "f64", "i32", "i64", "b8"])
    ops_include: list[str] = field(default_factory=list)
    ops_exclude: list[str] = field(default_factory=list)
    #: preferred upper bound for input dims (z3 is nudged towards random values up to this)
    dim_hint: int = 8
    #: chance that a new placeholder for an operand that may be either becomes a param
    param_rate: float = 0.5
    #: chance that a generation step tries an `if` / a `loop` / a `scan` (control flow) instead
    #: of a plain op; inside bodies, the chance per chain step of a nested one
    p_if: float = 0.0
    p_loop: float = 0.0
    p_scan: float = 0.0
    #: deepest nesting of control-flow bodies (`Graph.max_depth`): 1 = bodies hold no control
    #: flow, 2 = one level of if/loop/scan inside bodies, ...
    max_depth: int = 1
    #: longest op chain per output in a generated body
    body_nodes: int = 3
    #: op signatures never to generate, as `signature_key`s (e.g. "avgpool2d(f64)->f64");
    #: campaigns fill it from the support probes of their backends
    deny: list[str] = field(default_factory=list)
    #: views and in-place writes (`ir.gen.inplace`, docs/inplace.md): per generation step, the
    #: chance of a write site (a destination, maybe through views, and one in-place op); per
    #: control-flow body, the chance of a write on a body-local value. 0: none (the default)
    p_inplace: float = 0.0
    #: dynamic shapes (`ir.gen.symbolic_shapes`, docs/dynshape.md): the share of tests whose chosen
    #: input dims stay symbolic (one compiled model, run on several shapes); which roles may
    #: (`batch`, `seq`, `spatial`); how many shape assignments (input sets) each test runs
    p_dynshape: float = 0.0
    dyn_dims: list[str] = field(default_factory=lambda: ["batch", "seq", "spatial"])
    dyn_sets: int = 4
    #: custom ops (`ir.gen.custom`, `ir.ops.custom`): the chance that a generated graph gets
    #: custom-op sites (regions of any scope made the kernels of `torch.library.custom_op`s),
    #: and the share of those sites that mutate an operand (0 in a test that differentiates)
    p_custom: float = 0.0
    p_custom_mutates: float = 0.6
    #: compile regions (`ir.gen.region`, `ir.ops.region`): the chance that a generated graph
    #: gets region sites (spans called through one `torch.compiler.nested_compile_region`
    #: function from several sites whose guards differ)
    p_region: float = 0.0
    #: gradient tests (docs/training.md): the share of tests that also differentiate their
    #: outputs (leaves, cotangents: `ir.numerics.grad`); drawn by seed on an RNG of its own, so
    #: inference tests are made as before. 0: none (the default)
    p_grad: float = 0.0
    #: transform tests (docs/training.md): the share of gradient tests run under a torch.func
    #: transform instead, drawn among `transforms` (`ir.materialize.transforms.TRANSFORMS`)
    p_transform: float = 0.0
    transforms: list[str] = field(default_factory=lambda: ["vmap", "grad", "vjp", "jvp",
                                                           "jacrev", "jacfwd"])
    #: repeat tests (`campaign.modes.repeat`): the share of inference tests that run their
    #: first input set once more, last, on the same compiled program
    p_repeat: float = 0.0
    #: cache tests (`campaign.modes.cache`): the share of inference tests a caching backend
    #: compiles twice, warm after a near-twin and cold (drawn before `p_repeat`)
    p_cache: float = 0.0

    def enabled_ops(self) -> list[type[Op]]:
        unknown = sorted(set(self.ops_include + self.ops_exclude) - set(OP_REGISTRY))
        if unknown:
            raise ValueError(f"generator: unknown op {unknown[0]!r} in ops_include/ops_exclude")
        names = self.ops_include or sorted(OP_REGISTRY)
        return [OP_REGISTRY[n] for n in names
                if n not in self.ops_exclude and not OP_REGISTRY[n].takes_blocks
                and OP_REGISTRY[n].generic]

    def enabled_dtypes(self) -> list[DType]:
        return [DType.from_name(d) for d in self.dtypes]

    def for_training(self) -> GenConfig:
        """This config for a gradient test's graph: values of the float dtypes that train
        (float32, float64; docs/training.md) and no others, so that gradients reach most of
        the graph (predicates and indices are made by the ops that need them)."""
        floats = [d for d in self.dtypes if d in ("f32", "f64")] or ["f32"]
        # torch has no autograd formula for a custom op that mutates its arguments
        return dataclasses.replace(self, dtypes=floats, p_custom_mutates=0.0)

    def without(self, ops: Iterable[str]) -> GenConfig:
        """This config generating none of `ops`: plain ops join `ops_exclude`, an op holding
        bodies (`if`, `loop`, `scan`, `custom`, `region`) gets its chance set to 0."""
        ops = set(ops)
        knobs: dict[str, Any] = {knob: 0.0 for op, knob in CONTROL_KNOBS.items() if op in ops}
        plain = sorted(n for n in ops if n in OP_REGISTRY and n not in CONTROL_KNOBS
                       and n not in self.ops_exclude)
        return dataclasses.replace(self, ops_exclude=[*self.ops_exclude, *plain], **knobs)


#: the control-flow ops and the GenConfig chance that places each
CONTROL_KNOBS = {"if": "p_if", "loop": "p_loop", "scan": "p_scan", "custom": "p_custom",
                 "region": "p_region"}


#: z3 resource units per check: ~10x the costliest query seen in normal generation
RLIMIT = 2_000_000


def signature_key(op: str, ins: Sequence[DType], outs: Sequence[DType]) -> str:
    """`name(in,dtypes)->out,dtypes`, e.g. `cast(i32)->f16`: the unit of backend support."""
    return f"{op}({','.join(d.short for d in ins)})->{','.join(d.short for d in outs)}"


class GenerationError(RuntimeError):
    """The generator could not build a graph (e.g. no op accepts the configured dtypes)."""


class SymbolicGraphBuilder:
    """A graph under construction, grown one op at a time with every shape concrete.

    Each new op is solved on its own: its sampled attributes and the dims of its new
    placeholders are z3 symbols, constrained by the op's `requires`, the element bound and an
    optional target type, while every existing value is already concrete. The symbols are fixed
    at once (see `_fix`), so the instruction returned by `try_op` is concrete.

    Why per op rather than one solver for the whole graph (NNSmith's way): with concrete
    operands most constraints are decided in Python and the rest involve a handful of fresh
    symbols, so z3 is called rarely and on tiny problems; a whole-graph solve spends most of
    the generator's time in z3. What is given up: a later op cannot reshape an earlier
    input; ops that need a fitting operand get a new placeholder built to fit (`operand_type`).
    """

    def __init__(self, rng: random.Random, cfg: GenConfig, names: Names | Iterable[str] = ()):
        """`names`: the graph's name service when the builder adds to an existing graph
        (`Names.of(g)`), or names it must not use."""
        self.rng = rng
        self.cfg = cfg
        self.ctx = SampleContext(rng)
        self.inputs: list[Value] = []
        self.params: list[Value] = []
        self.insts: list[Inst] = []
        self.names = names if isinstance(names, Names) else Names(names)
        self._deny = frozenset(cfg.deny)
        self._dtypes = frozenset(cfg.enabled_dtypes())
        self._solver = z3.Solver()
        self._solver.set("rlimit", RLIMIT)

    # ---- names, placeholders -------------------------------------------------------------
    def fresh_name(self, prefix: str) -> str:
        return self.names.fresh(prefix)

    def dim_cap(self, rank: int) -> int:
        return max(1, int(math.floor(self.cfg.max_elems ** (1.0 / rank) + 1e-9))) if rank else 1

    def bounds(self, t: TensorType) -> list:
        """1 <= d <= cap(rank) for every dim of `t` (Python bools for concrete dims)."""
        cap = self.dim_cap(t.rank)
        out: list = []
        for d in t.shape:
            if is_symbolic(d):
                out += [d >= 1, d <= cap]
            else:
                out.append(1 <= d <= cap)
        return out

    def placeholder_type(self, rank: int, dtype: DType) -> TensorType:
        """A type with fresh dimension symbols (fixed when the op using it is solved)."""
        return TensorType(tuple(self.ctx.dim(rank) for _ in range(rank)), dtype)

    def concrete_type(self, rank: int, dtype: DType) -> TensorType:
        """A type with dims drawn from [1, min(cap, dim_hint)]."""
        hi = min(self.dim_cap(rank), self.cfg.dim_hint)
        return TensorType(tuple(self.rng.randint(1, hi) for _ in range(rank)), dtype)

    def add_input(self, t: TensorType, param: bool = False) -> Value:
        if not t.is_concrete:
            raise ValueError(f"generator: new input of non-concrete type {t}")
        v = Value(self.fresh_name("w" if param else "x"), t)
        (self.params if param else self.inputs).append(v)
        return v

    # ---- op insertion ------------------------------------------------------------------------
    def try_op(
        self,
        op_cls: type[Op],
        first: Value,
        candidates: Sequence[Value],
        dtypes: tuple[DType, ...],
        arity: int,
        target: TensorType | None = None,
        op: Op | None = None,
        allow_new: bool = True,
        new_params: bool | None = None,
    ) -> Inst | None:
        """Build `op_cls(first, ...)` over concrete values; return the concrete instruction if
        the op's constraints can be met, else None. `target` forces the result type.

        New placeholders take the op's `operand_type` (constraints hold by construction) when
        it offers one. `op` gives the attributes instead of sampling them; `allow_new=False`
        forbids new placeholders (inside closed bodies every operand must already exist);
        `new_params` makes every new placeholder a param (True) or a graph input (False)
        instead of deciding by slot and `param_rate`."""
        n_dims, n_syms = len(self.ctx.dims), len(self.ctx.symbols)
        op = op if op is not None else op_cls.sample(self.ctx, first.type)
        new_inputs: list[tuple[Value, bool]] = []
        args = [first]
        for index, (slot, dtype) in enumerate(zip(op_cls.slots(arity, first.type), dtypes[1:], strict=True), 1):
            usable = [v for v in candidates if v.type.dtype == dtype and v.type.rank in slot.ranks]
            if usable and slot.param is not True and (self.rng.random() < 0.5 or not allow_new):
                args.append(self.rng.choice(usable))
                continue
            if not allow_new:
                return None
            if new_params is not None:
                is_param = new_params
            elif slot.param is not None:
                is_param = slot.param
            else:
                is_param = self.rng.random() < self.cfg.param_rate
            t = op.operand_type(index, first.type, dtype, self.ctx)
            if t is None:
                t = self.placeholder_type(self.rng.choice(slot.ranks), dtype)
            v = Value(f"?{len(new_inputs)}", t)
            new_inputs.append((v, is_param))
            args.append(v)
        return self.complete(op, args, new_inputs, (n_dims, n_syms),
                             None if target is None else [target])

    def complete(self, op: Op, args: Sequence[Value], new_inputs: Sequence[tuple[Value, bool]],
                 marks: tuple[int, int], targets: Sequence[TensorType | None] | None = None,
                 names: Sequence[str] | None = None) -> Inst | None:
        """The instruction `op(*args)` once its operands are chosen, or None when it cannot
        be: the result dtypes must be enabled and the signature not denied; the constraints
        are the op's `requires`, the element bound on every new type and the `targets` (result
        types; None entries free); every symbol created since `marks` (the lengths of
        `ctx.dims` and `ctx.symbols` before the op was sampled) is fixed from the rng
        (`_fix`), and a constraint over no new symbol must hold. The new placeholders in
        `args` (`new_inputs`: each with whether it is a param) then become graph inputs or
        params; the results take `names` (default: fresh). `try_op` and the mutators' `solve`
        both end here."""
        in_types = [a.type for a in args]
        out_dtypes = op.result_dtypes(tuple(t.dtype for t in in_types))
        if out_dtypes is None or any(d not in self._dtypes for d in out_dtypes):
            return None
        if self._deny and signature_key(op.name, [t.dtype for t in in_types], out_dtypes) in self._deny:
            return None
        outs = op.infer(in_types)
        cons = list(op.requires(in_types))
        for t in [*outs, *(v.type for v, _ in new_inputs)]:
            cons += self.bounds(t)
        if targets is not None:
            if len(targets) != len(outs):
                return None
            for got, want in zip(outs, targets, strict=True):
                if want is None:
                    continue
                if got.rank != want.rank or got.dtype != want.dtype:
                    return None
                cons += [eq(a, b) for a, b in zip(got.shape, want.shape, strict=True)]
        if any(c is False for c in cons):
            return None
        n_dims, n_syms = marks
        symbols = self._symbols(self.ctx.dims[n_dims:], self.ctx.symbols[n_syms:])
        if symbols:
            model = self._fix([c for c in cons if not isinstance(c, bool)], symbols)
            if model is None:
                return None
            op = op.concretize(model)
            outs = [t.concretize(model) for t in outs]
            new_inputs = [(Value(v.name, v.type.concretize(model)), p) for v, p in new_inputs]
        elif any(not isinstance(c, bool) and not holds(c) for c in cons):
            return None
        renamed = {}
        for v, is_param in new_inputs:
            real = self.add_input(v.type, is_param)
            renamed[v.name] = real.name
        arg_names = tuple(renamed.get(a.name, a.name) for a in args)
        if names is None:
            names = [self.fresh_name("v") for _ in outs]
        return Inst(op, arg_names, tuple(Value(n, t) for n, t in zip(names, outs, strict=True)))

    # ---- solving -----------------------------------------------------------------------------
    def _symbols(self, dims: Iterable[tuple[z3.ArithRef, int]], syms: Iterable[z3.ArithRef]
                 ) -> list[tuple[z3.ArithRef, int, int]]:
        """The op's symbols with the range each value is drawn from, in creation order."""
        out = [(d, 1, min(self.dim_cap(rank), self.cfg.dim_hint)) for d, rank in dims]
        out += [(s, 0, self.cfg.dim_hint) for s in syms]
        return out

    def _fix(self, cons: list, symbols: list[tuple[z3.ArithRef, int, int]]) -> z3.ModelRef | None:
        """A model of `cons` fixing every symbol to a value drawn from `rng` where possible
        (varied shapes, not z3's favourite 0s and 1s); None when `cons` cannot hold.

        Determinism: z3's choice among models is not reproducible, so no symbol is left to it.
        The longest prefix of draws consistent with those already fixed is found by bisection
        on its length (one check when all agree), the symbol that breaks it gets its smallest
        feasible value (exponential then binary search), and so on. The model is a function of
        the draws and of sat/unsat answers only. Solver effort is capped by `rlimit`; running
        out counts as unsatisfiable."""
        draws = [sym == self.rng.randint(lo, hi) for sym, lo, hi in symbols]
        solver = self._solver
        solver.push()
        try:
            solver.add(*cons)
            return self._fix_draws(draws, lambda extra: solver.check(*extra) == z3.sat)
        finally:
            solver.pop()

    def _fix_draws(self, draws: list, sat: Callable[[list], bool]) -> z3.ModelRef | None:
        if sat(draws):
            return self._solver.model()
        if not sat([]):
            return None
        fixed: list = []
        i = 0
        while i < len(draws):
            if sat(fixed + draws[i:]):
                fixed += draws[i:]
                break
            ok, bad = i, len(draws)  # draws[i:ok] are consistent, draws[i:bad] are not
            while bad - ok > 1:
                mid = (ok + bad) // 2
                if sat(fixed + draws[i:mid]):
                    ok = mid
                else:
                    bad = mid
            fixed += draws[i:ok]
            sym = draws[ok].arg(0)
            value = self._smallest_feasible(sym, fixed, sat)
            if value is None:
                return None
            fixed.append(sym == value)
            i = ok + 1
        return self._solver.model() if sat(fixed) else None

    def _smallest_feasible(self, sym: z3.ArithRef, fixed: list, sat: Callable[[list], bool]) -> int | None:
        """Smallest value of `sym` (>= 0) consistent with `fixed`: exponential, then binary search."""
        lo, hi = -1, 1  # invariant once found: sym <= lo infeasible, sym <= hi feasible
        while not sat(fixed + [sym <= hi]):
            if hi >= self.cfg.max_elems:
                return None
            lo, hi = hi, min(2 * hi + 1, self.cfg.max_elems)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if sat(fixed + [sym <= mid]):
                hi = mid
            else:
                lo = mid
        return hi

    def admit(self, insts: Sequence[Inst]) -> bool:
        """Whether placed control flow (its instructions, in order) joins the graph; a subclass
        with more state may refuse it (`ir.gen.symbolic_shapes`: it would pin a symbolic dim)."""
        return True

    def graph(self, name: str, insts: Sequence[Inst], outputs: Sequence[str]) -> Graph:
        """The graph of `insts` over this builder's inputs and params."""
        return Graph(name, tuple(self.inputs), tuple(insts), tuple(outputs), tuple(self.params))
