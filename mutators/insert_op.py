"""`insert_op`: put a new op on a value's def-use edges, with a result of the value's exact type.

The op's other operands are earlier values or new inputs/params; its attributes and the new
placeholders' shapes are solved with z3 under the constraint "result type == the value's type",
so every later user still type-checks. Works in any scope (inside bodies, new operands are
threaded in as needs: `mutators.scope`).
"""
from __future__ import annotations

from typing import Any

from ir.core.graph import Graph, Value
from ir.core.rewrite import insert_insts, replace_uses
from mutators.optable import same_type_ops
from mutators.scope import Ctx, ScopedMutator, values_before


class InsertOp(ScopedMutator):
    name = "insert_op"

    def eligible(self, site) -> bool:
        return True

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        # (value, index of the first instruction allowed to read the new result)
        sites: list[tuple[Value, int]] = [(v, 0) for v in g.inputs]
        sites += [(r, i + 1) for i, inst in enumerate(g.insts) for r in inst.results]
        read = {a for inst in g.insts for a in inst.args} | set(g.outputs)
        sites = [(v, at) for v, at in sites if v.name in read]  # else it would be dead code
        if not sites:
            return None
        v, at = ctx.rng.choice(sites)
        ops = same_type_ops(ctx.gen, v.type, ctx.iterated)
        if not ops:
            return None
        op_cls, in_dtypes = ctx.rng.choice(ops)
        # inside a body, new operands are needs; keep them few (a fresh placeholder only when
        # no body value fits)
        inst = ctx.b.try_op(op_cls, v, values_before(g, at), in_dtypes, len(in_dtypes),
                            target=v.type)
        if inst is None:
            return None
        out = replace_uses(g, v.name, inst.results[0].name, start=at)
        return insert_insts(out, at, [inst]), {"op": op_cls.name, "at": v.name}
