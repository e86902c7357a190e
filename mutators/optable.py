"""Cached views of the enabled op signatures (enumerating them per proposal costs more than
solving the op)."""
from __future__ import annotations

from functools import lru_cache

from ir.core.dtypes import DType
from ir.core.op import Op
from ir.core.types import TensorType
from ir.gen.builder import GenConfig


def _key(gen: GenConfig) -> tuple:
    return (tuple(gen.ops_include), tuple(gen.ops_exclude), tuple(gen.dtypes))


@lru_cache(maxsize=64)
def _enabled(key: tuple) -> tuple[tuple[type[Op], ...], frozenset[DType]]:
    include, exclude, dtypes = key
    gen = GenConfig(ops_include=list(include), ops_exclude=list(exclude), dtypes=list(dtypes))
    return tuple(gen.enabled_ops()), frozenset(gen.enabled_dtypes())


@lru_cache(maxsize=4096)
def _ops_to(key: tuple, rank: int, first: DType, out: DType) -> tuple:
    ops, enabled = _enabled(key)
    return tuple((c, tuple(ins)) for c in ops if rank in c.first_ranks()
                 for n in c.arities() for ins, outs in c.signatures(n)
                 if ins[0] == first and tuple(outs) == (out,) and all(d in enabled for d in ins))


#: ops whose safe domain (`Op.domain`) iterating them rarely stays in: poles, steep growth,
#: discontinuities, ties. Mutators keep them out of loop and scan bodies (`Scope.iterated`),
#: where a recurrent value cannot be steered by the input search; they are placed anywhere else
FRAGILE_ITERATED = frozenset({
    "acos", "asin", "tan", "sin", "cos", "sinh", "cosh", "exp", "softplus", "log", "sqrt",
    "reciprocal", "div", "pow", "floor", "ceil", "round", "sign", "eq", "gt", "ge", "lt", "le",
    "argmax", "argmin", "topk",
})


def enabled_ops(gen: GenConfig, iterated: bool = False) -> tuple[type[Op], ...]:
    ops = _enabled(_key(gen))[0]
    return tuple(c for c in ops if c.name not in FRAGILE_ITERATED) if iterated else ops


def ops_to(gen: GenConfig, first: TensorType, out: DType,
           iterated: bool = False) -> list[tuple[type[Op], tuple]]:
    """(op class, input dtypes) of enabled ops taking `first` as input 0 and giving one result
    of dtype `out` (in a loop or scan body: no fragile op)."""
    found = _ops_to(_key(gen), first.rank, first.dtype, out)
    return [x for x in found if x[0].name not in FRAGILE_ITERATED] if iterated else list(found)


def same_type_ops(gen: GenConfig, t: TensorType, iterated: bool = False) -> list[tuple[type[Op], tuple]]:
    """Those giving `t`'s dtype back from a first input of its dtype and rank."""
    return ops_to(gen, t, t.dtype, iterated)


def fragile_deep(inst) -> bool:
    """A fragile op in the instruction or in its bodies."""
    return inst.op.name in FRAGILE_ITERATED or any(
        fragile_deep(x) for b in inst.blocks for x in b.insts)


