"""Graph rewrites shared by the generator, mutators and reducer.

Graphs are immutable; every function here returns a new graph and keeps the SSA invariants the
verifier checks (names stay unique, definitions precede uses) when its preconditions hold.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names


def rename_canonically(g: Graph) -> Graph:
    """Rename every value in definition order (x: inputs, w: params, v: results, one counter
    across nesting levels), so graphs equal up to naming print identically."""
    names = Names()  # every name is new: none of `g`'s stays
    return rename_values(g, lambda v, kind: names.fresh(kind))


def rename_prefixed(g: Graph, prefix: str) -> Graph:
    """Every value, bodies included, renamed to `prefix + name`: names unique in `g` stay
    unique, and two graphs renamed with prefixes none of which is a prefix of another (`p0_`,
    `p1_`, ...: the `_` ends the number) share no name, so their union is a valid graph
    (`campaign.merge`)."""
    return rename_values(g, lambda v, kind: prefix + v.name)


def rename_values(g: Graph, new_name: Callable[[Value, str], str]) -> Graph:
    """Rename every value definition-first, bodies included: `new_name(value, kind)` gives the
    new name, `kind` being `x` (an input, body inputs too), `w` (a param) or `v` (a result);
    it is called once per definition, in definition order (a body before its instruction's
    results). The caller keeps the names unique across nesting levels."""
    return _rename(g, {}, new_name)


def _rename(g: Graph, outer: dict[str, str], new_name: Callable[[Value, str], str]) -> Graph:
    names = dict(outer)

    def fresh(v: Value, kind: str) -> Value:
        names[v.name] = new_name(v, kind)
        return Value(names[v.name], v.type)

    inputs = tuple(fresh(v, "x") for v in g.inputs)
    params = tuple(fresh(v, "w") for v in g.params)
    insts = []
    for inst in g.insts:
        args = tuple(names.get(a, a) for a in inst.args)
        blocks = tuple(_rename(b, {}, new_name) for b in inst.blocks)
        results = tuple(fresh(r, "v") for r in inst.results)
        insts.append(Inst(inst.op, args, results, blocks))
    outputs = tuple(names.get(o, o) for o in g.outputs)
    return Graph(g.name, inputs, tuple(insts), outputs, params)


def replace_uses(g: Graph, old: str, new: str, start: int = 0, outputs: bool = True) -> Graph:
    """Make instructions from index `start` on (and the outputs, if asked) read `new` for `old`."""
    insts = list(g.insts)
    for i in range(start, len(insts)):
        inst = insts[i]
        if old in inst.args:
            insts[i] = replace(inst, args=tuple(new if a == old else a for a in inst.args))
    outs = tuple(new if o == old else o for o in g.outputs) if outputs else g.outputs
    return g.with_insts(insts, outs)


#: what the uses of a removed result read instead (`remove_insts`): called with the result and
#: whether only outputs read it (no remaining instruction does); the name of a value defined
#: before the first removed instruction, or None when there is none
Reconnect = Callable[[Value, bool], str | None]


def remove_insts(g: Graph, indices: Iterable[int], reconnect: Reconnect,
                 keep_outputs: bool = False) -> Graph | None:
    """`g` without its instructions at `indices` (this level), every use of their results
    reconnected: `reconnect(result, only_outputs)` is asked once for each removed result that
    is still read (by a remaining instruction or an output), in definition order, and its
    answer is read instead everywhere. A result it has no value for (None) takes the outputs
    reading it with it, unless `keep_outputs` (a body: its outputs are its signature).

    None when that is impossible: a remaining instruction reads a result that has no value, an
    output has none under `keep_outputs`, or no output is left. Dead code is left for the
    caller (`remove_unused`): the removed instructions' operands may have no other reader."""
    drop = set(indices)
    kept = [inst for i, inst in enumerate(g.insts) if i not in drop]
    read = {a for inst in kept for a in inst.args}
    outputs = set(g.outputs)
    gone: set[str] = set()
    new: dict[str, str] = {}
    for i in sorted(drop):
        for r in g.insts[i].results:
            gone.add(r.name)
            by_insts = r.name in read
            if not by_insts and r.name not in outputs:
                continue
            name = reconnect(r, not by_insts)
            if name is not None:
                new[r.name] = name
            elif by_insts or keep_outputs:
                return None
    insts = [inst if not new.keys() & set(inst.args) else
             replace(inst, args=tuple(new.get(a, a) for a in inst.args)) for inst in kept]
    outs = [new.get(o, o) for o in g.outputs if o in new or o not in gone]
    if not outs:
        return None
    return g.with_insts(insts, outs)


def insert_insts(g: Graph, index: int, new: Iterable[Inst]) -> Graph:
    insts = list(g.insts)
    insts[index:index] = list(new)
    return g.with_insts(insts)


def remove_unused(g: Graph, keep_inputs: bool = False) -> Graph:
    """Drop instructions (at this level) whose results are never read, and unread inputs/params
    unless `keep_inputs` (a body: its inputs are its signature). Control-flow instructions are
    dropped the same way (their results are new values); in-place writes are kept (their effect
    is on memory other names read, see docs/inplace.md)."""
    live = set(g.outputs)
    kept: list[Inst] = []
    for inst in reversed(g.insts):
        if any(r.name in live for r in inst.results) or inst.op.effect.writes_memory:
            kept.append(inst)
            live.update(inst.args)
    kept.reverse()
    if keep_inputs:
        return g.with_insts(kept)
    return replace(
        g,
        insts=tuple(kept),
        inputs=tuple(v for v in g.inputs if v.name in live) or g.inputs[:1],
        params=tuple(v for v in g.params if v.name in live),
    )
