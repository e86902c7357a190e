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


def enabled_ops(gen: GenConfig, iterated: bool = False) -> tuple[type[Op], ...]:
    """The enabled ops (in a loop or scan body: none `fragile_when_iterated`)."""
    ops = _enabled(_key(gen))[0]
    return tuple(c for c in ops if not c.fragile_when_iterated) if iterated else ops


def ops_to(gen: GenConfig, first: TensorType, out: DType,
           iterated: bool = False) -> list[tuple[type[Op], tuple]]:
    """(op class, input dtypes) of enabled ops taking `first` as input 0 and giving one result
    of dtype `out` (in a loop or scan body: no fragile op)."""
    found = _ops_to(_key(gen), first.rank, first.dtype, out)
    return [x for x in found if not x[0].fragile_when_iterated] if iterated else list(found)


def same_type_ops(gen: GenConfig, t: TensorType, iterated: bool = False) -> list[tuple[type[Op], tuple]]:
    """Those giving `t`'s dtype back from a first input of its dtype and rank."""
    return ops_to(gen, t, t.dtype, iterated)


def fragile_deep(inst) -> bool:
    """An op `fragile_when_iterated` in the instruction or in its bodies."""
    return inst.op.fragile_when_iterated or any(
        fragile_deep(x) for b in inst.blocks for x in b.insts)


