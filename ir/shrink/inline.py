"""Inlining one control-flow instruction: the instruction replaced by straight-line code, as
one of its op's `ControlFlow.inlinings` says. The reducer's `unwrap_control` pass tries each way;
a cause probe (`ir.shrink.take_out`) takes only the way the test's inputs ran.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.paths import Path
from ir.core.rewrite import remove_insts, replace_uses
from ir.ops.control import Inlining, reads


def inline(g: Graph, path: Path, i: int, way: Inlining
             ) -> tuple[Graph, dict[str, np.ndarray]] | None:
    """`g` with instruction `i` of the block at `path` replaced as `way` says, and the start
    values of the inputs it added (zeros: a loop's counter); None when it needs a new input
    below the top level. Dead code is left for the caller (`ir.shrink.deadcode.dce`)."""
    block = path.at(g)
    inst = block.insts[i]
    if way.body is None:  # no body runs: each result is an operand
        carried = {r.name: inst.args[k] for r, (k, _) in zip(inst.results, way.results, strict=True)}
        h = remove_insts(block, [i], lambda res, only_outputs: carried[res.name])
        return (path.replace_at(g, h), {}) if h is not None else None
    body = inst.blocks[way.body]
    names = Names.of(g)
    values: dict[str, np.ndarray] = {}
    pre: list[Inst] = []
    bind: dict[str, str] = {}
    extra: list[Value] = []  # new top-level inputs
    for v, (k, op) in zip(body.inputs, way.inputs, strict=True):
        if k is None:  # a value the op makes (a counter): a new input holding zeros
            if v.name not in reads(body):
                continue
            if path:
                return None
            leaf = names.fresh("r")
            extra.append(Value(leaf, v.type))
            values[leaf] = np.zeros(tuple(int(d) for d in v.type.shape), dtype=v.type.dtype.numpy)
            bind[v.name] = leaf
        elif op is None:
            bind[v.name] = inst.args[k]
        else:
            pre.append(Inst(op, (inst.args[k],), (Value(names.fresh("s"), v.type),)))
            bind[v.name] = pre[-1].results[0].name
    inner = [replace(x, args=tuple(bind.get(a, a) for a in x.args)) for x in body.insts]
    post: list[Inst] = []
    ren: dict[str, str] = {}
    for res, (j, op) in zip(inst.results, way.results, strict=True):
        src = bind.get(body.outputs[j], body.outputs[j])
        if op is None:
            ren[res.name] = src
        else:
            post.append(Inst(op, (src,), (Value(names.fresh("s"), res.type),)))
            ren[res.name] = post[-1].results[0].name
    new = block.with_insts(block.insts[:i] + tuple(pre + inner + post) + block.insts[i + 1:])
    for old, nw in ren.items():
        new = replace_uses(new, old, nw, start=i + len(pre) + len(inner) + len(post))
    if extra:
        new = replace(new, inputs=new.inputs + tuple(extra))
    return path.replace_at(g, new), values
