"""`insert_rnn`: a recurrent layer (`lstm`, `gru`, `rnn`) put on a value's def-use edges.

A rank-3 float value [seq, batch, features] is the layer's input as it is; a rank-2 one
[seq, features] gets a batch axis of 1 (`unsqueeze`, then `squeeze` after). The layer's
hidden size and direction are solved so that its output Y has the value's type when possible
(nd * hidden == features: the later uses then read Y directly, and `wrap_loop` can iterate the
layer); otherwise a `linear` projects Y back to the value's features. Weights are new params;
initial states, when the layer takes them, are new inputs.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ir.core.dtypes import DType
from ir.core.graph import Graph, Value
from ir.core.op import OP_REGISTRY, Op
from ir.core.rewrite import insert_insts, replace_uses
from ir.ops.rnn import RECURRENT, Recurrent
from mutators.optable import enabled_ops
from mutators.scope import Ctx, ScopedMutator
from mutators.solve import NEW, NEW_PARAM, solve


class InsertRnn(ScopedMutator):
    name = "insert_rnn"
    into_kernels = False

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        rng, b = ctx.rng, ctx.b
        enabled = set(enabled_ops(ctx.gen))
        kinds = [c.name for c in RECURRENT if c in enabled]
        floats = [d for d in (DType.float32, DType.float16) if d in ctx.gen.enabled_dtypes()]
        if not kinds or not floats:
            return None
        sites = [(v, 0) for v in g.inputs] + [
            (r, i + 1) for i, inst in enumerate(g.insts) for r in inst.results]
        read = {a for inst in g.insts for a in inst.args} | set(g.outputs)
        sites = [(v, at) for v, at in sites if v.type.dtype in floats and v.type.rank in (2, 3)
                 and v.name in read]
        if not sites:
            return None
        v, at = rng.choice(sites)
        d = v.type.dtype
        op_cls = cast("type[Recurrent]", OP_REGISTRY[rng.choice(kinds)])
        new = []
        x = v
        if v.type.rank == 2:
            unsqueeze: Callable[..., Op] = OP_REGISTRY["unsqueeze"]
            unsq = solve(b, OP_REGISTRY["unsqueeze"], [v], [d], op=unsqueeze(axis=1))
            if unsq is None:
                return None
            new.append(unsq)
            x = unsq.results[0]
        lo, hi = op_cls.arities()[0], op_cls.arities()[-1]
        arity = lo if rng.random() < 0.6 else rng.randint(lo, hi)
        x_t = x.type
        inst = None
        for target in ([x_t, None] if rng.random() < 0.8 else [None]):
            states = [NEW] * (arity - 4)
            args: list[Value | str] = [x, NEW_PARAM, NEW_PARAM, NEW_PARAM, *states]
            targets = [target] + [None] * (op_cls.num_results - 1)
            inst = solve(b, op_cls, args, [d] * arity, targets)
            if inst is not None:
                break
        if inst is None:
            return None
        new.append(inst)
        y = inst.results[0]
        if y.type != x_t:
            proj = solve(b, OP_REGISTRY["linear"], [y, NEW_PARAM, NEW_PARAM], [d, d, d], [x_t])
            if proj is None:
                return None
            new.append(proj)
            y = proj.results[0]
        if v.type.rank == 2:
            squeeze: Callable[..., Op] = OP_REGISTRY["squeeze"]
            sq = solve(b, OP_REGISTRY["squeeze"], [y], [d], [v.type], op=squeeze(axis=1))
            if sq is None:
                return None
            new.append(sq)
            y = sq.results[0]
        out = replace_uses(g, v.name, y.name, start=at)
        out = insert_insts(out, at, new)
        op = cast(Recurrent, inst.op)
        return out, {"op": op.name, "at": v.name, "hidden": op.hidden, "direction": op.direction,
                     "projected": inst.results[0].type != x_t, "states": arity - 4}
