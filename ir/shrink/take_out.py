"""Taking a control-flow cause out of a test: every instruction of one op that ran, on each of
the test's input sets, exactly as one of its inlinings (`ControlFlow.exact_inlining`: a loop of
zero trips, an if that took its else branch) is replaced by that inlining. On those inputs the
new program computes what the old one did, without the construct. A cause probe
(`campaign.triage.pipeline.cause_probe`) runs it on the compiler: a failure that goes away is
a failure that needed the construct.

Invariants of a `TakenOut`: the program keeps every input, param and output name of the
original (a leaf the construct alone read stays a leaf: its gradient is still checked, now
zero), it verifies, and on every given input set its outputs equal the original's (checked
here, on the eager reference; a rewrite that changes them is refused, None).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ir.core.graph import Graph, Inst, Value
from ir.core.paths import Site, control_sites
from ir.core.verify import VerifyError, verify
from ir.ops.control import is_control
from ir.shrink.deadcode import dce
from ir.shrink.inline import inline

#: a program and the full values of one input set (inputs and params), in the program's shapes
InputSet = tuple[Graph, Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class TakenOut:
    """The program without the construct (module doc), the start values of inputs it added
    (a loop counter's zeros), and the sites replaced, as text (`3`, `3/0/1`)."""

    graph: Graph
    added: dict[str, np.ndarray]
    sites: tuple[str, ...]


def _tensors(values: Mapping[str, np.ndarray]) -> dict:
    """Torch copies of `values` (a run may write its inputs in place)."""
    import torch

    return {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}


def runs_by_site(g: Graph, values: Mapping[str, np.ndarray]) -> dict[str, list[list[int]]] | None:
    """Per control-flow site of `g`, the bodies each of its runs ran on `values` (the checked
    evaluation's trace, `ir.numerics.domain`); None when the inputs are invalid there."""
    from ir.numerics.domain import evaluate_checked

    runs: dict[str, list[list[int]]] = {}
    _, violation = evaluate_checked(g, _tensors(values), trace=lambda site, ran, _: runs.setdefault(
        site, []).append(list(ran)))
    return None if violation is not None else runs


def exact_sites(g: Graph, sets: Sequence[InputSet], op: str, inlining: str) -> list[Site]:
    """The sites of `op` instructions that ran as inlining `inlining` on every run of every
    input set (and ran at least once)."""
    per_set = []
    for graph, values in sets:
        runs = runs_by_site(graph, values)
        if runs is None:
            return []
        per_set.append(runs)
    types_at = {}
    found = []
    for site, inst in control_sites(g):
        if inst.op.name != op or not is_control(inst.op):
            continue
        scope = site.scope
        if scope not in types_at:
            types_at[scope] = scope.at(g).types()
        ins = [types_at[scope][a] for a in inst.args]
        ran = [r for runs in per_set for r in runs.get(str(site), [])]
        ways = [inst.op.exact_inlining(inst, ins, r) for r in ran]
        if ran and all(w is not None and w.desc == inlining for w in ways):
            found.append(site)
    return found


def _keep_names(original: Graph, g: Graph) -> Graph:
    """`g` with the original's output names: an output that became another value (a loop's
    result, now its operand) is a clone of it under the old name, free since the instruction
    that made it is gone (gradient tests key their cotangents by output name)."""
    from ir.core.op import lookup_op

    types = g.types()
    insts, outs = list(g.insts), []
    for old, new in zip(original.outputs, g.outputs, strict=True):
        if old == new or old in types:
            outs.append(new)
            continue
        insts.append(Inst(lookup_op("clone")(), (new,), (Value(old, types[new]),)))
        outs.append(old)
    return g.with_insts(insts, outs)


def take_out(g: Graph, sets: Sequence[InputSet], op: str, inlining: str) -> TakenOut | None:
    """`g` without its `op` instructions that ran as `inlining` on every input set of `sets`
    (each a program for that set's shapes and its values; the first is `g`'s), or None when
    there is none, or the rewrite cannot keep the module doc's invariants."""
    sites = exact_sites(g, sets, op, inlining)
    if not sites:
        return None
    h, added = g, {}
    # deepest first, then the last in each scope: an inlining moves only what follows it
    for site in sorted(sites, key=lambda s: (-len(s), tuple(-x for x in s))):
        inst = site.inst(h)
        types = site.scope.at(h).types()
        assert is_control(inst.op)
        way = next((w for w in inst.op.inlinings(inst, [types[a] for a in inst.args])
                    if w.desc == inlining), None)
        out = None if way is None else inline(h, site.scope, site.index, way)
        if out is None:
            return None
        h, new = out
        added.update(new)
    h = _keep_names(g, dce(h, top=False))
    if len(h.outputs) != len(g.outputs) or [v.name for v in g.inputs] != [
            v.name for v in h.inputs][:len(g.inputs)]:
        return None
    try:
        verify(h)
    except VerifyError:
        return None
    if not all(_same_outputs(g, h, values, added, graph) for graph, values in sets):
        return None
    return TakenOut(h, added, tuple(str(s) for s in sites))


def _same_outputs(g: Graph, h: Graph, values: Mapping[str, np.ndarray],
                  added: Mapping[str, np.ndarray], graph: Graph) -> bool:
    """Whether `h` computes `g`'s outputs on one input set (eager reference; `graph` is `g`
    in that set's shapes, which `h` is run in only when it is `g` itself)."""

    from ir.materialize.to_torch import run_graph_torch

    if graph is not g:
        return True  # another set's shapes: the traced runs already said it ran the same way
    try:
        want = run_graph_torch(g, _tensors(values))
        got = run_graph_torch(h, _tensors({**values, **added}))
    except Exception:
        return False
    return all(tuple(a.shape) == tuple(b.shape)
               and np.allclose(np.asarray(a.detach()), np.asarray(b.detach()), rtol=1e-6,
                               atol=1e-6, equal_nan=True)
               for a, b in zip(want, got, strict=True))
