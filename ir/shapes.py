"""Dimensions that are either concrete ints or z3 integer expressions, and arithmetic over both.

While the generator builds a graph, shapes and numeric attributes are z3 terms constrained by the
ops that use them; a z3 model then concretizes every one of them to a Python int. Op type rules are
written once with the helpers here and work on both kinds.
"""
from __future__ import annotations

from typing import Union

import z3

Dim = Union[int, z3.ArithRef]


def is_symbolic(x: object) -> bool:
    return isinstance(x, z3.ExprRef)


def floordiv(a: Dim, b: Dim) -> Dim:
    """Floor division for non-negative ints or z3 terms (z3's `/` on Ints is floor division)."""
    if is_symbolic(a) or is_symbolic(b):
        return a / b
    return a // b


def eq(a: Dim, b: Dim):
    """`a == b` as a Python bool when both are concrete, else as a z3 constraint."""
    if is_symbolic(a) or is_symbolic(b):
        return a == b
    return a == b


def if_then_else(cond, a: Dim, b: Dim) -> Dim:
    if isinstance(cond, bool):
        return a if cond else b
    return z3.If(cond, a, b)


def And(*cs):
    """Conjunction that stays a Python bool when every part is concrete."""
    if all(isinstance(c, bool) for c in cs):
        return all(cs)
    return z3.And(*[z3.BoolVal(c) if isinstance(c, bool) else c for c in cs])


def Or(*cs):
    if all(isinstance(c, bool) for c in cs):
        return any(cs)
    return z3.Or(*[z3.BoolVal(c) if isinstance(c, bool) else c for c in cs])


def product(dims) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return out


def holds(constraint) -> bool:
    """Evaluate a constraint over concrete values (Python bool or a ground z3 term)."""
    if isinstance(constraint, bool):
        return constraint
    return z3.is_true(z3.simplify(constraint))


def concretize(x: Dim, model: z3.ModelRef) -> int:
    if not is_symbolic(x):
        return int(x)
    return model.eval(x, model_completion=True).as_long()
