"""`dce`: the reducer's semantics-preserving cleanup of every candidate.

Not `ir.core.rewrite.remove_unused`, which works on one level and is what the generator and the
mutators use (their graphs must stay as they were built): `dce` goes into every body, prunes the
results, operands and carried values of control-flow instructions that nobody needs (each op
says how: `ControlFlow.prune`), and in a graph with any memory effect keeps every instruction
that has one (views too, whose storage a write elsewhere may reach).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ir.core.graph import Graph, Inst
from ir.ops.control import is_control


def dce(g: Graph, top: bool = True) -> Graph:
    """Drop instructions whose results nobody reads (nested levels too), results, operands and
    carried values of control-flow instructions that nobody needs, and (top level) unread inputs
    and params. A body keeps its signature except where its instruction's operands change with
    it. Instructions with memory effects (in-place writes, views) are all kept."""
    effects = not all(inst.op.effect.pure for inst, _ in g.walk())
    live = set(g.outputs)
    kept: list[Inst] = []
    for inst in reversed(g.insts):
        pure = inst.op.effect.pure
        used = [k for k, r in enumerate(inst.results) if r.name in live]
        if not used and (pure or not effects):
            continue
        if inst.blocks:
            inst = _prune_control(inst, set(used) if pure else set(range(len(inst.results))))
        kept.append(inst)
        live.update(inst.args)
    kept.reverse()
    out = g.with_insts(kept)
    if top:
        inputs = tuple(v for v in g.inputs if v.name in live)
        params = tuple(v for v in g.params if v.name in live)
        if not inputs and not params:
            inputs = g.inputs[:1]
        out = replace(out, inputs=inputs, params=params)
    return out


def _body_outputs(body: Graph, keep: Sequence[int]) -> Graph:
    return dce(body.with_insts(body.insts, [body.outputs[k] for k in keep]), top=False)


def _prune_control(inst: Inst, used: set[int]) -> Inst:
    if is_control(inst.op):
        return inst.op.prune(inst, used, _body_outputs)
    return replace(inst, blocks=tuple(dce(b, top=False) for b in inst.blocks))
