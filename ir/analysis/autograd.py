"""Autograd's view of a graph: which values carry gradients, and autograd's rules for in-place
writes (docs/training.md).

A *gradient test* differentiates a graph's float outputs with respect to some of its float
inputs and params, its *leaves*. torch eager refuses two kinds of in-place write in such a
program, and a test it refuses is our bug, never a finding, so the generator keeps to them:
  - a write to a leaf that requires grad, or to a view of one ("a leaf Variable that requires
    grad is being used in an in-place operation");
  - a write to memory autograd saved for backward: an operand or result of an earlier op whose
    result requires grad and whose backward reads them (`Op.saves_for_backward`), written
    afterwards (eager, at backward: "one of the variables needed for gradient computation has
    been modified by an inplace operation").

The analysis follows the in-place analysis' storage (alias) classes (`ir.analysis.inplace`) in
program order, bodies included (a body's inputs carry gradients when any operand of its
instruction does), and is conservative: an op counts as saving all of its operands and
results unless it declares it saves nothing, and a storage once saved stays saved.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ir.analysis.inplace import Level, Storage, analyze, has_writes
from ir.core.graph import Graph

#: the refused programs: rule -> the message's shape (tests check each exactly)
AUTOGRAD_REJECTIONS = {
    "leaf": ("writes %{x}{via}, a leaf that requires grad: autograd refuses in-place writes "
             "to leaves and their views"),
    "saved": ("writes %{x}{via}, which inst {i} ({op}) saved for backward: the backward would "
              "read overwritten values"),
    "mutating_custom": ("mutates %{x} with an operand that requires grad: torch has no autograd "
                        "formula for a custom op that mutates its arguments"),
}


class AutogradError(ValueError):
    """A gradient test torch eager would refuse (`AUTOGRAD_REJECTIONS`); the message is one
    line naming the instruction."""


@dataclass
class _State:
    """Per storage of one level: whether it holds a value that requires grad, and the
    instruction that saved it for backward (None: not saved)."""

    grad: set[int] = field(default_factory=set)
    saved: dict[int, tuple[int, str]] = field(default_factory=dict)


def grad_values(g: Graph, leaves: Iterable[str]) -> set[str]:
    """The names of the values of `g`'s top level that require grad when `leaves` do: float
    results of instructions with an operand that does (views and writes included: a view of
    memory holding such a value, and memory written with one)."""
    return _walk(g, frozenset(leaves), check=False)


def autograd_problem(g: Graph, leaves: Iterable[str]) -> str | None:
    """Why torch eager would refuse to differentiate `g` with respect to `leaves` (one line
    naming the instruction, `AUTOGRAD_REJECTIONS`), or None."""
    try:
        _walk(g, frozenset(leaves), check=True)
    except AutogradError as e:
        return str(e)
    return None


def _walk(g: Graph, leaves: frozenset[str], check: bool) -> set[str]:
    if not has_writes(g):
        return _pure_cone(g, leaves)
    requires: set[str] = set()
    _level(analyze(g, require_returned=False).top, set(leaves), leaves, requires, check)
    return requires


def _pure_cone(g: Graph, requires_in: frozenset[str]) -> set[str]:
    requires = set(requires_in)
    for inst in g.insts:
        if any(a in requires for a in inst.args):
            requires |= {r.name for r in inst.results if r.type.dtype.is_float}
    return requires


def _level(lv: Level, requires: set[str], leaves: frozenset[str], out: set[str],
           check: bool) -> None:
    """Follow one level in program order; `requires` holds its inputs that require grad and
    collects its values that do; `leaves`: the storage bases refused as write targets;
    `check`: raise `AutogradError` at the first refused write (else only follow)."""
    state = _State()
    g = lv.graph

    def storage(name: str) -> Storage:
        return lv.node(name).storage

    def holds_grad(name: str) -> bool:
        return lv.canon(name) in requires or id(storage(name)) in state.grad

    for v in (*g.inputs, *g.params):
        if v.name in requires:
            state.grad.add(id(storage(v.name)))
    for index, inst in enumerate(g.insts):
        eff = inst.op.effect
        flows = any(holds_grad(a) for a in inst.args)
        if check and eff.mutates and flows:
            raise AutogradError(f"{lv.path}, inst {index} ({inst.op.name}): "
                                + AUTOGRAD_REJECTIONS["mutating_custom"].format(
                                    x=inst.args[eff.mutates[0]]))
        if eff.writes is not None:
            dest = inst.args[eff.writes]
            st = storage(dest)
            via = f" through %{dest}" if dest != st.base else ""
            where = f"{lv.path}, inst {index} ({inst.op.name}): "
            if check and st.base in leaves:
                raise AutogradError(where + AUTOGRAD_REJECTIONS["leaf"].format(x=st.base, via=via))
            if check and id(st) in state.saved:
                i, op = state.saved[id(st)]
                raise AutogradError(where + AUTOGRAD_REJECTIONS["saved"].format(
                    x=st.base, via=via, i=i, op=op))
            if flows:
                state.grad.add(id(st))
        if flows:
            for r in inst.results:
                if r.type.dtype.is_float or eff.view_of is not None:
                    requires.add(r.name)
            if eff.view_of is None and inst.op.saves_for_backward:
                for name in (*inst.args, *inst.result_names):
                    state.saved.setdefault(id(storage(name)), (index, inst.op.name))
        for body in lv.bodies.get(index, []):
            inner = {v.name for v in body.graph.inputs if flows and v.type.dtype.is_float}
            _level(body, inner, frozenset(), set(), check)
    out |= requires
