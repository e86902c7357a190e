"""The reducer's passes: each proposes candidates derived from the current graph, best first.

A pass is a function `(ctx, graph) -> candidates` (`PassFn`), registered by name in `PASSES`
(the order the scheduler starts from: cheapest and most effective first). It never tests an
op's name: what an op allows is asked of the op (its type rule `Op.type_rule`, through
`retype` and `solve_shapes`; a control-flow op's `ControlFlow.inlinings` and `prune`). Every
candidate is cleaned by `dce`, which preserves semantics.

  - `drop_outputs`: keep one output, or drop one;
  - `cut_to_input`: replace a value by a new graph input (or param, when the value is computed
    from params only) holding the value it had, so its whole upstream cone goes;
  - `delete_block`: delete a run of top-level instructions, reconnecting their uses;
  - `delete_inst`: delete one instruction (any nesting level) and reconnect its uses to a value
    of the same type (an operand first), or at the top level to a new input;
  - `unwrap_control`: replace a control-flow instruction by straight-line code, each way its op
    offers (an `if` by either branch, a `loop` by zero trips or its body once, a length-1 `scan`
    by its body once on the squeezed slices);
  - `simplify_dtypes`: make float inputs/params and dtype attributes float32 (ints int64);
  - `shrink_shapes`: re-solve the dims of inputs and params (and size-like integer attributes)
    with z3 under every op's constraints: all as small as possible, or one dim at 1 or halved;
  - `shrink_ranks`: drop a size-1 axis of an input or param, re-inferring every type;
  - `params_to_inputs`: turn weights into graph inputs (nothing left to constant-fold).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from ir.core.dtypes import DType
from ir.core.graph import Graph, Value
from ir.core.names import Names
from ir.core.op import Op
from ir.core.paths import Path, scopes
from ir.core.rewrite import remove_insts, replace_uses
from ir.core.types import TensorType
from ir.ops.control import is_control
from ir.shrink.deadcode import dce
from ir.shrink.inline import inline
from ir.shrink.retype import retype, solve_shapes


@dataclass
class Candidate:
    graph: Graph
    desc: str
    #: start values for inputs/params the edit introduced (e.g. the value a cut value had)
    values: dict[str, np.ndarray] = field(default_factory=dict)


class PassContext(Protocol):
    """What a pass may ask of the reducer running it."""

    def env(self) -> dict[str, np.ndarray]:
        """Every top-level value of the current graph on the current values."""


PassFn = Callable[[PassContext, Graph], Iterator[Candidate]]


def _same_type_values(block: Graph, index: int, t: TensorType, exclude: set[str]) -> list[str]:
    """Values of type `t` defined in `block` before instruction `index`, latest first."""
    out = []
    for inst in reversed(block.insts[:index]):
        out += [r.name for r in inst.results if r.type == t and r.name not in exclude]
    out += [v.name for v in (*block.inputs, *block.params) if v.type == t and v.name not in exclude]
    return out


def _cone(g: Graph, name: str) -> set[int]:
    """Top-level instruction indices in the upstream cone of `name`."""
    where = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
    seen: set[int] = set()
    todo = [name]
    while todo:
        n = todo.pop()
        i = where.get(n)
        if i is None or i in seen:
            continue
        seen.add(i)
        todo.extend(g.insts[i].args)
    return seen


def _leaves(g: Graph, name: str) -> set[str]:
    """Top-level inputs/params the value `name` is computed from."""
    where = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
    leaves, seen, todo = set(), set(), [name]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in where:
            todo.extend(g.insts[where[n]].args)
        else:
            leaves.add(n)
    return leaves


def _new_leaf(g: Graph, names: Names, t: TensorType, from_params: bool) -> tuple[Graph, str]:
    name = names.fresh("p" if from_params else "r")
    v = Value(name, t)
    if from_params:
        return replace(g, params=g.params + (v,)), name
    return replace(g, inputs=g.inputs + (v,)), name


def pass_drop_outputs(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    if len(g.outputs) < 2:
        return
    for k, o in enumerate(g.outputs):
        yield Candidate(dce(g.with_insts(g.insts, [o])), f"keep only output {k}")
    for k in range(len(g.outputs)):
        yield Candidate(dce(g.with_insts(g.insts, g.outputs[:k] + g.outputs[k + 1:])),
                        f"drop output {k}")


def pass_cut_to_input(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    """Replace a top-level value by a new input holding its current value, largest cone first."""
    env = ctx.env()
    params = {p.name for p in g.params}
    order = sorted(((len(_cone(g, res.name)), i, res) for i, inst in enumerate(g.insts)
                    for res in inst.results), key=lambda x: (-x[0], -x[1]))
    for _, i, res in order:
        if res.name not in env:
            continue
        names = Names.of(g)
        from_params = _leaves(g, res.name) <= params
        h, leaf = _new_leaf(g, names, res.type, from_params)
        h = replace_uses(h, res.name, leaf, start=i + 1)
        yield Candidate(dce(h), f"cut %{res.name} ({g.insts[i].op.name}) to a new "
                        f"{'param' if from_params else 'input'}", {leaf: env[res.name]})


def _reconnect(g: Graph, path: Path, lo: int, hi: int, names: Names, env: dict
               ) -> tuple[Graph, dict] | None:
    """Delete instructions [lo, hi) of the block at `path`, making each later use of their
    results read a same-typed earlier value (an operand of the deleted ones first; at the top
    level, else a new input holding the value). A top-level output read by nothing else may
    take any operand's value instead (outputs have no fixed type), or go."""
    block = path.at(g)
    top = not path
    gone_names = {r.name for inst in block.insts[lo:hi] for r in inst.results}
    decls = {v.name for v in (*block.inputs, *block.params)}
    operands = [a for inst in block.insts[lo:hi] for a in inst.args if a not in gone_names]
    new_values = {}
    top_extra: list[Value] = []

    def reconnect(res: Value, only_outputs: bool) -> str | None:
        same = [a for a in operands if _type_of(block, a) == res.type]
        pool = same + _same_type_values(block, lo, res.type, gone_names)
        if only_outputs and top:
            # only an output: reconnect it to an operand computed in the graph, of any type
            pool = [a for a in dict.fromkeys(same + operands) if a not in decls] + pool
            return pool[0] if pool else None  # none: the output goes
        if pool:
            return pool[0]
        if top and res.name in env:
            leaf = names.fresh("r")
            top_extra.append(Value(leaf, res.type))
            new_values[leaf] = env[res.name]
            return leaf
        return None

    new_block = remove_insts(block, range(lo, hi), reconnect, keep_outputs=not top)
    if new_block is None:
        return None
    if top_extra:
        new_block = replace(new_block, inputs=new_block.inputs + tuple(top_extra))
    if top:
        new_block = new_block.with_insts(new_block.insts, list(dict.fromkeys(new_block.outputs)))
    return path.replace_at(g, new_block), new_values


def _type_of(block: Graph, name: str) -> TensorType | None:
    return block.types().get(name)


def pass_delete_block(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    """Delete runs of top-level instructions, halving the run length (ddmin-like)."""
    n = len(g.insts)
    k = n // 2
    while k >= 2:
        for lo in range(0, n - k + 1, k):
            out = _reconnect(g, Path(), lo, lo + k, Names.of(g), ctx.env())
            if out is not None:
                yield Candidate(dce(out[0]), f"delete insts {lo}..{lo + k - 1}", out[1])
        k //= 2


def pass_delete_inst(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    """Delete one instruction (any level, last first) and reconnect its uses."""
    env = ctx.env()
    for path, block in scopes(g):
        for i in reversed(range(len(block.insts))):
            inst = block.insts[i]
            out = _reconnect(g, path, i, i + 1, Names.of(g), env)
            if out is not None:
                yield Candidate(dce(out[0]), f"delete {inst.op.name} %{inst.results[0].name}"
                                + (" (nested)" if path else ""), out[1])


def pass_unwrap_control(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    """Each control-flow instruction (any level) replaced by straight-line code, each way its
    op offers (`ControlFlow.inlinings`)."""
    for path, block in scopes(g):
        types = block.types()
        for i, inst in enumerate(block.insts):
            if not is_control(inst.op):
                continue
            for way in inst.op.inlinings(inst, [types[a] for a in inst.args]):
                out = inline(g, path, i, way)
                if out is not None:
                    yield Candidate(dce(out[0]), f"{inst.op.name} %{inst.results[0].name} -> "
                                    f"{way.desc}", out[1])


def pass_shrink_shapes(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    h = solve_shapes(g, "min")
    if h is not None:
        yield Candidate(h, "shapes re-solved to their minimum")
    for v in (*g.inputs, *g.params):
        for k, d in enumerate(v.type.shape):
            if d <= 1:
                continue
            for mode in ("one", "half"):
                if mode == "half" and d <= 2:
                    continue
                h = solve_shapes(g, mode, (v.name, k))
                if h is not None:
                    yield Candidate(h, f"dim {k} of %{v.name} ({d}) -> {mode}")


def pass_shrink_ranks(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    for v in (*g.inputs, *g.params):
        for k, d in enumerate(v.type.shape):
            if d != 1:
                continue
            t = TensorType(v.type.shape[:k] + v.type.shape[k + 1:], v.type.dtype)
            h = retype(g, {v.name: t})
            if h is not None:
                yield Candidate(h, f"drop axis {k} (size 1) of %{v.name}")


def _simpler(d: DType) -> DType:
    if d.is_float:
        return DType.float32
    if d.is_int:
        return DType.int64
    return d


def _map_dtype_attrs(op: Op) -> Op:
    changes = {f.name: _simpler(getattr(op, f.name)) for f in dataclasses.fields(op)
               if isinstance(getattr(op, f.name), DType)
               and _simpler(getattr(op, f.name)) is not getattr(op, f.name)}
    return dataclasses.replace(op, **changes) if changes else op


def pass_simplify_dtypes(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    decls = [v for v in (*g.inputs, *g.params) if _simpler(v.type.dtype) is not v.type.dtype]
    has_attrs = any(_map_dtype_attrs(inst.op) is not inst.op for inst, _ in g.walk())
    if decls or has_attrs:
        h = retype(g, {v.name: v.type.with_dtype(_simpler(v.type.dtype)) for v in decls},
                   _map_dtype_attrs)
        if h is not None:
            yield Candidate(h, "every dtype simplified")
    for v in decls:
        h = retype(g, {v.name: v.type.with_dtype(_simpler(v.type.dtype))})
        if h is not None:
            yield Candidate(h, f"%{v.name}: {v.type.dtype.short} -> {_simpler(v.type.dtype).short}")
    for inst, _ in list(g.walk()):
        mapped = _map_dtype_attrs(inst.op)
        if mapped is inst.op:
            continue
        def op_map(op: Op, target: Op = inst.op, new: Op = mapped) -> Op:
            return new if op is target else op

        h = retype(g, {}, op_map)
        if h is not None:
            yield Candidate(h, f"{inst.op.name} %{inst.results[0].name}: dtype attribute simplified")


def pass_params_to_inputs(ctx: PassContext, g: Graph) -> Iterator[Candidate]:
    """Params (weights) become graph inputs with the same values: all, then one at a time."""
    if not g.params:
        return
    if len(g.params) > 1:
        yield Candidate(replace(g, inputs=g.inputs + g.params, params=()), "every param -> input")
    for p in g.params:
        yield Candidate(replace(g, inputs=g.inputs + (p,),
                                params=tuple(q for q in g.params if q != p)),
                        f"param %{p.name} -> input")


#: name -> pass, in the order the scheduler starts from
PASSES: dict[str, PassFn] = {
    "drop_outputs": pass_drop_outputs,
    "cut_to_input": pass_cut_to_input,
    "delete_block": pass_delete_block,
    "delete_inst": pass_delete_inst,
    "unwrap_control": pass_unwrap_control,
    "simplify_dtypes": pass_simplify_dtypes,
    "shrink_shapes": pass_shrink_shapes,
    "shrink_ranks": pass_shrink_ranks,
    "params_to_inputs": pass_params_to_inputs,
}
