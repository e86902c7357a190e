"""Generation of dynamic-shape tests: chosen input dims stay z3 symbols through the graph
(docs/dynshape.md).

The per-op concrete generator (`ir.gen.builder.SymbolicGraphBuilder`) stays as it is: every op is
solved at one assignment of the symbols, `a0` (the concrete graph of input set 0). Beside it,
`DynShapeBuilder` keeps a *symbolic shadow* of the top-level values (their types over the
symbols) and one builder-level set of z3 constraints over the symbols only: the `requires` of
every op that touches them, evaluated on the shadow types, plus the element bounds. An op is
kept only if, with its constraints added, every symbol still has `MIN_VALUES` feasible values
and no two symbols are forced equal; so the symbols stay free while everything else is
concrete, and most placements involve no symbol at all (no solver call).

What the shadow needs beyond the concrete generator:
  - the first input's chosen dims (batch, sequence, spatial by rank) are the symbols, with
    distinct values >= 2 in `a0` (no 0/1 specialization, no accidental equalities at set 0);
  - a new graph input built to fit an operand gets the symbol whose `a0` value its dim has,
    when that keeps the op valid for every assignment (params are weights: always concrete);
  - reshape, expand, slice and split over symbolic dims get attributes that are expressions of
    the symbols (`Op.sample_symbolic`: a target `(B*2, 6)`, an end `L + -1`, a split `L + -2`),
    top level only (bodies keep concrete attributes);
  - control flow placed by `ir.gen.control` is lifted after the fact (`Lifter`), bodies
    included; a symbol the lifted constraints pin down is *demoted* to its `a0` value (the
    concrete graph is valid at `a0`, so demotion is always sound).

`finish` lifts the final graph once more (after mutation and the input search's repairs, which
may drop or rewire instructions), demotes what is pinned, and draws the assignments: `a0`, the
smallest and largest feasible values (edge values such as 1 where legal), then seeded draws,
all distinct, each checked by instantiating the graph and verifying it. Determinism: every
value comes from the seeded RNG or from searches whose steps depend only on sat/unsat answers.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

import z3

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op
from ir.core.sampling import SymbolicSampleContext
from ir.core.shapes import Dim, eq, is_symbolic
from ir.core.types import TensorType
from ir.core.verify import VerifyError, verify
from ir.gen.builder import RLIMIT, GenConfig, SymbolicGraphBuilder
from ir.gen.generate import generate_once
from ir.materialize.dynshape import DynShape, ExprError, expr_of_z3, instantiate, tidy
from ir.ops.control import ControlFlow

#: every live symbol keeps at least this many feasible values
MIN_VALUES = 3
#: role of each axis of the first input, by rank (None: a concrete dim)
LAYOUTS = {1: ("seq",), 2: ("batch", None), 3: ("batch", "seq", None),
           4: ("batch", None, "spatial", "spatial")}
SYMBOL_NAMES = {"batch": ["B"], "seq": ["L"], "spatial": ["H", "W"]}
ROLES = ("batch", "seq", "spatial")


class LiftError(Exception):
    """An instruction cannot be typed over the symbols; `symbols` are those to demote."""

    def __init__(self, msg: str, symbols: AbstractSet[str]):
        super().__init__(msg)
        self.symbols = symbols


def wants_dynshape(seed: int, cfg: GenConfig) -> bool:
    """Whether the test of this seed keeps symbolic dims (`GenConfig.p_dynshape`)."""
    p = getattr(cfg, "p_dynshape", 0.0)
    return p > 0 and random.Random(f"dynshape/{seed}").random() < p


#: term id -> (the term, kept alive so its id stays unique; its symbols)
_SYMBOLS_CACHE: dict[int, tuple[Any, frozenset[str]]] = {}


def term_symbols(t: Any) -> frozenset[str]:
    """Names of the symbols in a z3 term (or nothing for an int / bool)."""
    if not isinstance(t, z3.ExprRef):
        return frozenset()
    hit = _SYMBOLS_CACHE.get(t.get_id())
    if hit is not None:
        return hit[1]
    if len(_SYMBOLS_CACHE) > 100_000:
        _SYMBOLS_CACHE.clear()
    found = frozenset(_term_symbols(t))
    _SYMBOLS_CACHE[t.get_id()] = (t, found)
    return found


def _term_symbols(t: Any) -> set[str]:
    out: set[str] = set()
    todo = [t]
    seen = set()
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x.decl().name())
        todo.extend(x.children())
    return out


def type_symbols(t: TensorType) -> set[str]:
    return set().union(*(term_symbols(d) for d in t.shape)) if t.rank else set()


# ---- lifting: types and constraints over the symbols ------------------------------------------

class Lifter:
    """Types over the symbols for the values of a concrete graph, and the constraints the
    symbols must meet for every instruction to be valid.

    `env` maps every value name (nested ones included) to its lifted type; `cons` collects z3
    constraints over the symbols. `a0` is the assignment of the concrete graph, used to check
    each lifted type against the concrete one."""

    def __init__(self, symbols: Sequence[str], a0: Mapping[str, int], cfg: GenConfig):
        self.syms = {s: z3.Int(s) for s in symbols}
        self.a0 = dict(a0)
        self.cfg = cfg
        self.env: dict[str, TensorType] = {}
        self.cons: list = []
        self._a0_cache: dict[int, tuple[Any, int]] = {}

    # -- helpers
    def dim_cap(self, rank: int) -> int:
        return max(1, int(math.floor(self.cfg.max_elems ** (1.0 / rank) + 1e-9))) if rank else 1

    def at_a0(self, d: Dim) -> int:
        if not is_symbolic(d):
            return int(d)
        hit = self._a0_cache.get(d.get_id())
        if hit is not None:
            return hit[1]
        pairs = [(self.syms[s], z3.IntVal(self.a0[s])) for s in term_symbols(d)]
        v = z3.simplify(z3.substitute(d, *pairs) if pairs else d)
        if not z3.is_int_value(v):
            raise LiftError(f"dim {d} is not an int at a0", term_symbols(d))
        self._a0_cache[d.get_id()] = (d, v.as_long())  # the term kept: its id stays unique
        return v.as_long()

    def bounds(self, t: TensorType) -> list:
        cap = self.dim_cap(t.rank)
        return [c for d in t.shape if is_symbolic(d) for c in (d >= 1, d <= cap)]

    def check_generic(self, types: Sequence[TensorType]) -> None:
        """Every symbolic dim is >= 2 at a0: the compile set (input set 0) has no size that a
        compiler may specialize as 0/1 (torch.compile does, by design); LiftError otherwise."""
        for t in types:
            for d in t.shape:
                if is_symbolic(d) and self.at_a0(d) < 2:
                    raise LiftError(f"dim {d} is {self.at_a0(d)} at a0", term_symbols(d))

    def of(self, name: str, fallback: TensorType | None) -> TensorType | None:
        return self.env.get(name, fallback)

    # -- instructions
    def lift_inst(self, inst: Inst, ins: list[TensorType], attrs: Mapping[str, Any] | None = None
                  ) -> tuple[list[TensorType], list]:
        """Lifted result types and the constraints of one instruction (bodies lifted into
        `env` as a side effect). Raises LiftError."""
        involved = set().union(*(type_symbols(t) for t in ins)) if ins else set()
        if attrs:
            involved |= set().union(*(term_symbols(x) for v in attrs.values()
                                      for x in (v if isinstance(v, tuple) else (v,))))
        if not involved and not inst.blocks:
            return [r.type for r in inst.results], []
        op = dataclasses.replace(inst.op, **attrs) if attrs else inst.op
        try:
            if inst.blocks:
                outs, cons = self._lift_control(inst, op, ins)
            else:
                outs = list(op.infer(ins))
                cons = list(op.requires(ins))
        except LiftError:
            raise
        except Exception as e:  # an op rule that needs concrete dims (z3 raises on bool())
            raise LiftError(f"{inst.op.name}: {type(e).__name__}: {e}", involved) from None
        if len(outs) != len(inst.results):
            raise LiftError(f"{inst.op.name}: {len(outs)} results lifted", involved)
        for t, r in zip(outs, inst.results, strict=True):
            if t.rank != r.type.rank or t.dtype != r.type.dtype or \
                    tuple(self.at_a0(d) for d in t.shape) != tuple(r.type.shape):
                raise LiftError(f"{inst.op.name}: lifted type {t} is not {r.type} at a0",
                                involved | type_symbols(t))
            cons += self.bounds(t)
        return outs, cons

    def lift_body(self, body: Graph, in_types: Sequence[TensorType]) -> tuple[list[TensorType], list]:
        if len(in_types) != len(body.inputs):
            raise LiftError("body arity", set())
        for v, t in zip(body.inputs, in_types, strict=True):
            self.env[v.name] = t
        cons: list = []
        for inst in body.insts:
            # every operand of a body is lifted above (its inputs, earlier results)
            ins = cast(list[TensorType], [self.of(a, None) for a in inst.args])
            outs, c = self.lift_inst(inst, ins)
            cons += c
            for r, t in zip(inst.results, outs, strict=True):
                self.env[r.name] = t
        return [self.env[o] for o in body.outputs], cons

    def _lift_control(self, inst: Inst, op: Op, ins: list[TensorType]) -> tuple[list[TensorType], list]:
        if not isinstance(op, ControlFlow):
            raise LiftError(f"{op.name}: no lifting rule for this control-flow op", set())
        cons: list = []
        body_outs = []
        for body, in_types in zip(inst.blocks, op.body_inputs(ins, len(inst.blocks)), strict=True):
            outs, c = self.lift_body(body, in_types)
            body_outs.append(outs)
            cons += c
        rel = _Constraints(op.name)
        results = op.relate(ins, body_outs, rel)
        cons += rel.cons
        length = op.sequence_length(ins)
        if is_symbolic(length):
            from ir.gen.control import MAX_SCAN_LEN

            cons.append(length <= MAX_SCAN_LEN)
        return results, cons


@dataclass
class _Constraints:
    """A `Relation` that collects the constraints of a control-flow op over the symbols."""

    op: str
    cons: list = field(default_factory=list)

    def same(self, a: Sequence[TensorType], b: Sequence[TensorType]) -> None:
        if len(a) != len(b) or any(x.rank != y.rank for x, y in zip(a, b, strict=True)):
            raise LiftError(f"{self.op}: body signature", set())
        self.cons += [eq(d, e) for x, y in zip(a, b, strict=True) for d, e in zip(x.shape, y.shape, strict=True)]

    def eq(self, a: Dim, b: Dim) -> None:
        self.cons.append(eq(a, b))

    def fail(self, why: str) -> NoReturn:
        raise LiftError(f"{self.op}: {why}", set())


def z3_constraints(cons: Sequence) -> list:
    """The constraints that are z3 terms, without those that simplify to true; raises
    LiftError for one that is false whatever the symbols."""
    out = []
    for c in cons:
        if c is True or (isinstance(c, bool) and c):
            continue
        if c is False or (isinstance(c, bool) and not c):
            raise LiftError("a constraint is false for every assignment", set())
        s = z3.simplify(c)
        if z3.is_true(s):
            continue
        if z3.is_false(s):
            raise LiftError("a constraint is false for every assignment", term_symbols(c))
        out.append(c)
    return out


class SymbolSpace:
    """A solver over the symbols with the builder-level constraints."""

    def __init__(self, symbols: Sequence[str], a0: Mapping[str, int], hi: Mapping[str, int]):
        self.syms = {s: z3.Int(s) for s in symbols}
        self.a0 = dict(a0)
        self.hi = dict(hi)
        self.solver = z3.Solver()
        self.solver.set("rlimit", RLIMIT)
        for s, x in self.syms.items():
            self.solver.add(x >= 1, x <= self.hi[s])
        self.cons: list = []

    def add(self, cons: Sequence) -> None:
        self.cons += list(cons)
        self.solver.add(*cons)

    def sat(self, extra: Sequence = ()) -> bool:
        return self.solver.check(*extra) == z3.sat

    def value_in_model(self, s: str) -> int:
        return self.solver.model().eval(self.syms[s], model_completion=True).as_long()

    def problems(self, extra: Sequence, symbols: set[str] | None = None) -> set[str]:
        """Symbols that `extra` (on top of the constraints) would pin to fewer than MIN_VALUES
        values or tie to another symbol (checked for `symbols`: default all)."""
        names = sorted(self.syms if symbols is None else symbols & set(self.syms))
        bad: set[str] = set()
        a0_ok = [self.syms[s] == self.a0[s] for s in self.syms]
        if not self.sat(list(extra) + a0_ok):
            return set(names) or set(self.syms)  # cannot happen for a valid a0 graph
        for s in names:
            if not self._spread(s, list(extra)):
                bad.add(s)
        # independent symbols: with one fixed at its a0 value, the other keeps its values
        # (no `B == W + 3`, no `B == L or B == 1` from a concat or a broadcast)
        for i, s in enumerate(names):
            for t in names[i + 1:]:
                if s in bad or t in bad:
                    continue
                if not self._spread(t, list(extra) + [self.syms[s] == self.a0[s]]) or \
                        not self._spread(s, list(extra) + [self.syms[t] == self.a0[t]]):
                    bad.add(t)
        return bad

    def _spread(self, s: str, extra: list) -> bool:
        """Whether symbol `s` has MIN_VALUES feasible values under `extra`."""
        x = self.syms[s]
        seen = [self.a0[s]]
        for _ in range(MIN_VALUES - 1):
            if not self.sat(extra + [x != v for v in seen]):
                return False
            seen.append(self.value_in_model(s))
        return True

    def resolve(self, d: Any, extra: Sequence = ()) -> Any:
        """A dim term with if-then-else replaced by a branch it always equals, or None."""
        try:
            expr_of_z3(d)
            return d
        except ExprError:
            pass
        leaves = []
        todo = [d]
        while todo:
            x = todo.pop()
            if z3.is_app_of(x, z3.Z3_OP_ITE):
                todo += [x.arg(1), x.arg(2)]
            else:
                leaves.append(x)
        for leaf in leaves:
            try:
                expr_of_z3(leaf)
            except ExprError:
                continue
            if not self.sat(list(extra) + [d != leaf]):
                return leaf
        return None


# ---- generation --------------------------------------------------------------------------------

@dataclass
class DynSeed:
    """What the generator hands on: the symbols still alive with their roles and `a0` values,
    the symbolic dims of graph inputs and the symbolic attributes of instructions (by first
    result name), as dim expressions."""

    symbols: dict[str, str]
    a0: dict[str, int]
    input_dims: dict[str, tuple] = field(default_factory=dict)
    attrs: dict[str, dict[str, Any]] = field(default_factory=dict)


def _named(name: str) -> Value:
    """A value known by its name only: `DynShapeBuilder.sym_type` looks its type up."""
    return Value(name, cast(TensorType, None))


def _attr_exprs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    def one(x: Any) -> str | int:
        return expr_of_z3(x) if is_symbolic(x) else int(x)
    return {k: tuple(one(x) for x in v) if isinstance(v, tuple) else one(v)
            for k, v in attrs.items()}


class DynShapeBuilder(SymbolicGraphBuilder):
    """`SymbolicGraphBuilder` with a symbolic shadow of the top-level values (module doc)."""

    def __init__(self, rng: random.Random, cfg: GenConfig):
        super().__init__(rng, cfg)
        self.symbols: dict[str, str] = {}  # alive symbol -> role
        self.a0: dict[str, int] = {}
        self.hi: dict[str, int] = {}
        self.space: SymbolSpace | None = None
        self.lifter: Lifter | None = None
        self.attrs: dict[str, dict[str, Any]] = {}  # result name -> attr -> z3 terms / ints
        self.input_dims: dict[str, tuple] = {}  # input name -> dims (z3 terms / ints)
        self._synced = 0  # top-level instructions lifted so far
        self._admitted: set[int] = set()  # ids of instructions lifted on placement
        self._first = True
        self.stats = {"rejected": 0, "demoted": 0, "lift_errors": 0}

    # -- symbols
    def _choose_symbols(self, t: TensorType) -> TensorType:
        roles = LAYOUTS.get(t.rank, ())
        enabled = set(getattr(self.cfg, "dyn_dims", ROLES))
        picked: list[tuple[int, str]] = []
        spatial = iter(SYMBOL_NAMES["spatial"])
        for axis, role in enumerate(roles):
            if role is None:
                continue
            name = next(spatial) if role == "spatial" else SYMBOL_NAMES[role][0]
            if role in enabled and self.rng.random() < 0.7:
                picked.append((axis, name))
        if not picked:
            cands = [(axis, role) for axis, role in enumerate(roles) if role is not None and role in enabled]
            if cands:
                axis, role = self.rng.choice(cands)
                name = "H" if role == "spatial" and roles[:axis].count("spatial") == 0 else (
                    "W" if role == "spatial" else SYMBOL_NAMES[role][0])
                picked.append((axis, name))
        if not picked:
            return t
        hint = max(3, self.cfg.dim_hint)
        values = self.rng.sample(range(2, max(hint, len(picked) + 2) + 1), len(picked))
        dims = list(t.shape)
        sym_dims: list = list(t.shape)
        cap = self.dim_cap(t.rank)
        for (axis, name), v in zip(picked, values, strict=True):
            role = next(r for r, names in SYMBOL_NAMES.items() if name in names)
            self.symbols[name] = role
            self.a0[name] = min(v, cap)
            self.hi[name] = max(min(cap, 2 * self.cfg.dim_hint), self.a0[name] + 2)
            dims[axis] = self.a0[name]
            sym_dims[axis] = z3.Int(name)
        if len(set(self.a0.values())) != len(self.a0):  # a tiny cap: keep the symbols apart
            for name in list(self.symbols)[1:]:
                del self.symbols[name], self.a0[name], self.hi[name]
            sym_dims = [d if not is_symbolic(d) or d.decl().name() in self.symbols else dims[i]
                        for i, d in enumerate(sym_dims)]
        self.space = SymbolSpace(list(self.symbols), self.a0, self.hi)
        self.lifter = Lifter(list(self.symbols), self.a0, self.cfg)
        concrete = TensorType(tuple(dims), t.dtype)
        self._pending_first = TensorType(tuple(sym_dims), t.dtype)
        return concrete

    def add_input(self, t: TensorType, param: bool = False) -> Value:
        if self._first and not param and not self.inputs:
            self._first = False
            t = self._choose_symbols(t)
            v = super().add_input(t, param)
            if self.symbols:
                self.input_dims[v.name] = self._pending_first.shape
                self.lift.env[v.name] = self._pending_first
            return v
        return super().add_input(t, param)

    @property
    def live(self) -> bool:
        return bool(self.symbols)

    @property
    def lift(self) -> Lifter:
        """The lifter (made with the first input's symbols; used only while `live`)."""
        assert self.lifter is not None, "no symbols chosen yet"
        return self.lifter

    @property
    def sym_space(self) -> SymbolSpace:
        """The solver over the symbols (made with the lifter)."""
        assert self.space is not None, "no symbols chosen yet"
        return self.space

    def sym_type(self, v: Value) -> TensorType:
        if self.lifter is not None and v.name in self.lifter.env:
            return self.lifter.env[v.name]
        if v.type is not None:
            return v.type
        for u in (*self.inputs, *self.params):
            if u.name == v.name:
                return u.type
        for inst in self.insts:
            for r in inst.results:
                if r.name == v.name:
                    return r.type
        raise KeyError(v.name)

    # -- demotion
    def demote(self, names: AbstractSet[str]) -> None:
        """Fix these symbols to their a0 values everywhere, then lift everything again."""
        names = set(names) & set(self.symbols)
        if not names:
            names = set(self.symbols)  # unattributable failure: give up on dynamic shapes
        self.stats["demoted"] += len(names)
        subs = [(z3.Int(s), z3.IntVal(self.a0[s])) for s in names]

        def sub(x: Any) -> Any:
            return z3.simplify(z3.substitute(x, *subs)) if is_symbolic(x) else x

        def conc(x: Any) -> Any:
            x = sub(x)
            return x.as_long() if is_symbolic(x) and z3.is_int_value(x) else x

        for s in names:
            del self.symbols[s]
        self.input_dims = {k: tuple(conc(d) for d in v) for k, v in self.input_dims.items()}
        self.input_dims = {k: v for k, v in self.input_dims.items() if any(map(is_symbolic, v))}
        self.attrs = {k: {a: tuple(conc(x) for x in v) if isinstance(v, tuple) else conc(v)
                          for a, v in d.items()} for k, d in self.attrs.items()}
        self.attrs = {k: d for k, d in self.attrs.items()
                      if any(is_symbolic(x) for v in d.values()
                             for x in (v if isinstance(v, tuple) else (v,)))}
        self._relift()

    def _relift(self) -> None:
        """Lift every top-level instruction placed so far from scratch (after a demotion)."""
        self.space = SymbolSpace(list(self.symbols), self.a0, self.hi)
        self.lifter = Lifter(list(self.symbols), self.a0, self.cfg)
        for v in (*self.inputs, *self.params):
            self.lifter.env[v.name] = TensorType(self.input_dims.get(v.name, v.type.shape), v.type.dtype)
        self._synced = 0
        self._admitted = set()
        self._sync()

    def admit(self, insts: Sequence[Inst]) -> bool:
        """Lift placed control flow (its predicate's instructions first): refuse it if it would
        pin a symbol or give a symbolic dim a 0/1 value at a0, else commit its types."""
        self._sync()
        if not self.live:
            return True
        env = dict(self.lift.env)
        zc_all: list = []
        try:
            for inst in insts:
                ins = [self.sym_type(_named(a)) for a in inst.args]
                outs, cons = self.lift.lift_inst(inst, ins)
                zc = z3_constraints(cons)
                zc_all += zc
                outs = self._resolved(outs, zc_all)
                for r, t in zip(inst.results, outs, strict=True):
                    self.lift.env[r.name] = t
            self.lift.check_generic([self.lift.env[k] for k in self.lift.env.keys() - env.keys()])
            involved = set().union(*(term_symbols(c) for c in zc_all)) if zc_all else set()
            bad = self.sym_space.problems(zc_all, involved) if zc_all else set()
        except LiftError:
            bad = {"?"}
        if bad:
            self.lift.env = env
            self.stats["rejected"] += 1
            return False
        self.sym_space.add(zc_all)
        self._admitted.update(id(inst) for inst in insts)
        return True

    def _sync(self) -> None:
        """Lift top-level instructions appended since the last call (none but what `admit` and
        `_accept` lifted already, unless a caller appends on its own)."""
        while self.live and self._synced < len(self.insts):
            inst = self.insts[self._synced]
            if id(inst) in self._admitted:
                self._synced += 1
                continue
            try:
                ins = [self.sym_type(_named(a)) for a in inst.args]
                attrs = self.attrs.get(inst.results[0].name) if inst.results else None
                outs, cons = self.lift.lift_inst(inst, ins, attrs)
                zc = z3_constraints(cons)
                outs = self._resolved(outs, zc)
                self.lift.check_generic(outs)
                for _name, t in self.lift.env.items():  # body values lifted on the way
                    self.lift.check_generic([t])
                bad = self.sym_space.problems(zc, set().union(*(term_symbols(c) for c in zc))) if zc else set()
            except LiftError as e:
                self.stats["lift_errors"] += 1
                self.demote(e.symbols)
                return
            if bad:
                self.demote(bad)
                return
            self.sym_space.add(zc)
            for r, t in zip(inst.results, outs, strict=True):
                self.lift.env[r.name] = t
            self._synced += 1

    def _resolved(self, outs: list[TensorType], zc: list) -> list[TensorType]:
        res = []
        for t in outs:
            dims = []
            for d in t.shape:
                if is_symbolic(d):
                    r = self.sym_space.resolve(d, zc)
                    if r is None:
                        raise LiftError(f"dim {d} has no expression", term_symbols(d))
                    d = r
                dims.append(d)
            res.append(TensorType(tuple(dims), t.dtype))
        return res

    # -- placement
    def try_op(self, op_cls: type[Op], first: Value, candidates: Sequence[Value],
               dtypes: tuple[DType, ...], arity: int, target: TensorType | None = None,
               op: Op | None = None, allow_new: bool = True, new_params: bool | None = None
               ) -> Inst | None:
        if not self.live or not allow_new:
            # bodies, predicates: concrete here, lifted after the fact (`_sync`)
            return super().try_op(op_cls, first, candidates, dtypes, arity, target, op,
                                  allow_new, new_params)
        self._sync()
        if not self.live:
            return super().try_op(op_cls, first, candidates, dtypes, arity, target, op,
                                  allow_new, new_params)
        sym_attrs = None
        if op is None and type_symbols(self.sym_type(first)):
            made = sample_expr_op(self, op_cls, self.sym_type(first))
            if made is not None:
                op, sym_attrs = made
        for attempt in range(2):
            n_in, n_par = len(self.inputs), len(self.params)
            inst = super().try_op(op_cls, first, candidates, dtypes, arity, target, op,
                                  allow_new, new_params if attempt == 0 else False)
            if inst is None:
                return None
            made_params = len(self.params) > n_par
            if self._accept(inst, sym_attrs, self.inputs[n_in:], self.params[n_par:]):
                self._admitted.add(id(inst))
                return inst
            del self.inputs[n_in:]
            del self.params[n_par:]
            self.stats["rejected"] += 1
            if not made_params or new_params is False:
                break  # a retry makes every new placeholder a graph input (may be symbolic)
        return None

    def _accept(self, inst: Inst, sym_attrs: dict[str, Any] | None, new_inputs: list[Value],
                new_params: list[Value]) -> bool:
        """Lift a new top-level instruction (choosing symbolic dims for its new graph inputs);
        commit it when the symbols stay free, else refuse it."""
        by_value = {v: s for s, v in self.a0.items() if s in self.symbols}
        options: list[dict[str, TensorType]] = []
        lifted = {}
        for v in new_inputs:
            dims = tuple(z3.Int(by_value[d]) if d in by_value else d for d in v.type.shape)
            lifted[v.name] = TensorType(dims, v.type.dtype)
        if any(type_symbols(t) for t in lifted.values()):
            options.append(lifted)
        options.append({})
        for choice in options:
            for name, t in choice.items():
                self.lift.env[name] = t
            try:
                ins = [self.sym_type(_named(a)) for a in inst.args]
                outs, cons = self.lift.lift_inst(inst, ins, sym_attrs)
                zc = z3_constraints(cons)
                outs = self._resolved(outs, zc)
                self.lift.check_generic(outs)
                involved = set().union(*(term_symbols(c) for c in zc)) if zc else set()
                bad = self.sym_space.problems(zc, involved) if zc else set()
            except LiftError:
                bad = {"?"}
            if not bad:
                self.sym_space.add(zc)
                for r, t in zip(inst.results, outs, strict=True):
                    self.lift.env[r.name] = t
                for name, t in choice.items():
                    if type_symbols(t):
                        self.input_dims[name] = t.shape
                if sym_attrs and any(term_symbols(x) for v in sym_attrs.values()
                                     for x in (v if isinstance(v, tuple) else (v,))):
                    self.attrs[inst.results[0].name] = dict(sym_attrs)
                return True
            for name in choice:
                self.lift.env.pop(name, None)
        return False

    def seed_info(self) -> DynSeed:
        self._sync()
        return DynSeed(dict(self.symbols), {s: self.a0[s] for s in self.symbols},
                       {k: tuple(expr_of_z3(d) if is_symbolic(d) else int(d) for d in v)
                        for k, v in self.input_dims.items()},
                       {k: _attr_exprs(v) for k, v in self.attrs.items()})


def sample_expr_op(b: DynShapeBuilder, op_cls: type[Op], first: TensorType
                   ) -> tuple[Op, dict[str, Any]] | None:
    """Attributes over the symbols for an op that writes them (`Op.sample_symbolic`: reshape,
    expand, slice, split) on a value with symbolic dims: (the op at a0, its symbolic
    attributes), or None (sample as usual)."""
    ctx = SymbolicSampleContext(b.rng, [z3.Int(s) for s in b.symbols], max(2, b.cfg.dim_hint),
                                b.cfg.max_rank)
    attrs = op_cls.sample_symbolic(ctx, first)
    if attrs is None:
        return None
    sym_attrs = {k: (tuple(z3.simplify(x) if is_symbolic(x) else x for x in v)
                     if isinstance(v, tuple) else (z3.simplify(v) if is_symbolic(v) else v))
                 for k, v in attrs.items()}
    lifter = b.lift
    try:
        concrete = {k: tuple(lifter.at_a0(x) for x in v) if isinstance(v, tuple) else lifter.at_a0(v)
                    for k, v in sym_attrs.items()}
    except LiftError:
        return None
    fields = {f.name for f in dataclasses.fields(op_cls)}
    base = {k: v for k, v in concrete.items() if k in fields}
    if set(base) != fields:
        return None
    return op_cls(**base), {k: v for k, v in sym_attrs.items()
                            if any(is_symbolic(x) for x in (v if isinstance(v, tuple) else (v,)))}


def generate_dyn(seed: int, cfg: GenConfig) -> tuple[Graph, DynSeed]:
    """A verified concrete graph (input set 0) and which of its dims stay symbolic."""
    rng = random.Random(seed)
    b = DynShapeBuilder(rng, cfg)
    g = generate_once(rng, cfg, seed, builder=b)
    return g, b.seed_info()


# ---- finishing a test: lift the final graph, draw the assignments ------------------------------

@dataclass
class Finished:
    dyn: DynShape | None
    #: why the test has no symbolic dims left (None when it has)
    reason: str | None = None
    demoted: list[str] = field(default_factory=list)


def lift_graph(g: Graph, seed: DynSeed, cfg: GenConfig, a0: Mapping[str, int], symbols: Sequence[str]
               ) -> tuple[Lifter, SymbolSpace]:
    """Lift every value of `g` (bodies included); raises LiftError naming symbols to demote,
    or for symbols the constraints pin (`problems`)."""
    from ir.materialize.dynshape import z3_of_expr

    lifter = Lifter(symbols, a0, cfg)
    hi = {s: max(min(lifter.dim_cap(1), 2 * cfg.dim_hint), a0[s] + 2) for s in symbols}
    space = SymbolSpace(symbols, a0, hi)
    syms = lifter.syms
    for v in (*g.inputs, *g.params):
        dims = seed.input_dims.get(v.name)
        if dims is not None and len(dims) == v.type.rank and v not in g.params:
            t = TensorType(tuple(z3_of_expr(d, syms) if not isinstance(d, int) else d for d in dims),
                           v.type.dtype)
        else:
            t = v.type
        lifter.env[v.name] = t
    cons: list = []
    for inst in g.insts:
        raw = seed.attrs.get(inst.results[0].name) if inst.results else None
        attrs = None
        if raw:
            attrs = {k: tuple(z3_of_expr(x, syms) for x in v) if isinstance(v, tuple)
                     else z3_of_expr(v, syms) for k, v in raw.items()}
        ins = [lifter.env[a] for a in inst.args]
        outs, c = lifter.lift_inst(inst, ins, attrs)
        for r, t in zip(inst.results, outs, strict=True):
            lifter.env[r.name] = t
        cons += c
    zc = z3_constraints(cons)
    space.add(zc)
    for name, t in list(lifter.env.items()):
        if type_symbols(t):
            resolved = []
            for d in t.shape:
                if is_symbolic(d):
                    r = space.resolve(d)
                    if r is None:
                        raise LiftError(f"dim {d} of %{name} has no expression", term_symbols(d))
                    d = r
                resolved.append(d)
            lifter.env[name] = TensorType(tuple(resolved), t.dtype)
    lifter.check_generic(list(lifter.env.values()))
    bad = space.problems([])
    if bad:
        raise LiftError(f"pinned: {sorted(bad)}", bad)
    return lifter, space


def _demote_seed(seed: DynSeed, names: set[str]) -> DynSeed:
    from ir.materialize.dynshape import eval_expr, expr_symbols

    keep = {s: r for s, r in seed.symbols.items() if s not in names}
    fixed = {s: seed.a0[s] for s in names}

    def one(x: int | str) -> int | str:
        if isinstance(x, int) or not (expr_symbols(x) & names):
            return x
        env = {**{s: z3.Int(s) for s in keep}, **fixed}
        from ir.materialize.dynshape import z3_of_expr

        return expr_of_z3(z3_of_expr(x, env) if expr_symbols(x) - names else
                          z3.IntVal(eval_expr(x, fixed)))

    dims = {k: tuple(one(d) for d in v) for k, v in seed.input_dims.items()}
    attrs = {k: {a: tuple(one(x) for x in v) if isinstance(v, tuple) else one(v)
                 for a, v in d.items()} for k, d in seed.attrs.items()}
    return DynSeed(keep, {s: seed.a0[s] for s in keep}, dims, attrs)


def draw_assignments(space: SymbolSpace, n: int, rng: random.Random) -> list[dict[str, int]]:
    """Up to `n` distinct assignments: a0, the smallest, the largest, then seeded draws."""
    names = list(space.syms)
    x = space.syms
    out = [dict(space.a0)]

    def differs() -> list:
        return [z3.Or(*[x[s] != a[s] for s in names]) for a in out]

    def extreme(smallest: bool) -> dict[str, int] | None:
        fixed: list = []
        got: dict[str, int] = {}
        for s in names:
            lo, hi = 1, space.hi[s]
            if not space.sat(fixed):
                return None
            # binary search for the extreme feasible value of s given the others fixed
            while lo < hi:
                mid = (lo + hi) // 2 if smallest else (lo + hi + 1) // 2
                test = x[s] <= mid if smallest else x[s] >= mid
                if space.sat(fixed + [test]):
                    hi, lo = (mid, lo) if smallest else (hi, mid)
                else:
                    lo, hi = (mid + 1, hi) if smallest else (lo, mid - 1)
            if not space.sat(fixed + [x[s] == lo]):
                return None
            fixed.append(x[s] == lo)
            got[s] = lo
        return got

    for smallest in (True, False):
        if len(out) >= n:
            break
        a = extreme(smallest)
        if a is not None and a not in out:
            out.append(a)
    tries = 0
    while len(out) < n and tries < 4 * n:
        tries += 1
        base = differs()
        if not space.sat(base):
            break
        fixed: list = []
        got: dict[str, int] = {}
        for s in names:
            values = list(range(1, space.hi[s] + 1))
            rng.shuffle(values)
            for v in values:
                if space.sat(base + fixed + [x[s] == v]):
                    fixed.append(x[s] == v)
                    got[s] = v
                    break
            else:
                got = {}
                break
        if got and got not in out:
            out.append(got)
    return out


def finish(g: Graph, seed: DynSeed, cfg: GenConfig, rng: random.Random) -> Finished:
    """The dynamic-shape description of a final concrete graph (after mutation and repair):
    lift it, demote pinned symbols, draw and check the assignments."""
    demoted: list[str] = []
    cur = seed
    lifter = space = None
    for _ in range(len(seed.symbols) + 1):
        if not cur.symbols:
            break
        try:
            lifter, space = lift_graph(g, cur, cfg, cur.a0, list(cur.symbols))
            break
        except LiftError as e:
            names = set(e.symbols) & set(cur.symbols) or set(cur.symbols)
            demoted += sorted(names)
            cur = _demote_seed(cur, names)
    if cur.symbols and lifter is not None:
        # a symbol no value has any more (the repairs dropped what read it) is no dim at all
        used = set().union(*(type_symbols(t) for t in lifter.env.values()))
        if set(cur.symbols) - used:
            cur = _demote_seed(cur, set(cur.symbols) - used)
            lifter, space = (lift_graph(g, cur, cfg, cur.a0, list(cur.symbols)) if cur.symbols
                             else (None, None))
    if not cur.symbols or lifter is None or space is None:
        return Finished(None, "no symbolic dim left (pinned by the graph's constraints, or "
                              "dropped by its repairs)", demoted)
    n = max(2, int(getattr(cfg, "dyn_sets", 4)))
    assignments = draw_assignments(space, n, rng)
    dims = {}
    for name, t in lifter.env.items():
        if type_symbols(t):
            dims[name] = tuple(tidy(expr_of_z3(d)) if is_symbolic(d) else int(d) for d in t.shape)
    attrs = {k: {a: tuple(tidy(x) for x in v) if isinstance(v, tuple) else tidy(v)
                 for a, v in d.items()} for k, d in cur.attrs.items()
             if k in lifter.env}
    dyn = DynShape(dict(cur.symbols), dims, attrs, [], [],
                   "infer" if rng.random() < 0.3 else "compute")
    checked = []
    for a in assignments:
        try:
            verify(instantiate(g, dyn, a))
        except (VerifyError, ExprError, ZeroDivisionError):
            continue
        checked.append(a)
    if len(checked) < 2 or checked[0] != assignments[0]:
        return Finished(None, f"only {len(checked)} assignment(s) verify", demoted)
    dyn.assignments = checked
    dyn.set_assignment = list(range(len(checked)))
    return Finished(dyn, None, demoted)
