"""Dimensions that are either concrete ints or z3 integer expressions, and arithmetic over both.

While the generator builds a graph, shapes and numeric attributes are z3 terms constrained by the
ops that use them; a z3 model then concretizes every one of them to a Python int. Op type rules are
written once with the helpers here and work on both kinds.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias, TypeGuard

import z3

Dim: TypeAlias = int | z3.ArithRef
#: a constraint: a Python bool when decided, else a z3 boolean term
Cond: TypeAlias = bool | z3.BoolRef


def is_symbolic(x: object) -> TypeGuard[z3.ExprRef]:
    return isinstance(x, z3.ExprRef)


def floordiv(a: Dim, b: Dim) -> Dim:
    """Floor division for non-negative ints or z3 terms (z3's `/` on Ints is floor division)."""
    if is_symbolic(a) or is_symbolic(b):
        return a / b
    return a // b


def same(a: Dim, b: Dim) -> bool:
    """Structurally identical (a sufficient, cheap test for equality)."""
    if is_symbolic(a) and is_symbolic(b):
        return a.eq(b)
    if is_symbolic(a) or is_symbolic(b):
        return False
    return a == b


def eq(a: Dim, b: Dim) -> Cond:
    """`a == b`: a Python bool when decidable structurally or concretely, else a z3 term."""
    if same(a, b):
        return True
    if is_symbolic(a) or is_symbolic(b):
        return a == b
    return False


def if_then_else(cond: Cond, a: Dim, b: Dim) -> Dim:
    if isinstance(cond, bool):
        return a if cond else b
    return z3.If(cond, a, b)


def And(*cs: Cond) -> Cond:
    """Conjunction; a Python bool when the Python-bool parts decide it."""
    if any(c is False for c in cs):
        return False
    rest = [c for c in cs if not isinstance(c, bool)]
    return z3.And(*rest) if rest else True


def Or(*cs: Cond) -> Cond:
    """Disjunction; a Python bool when the Python-bool parts decide it."""
    if any(c is True for c in cs):
        return True
    rest = [c for c in cs if not isinstance(c, bool)]
    return z3.Or(*rest) if rest else False


def product(dims: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return out


def holds(constraint: Cond) -> bool:
    """Evaluate a constraint over concrete values (Python bool or a ground z3 term)."""
    if isinstance(constraint, bool):
        return constraint
    return z3.is_true(z3.simplify(constraint))


def concretize(x: Dim, model: z3.ModelRef) -> int:
    if not is_symbolic(x):
        return int(x)
    return model.eval(x, model_completion=True).as_long()
