"""The transforms as objects (ir/materialize/transform_kinds.py)."""
from __future__ import annotations

import pytest

from ir.materialize.torch_func import PROGRAMS
from ir.materialize.transform_kinds import DIALECTS, KINDS, MAX_JACOBIAN_BASIS, kind_of


def test_every_transform_has_its_program_and_eager_rules_for_every_dialect_and_construct():
    assert list(KINDS) == ["vmap", "grad", "vjp", "jvp", "jacrev", "jacfwd"] == list(PROGRAMS)
    for name, t in KINDS.items():
        assert t.name == name and t.program is PROGRAMS[name]
        assert set(t.eager_support) == set(DIALECTS)
        assert all(set(rules) == {"if", "loop", "scan"} for rules in t.eager_support.values())
    assert [n for n, t in KINDS.items() if not t.derivative] == ["vmap"]
    assert {n: t.takes for n, t in KINDS.items() if t.takes} == {
        "grad": "cotangents", "vjp": "cotangents", "jvp": "tangents"}


def test_only_the_jacobians_are_bounded_each_by_its_own_basis():
    jacrev, jacfwd = KINDS["jacrev"], KINDS["jacfwd"]
    assert [n for n, t in KINDS.items() if t.bounded] == ["jacrev", "jacfwd"]
    big = MAX_JACOBIAN_BASIS + 1
    assert jacrev.within_basis(big, 1) and not jacrev.within_basis(1, big)
    assert jacfwd.within_basis(1, big) and not jacfwd.within_basis(big, 1)
    assert not jacrev.fits(1 << 9, 1 << 8) and KINDS["grad"].fits(1 << 20, 1 << 20)


def test_an_unknown_transform_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"^unknown transform 'hessian' \(known: vmap, grad, "
                                         r"vjp, jvp, jacrev, jacfwd\)$"):
        kind_of("hessian")
