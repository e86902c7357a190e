"""Re-solving instructions after their operand types change, shared by the mutators that change
types (`mutate_attrs`, `mutate_shape`, `splice`): an instruction keeps its attributes while its
type rule still accepts the new types (`keep_types`), else it is re-solved with z3 (`repropagate`);
the weights and inputs only it reads may be rebuilt (`replaceable`).
"""
from __future__ import annotations

import random
from typing import Any, Protocol

from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op, TypeRuleError
from ir.core.shapes import holds
from ir.core.types import TensorType
from ir.gen.builder import GenConfig, SymbolicGraphBuilder
from mutators.scope import (
    pure,
)
from mutators.solve import NEW, NEW_PARAM, solve


class SolveCtx(Protocol):
    """What re-solving instructions reads of a `Ctx` (`_DonorCtx` stands in for one)."""

    b: SymbolicGraphBuilder
    rng: random.Random
    gen: GenConfig

    @property
    def root(self) -> bool: ...


def plain(inst: Inst) -> bool:
    """An ordinary pure op (no bodies, no view or write, placed by the generator)."""
    return not inst.blocks and pure(inst.op) and inst.op.generic


def exclusive(g: Graph, name: str, index: int) -> bool:
    """`name` is read by instruction `index` only (once) and is not an output."""
    return name not in g.outputs and g.users(name) == [index] and g.insts[index].args.count(name) == 1


def replaceable(g: Graph, ctx: SolveCtx, index: int) -> dict[str, str]:
    """Operands of instruction `index` that may be rebuilt: at the top level, params and graph
    inputs nothing else reads (NEW_PARAM / NEW)."""
    if not ctx.root:
        return {}
    params = {p.name for p in g.params}
    inputs = {v.name for v in g.inputs}
    out = {}
    for a in g.insts[index].args[1:]:
        if exclusive(g, a, index):
            if a in params:
                out[a] = NEW_PARAM
            elif a in inputs and len(g.inputs) > 1:
                out[a] = NEW
    return out


def jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return [jsonable(x) for x in v]
    if isinstance(v, (int, float, bool, str)) or v is None:
        return v
    return str(v)


def repropagate(g: Graph, ctx: SolveCtx, start: int, types: dict[str, TensorType],
                rebuild_ok: bool) -> list[Inst] | None:
    """Instructions `start:` of `g` re-typed after some values changed type (`types`: every
    value's type, the changed ones already new; updated in place). An instruction reading a
    changed value keeps its attributes if they still hold, else is re-solved with fresh ones
    (its exclusive weights and inputs rebuilt when `rebuild_ok`); its results keep their names.
    None when some instruction cannot be re-solved (or has bodies or memory effects)."""
    out: list[Inst] = []
    orig = g.types()
    for i in range(start, len(g.insts)):
        inst = g.insts[i]
        ins = [types[a] for a in inst.args]
        if all(t == orig[a] for a, t in zip(inst.args, ins, strict=True)):
            out.append(inst)
            continue
        if not plain(inst):
            return None
        outs = keep_types(inst.op, ins, ctx)
        if outs is not None:
            new = Inst(inst.op, inst.args, tuple(Value(r.name, t) for r, t in zip(inst.results, outs, strict=True)))
        else:
            rebuild = replaceable(g, ctx, i) if rebuild_ok else {}
            args: list[Value | str] = [Value(inst.args[0], ins[0]), *(
                rebuild.get(a, Value(a, t)) for a, t in zip(inst.args[1:], ins[1:], strict=True))]
            solved = solve(ctx.b, type(inst.op), args, [t.dtype for t in ins],
                           names=inst.result_names)
            if solved is None:
                return None
            new = solved
        types.update((r.name, r.type) for r in new.results)
        out.append(new)
    return out


def keep_types(op: Op, ins: list[TensorType], ctx: SolveCtx) -> list[TensorType] | None:
    """The result types of `op` over `ins` when its attributes still fit them (its type rule,
    `Op.type_rule`, accepts them and they are within the backend's bounds)."""
    try:
        outs = op.type_rule(ins)
    except TypeRuleError:
        return None
    if not all(all(isinstance(c, bool) and c or holds(c) for c in ctx.b.bounds(t)) for t in outs):
        return None
    return outs
