"""Solve one instruction with z3 over operands the mutator chooses, as the generator does.

`SymbolicGraphBuilder.try_op` picks the operands itself (existing values or new placeholders at
random); a mutator often needs them fixed: the same data operands as the instruction it
replaces, with its weights rebuilt to fit new attributes or shapes. `solve` takes that list
(an existing value, or `NEW`/`NEW_PARAM` for a new placeholder) and otherwise follows `try_op`:
the op's attributes are sampled (numeric ones as z3 symbols) or given, new placeholders take
the op's `operand_type` when it has one, constraints are the op's `requires`, the element bound
on every new type and optional result types, and every symbol is fixed from the rng
(deterministic, no choice left to z3): both end in `SymbolicGraphBuilder.complete`.
"""
from __future__ import annotations

from collections.abc import Sequence

from ir.core.dtypes import DType
from ir.core.graph import Inst, Value
from ir.core.op import Op
from ir.core.types import TensorType
from ir.gen.builder import SymbolicGraphBuilder

#: a new graph input (or need) for this operand
NEW = "new"
#: a new weight (param) for this operand
NEW_PARAM = "new_param"


def solve(b: SymbolicGraphBuilder, op_cls: type[Op], args: Sequence[Value | str],
          dtypes: Sequence[DType], targets: Sequence[TensorType | None] | None = None,
          op: Op | None = None, names: Sequence[str] | None = None) -> Inst | None:
    """`op_cls(*args)` with every constraint met, or None. `args[0]` must be a value; `targets`
    fixes result types (None entries: free); `names` names the results (default: fresh)."""
    first = args[0]
    assert isinstance(first, Value)
    if op is None and first.type.rank not in op_cls.first_ranks():
        # outside the op's declared ranks its `sample` may not even terminate (a transpose of a
        # vector has no non-identity permutation: it would shuffle forever)
        return None
    n_dims, n_syms = len(b.ctx.dims), len(b.ctx.symbols)
    op = op if op is not None else op_cls.sample(b.ctx, first.type)
    slots = list(op_cls.slots(len(args), first.type))
    vals: list[Value] = [first]
    new: list[tuple[Value, bool]] = []
    for index, (spec, dtype) in enumerate(zip(args[1:], dtypes[1:], strict=True), 1):
        if isinstance(spec, Value):
            vals.append(spec)
            continue
        t = op.operand_type(index, first.type, dtype, b.ctx)
        if t is None:
            ranks = slots[index - 1].ranks if index - 1 < len(slots) else (first.type.rank,)
            t = b.placeholder_type(b.rng.choice(ranks), dtype)
        v = Value(f"?{len(new)}", t)
        new.append((v, spec == NEW_PARAM))
        vals.append(v)
    return b.complete(op, vals, new, (n_dims, n_syms), targets, names)


