"""The facts the ops declare about themselves, for the passes that ask them (docs/architecture.md,
"Adding an op"), checked against torch eager or against what each fact is documented to mean.

  - `exact`: an exact op's float32 results are its float64 results rounded to float32, bit for
    bit (no rounding of its own); ops outside the plain library (views, in-place writes,
    functionalization's helpers, control flow) are exact by what they are.
  - `tolerance_factor`: one factor per op family (an output's cone counts each family once).
  - `fragile_when_iterated`: each such op has a domain that values reach (poles, steep growth,
    discontinuities) or a non-float result of float operands (comparisons, arg-extremes: ties).
  - `combines_with_copy`: op(x, x) varies with x for a combining op, and an op whose op(x, x) is
    a constant does not combine.
  - `comparison_sign`: a <op> b is (a - b) * sign > 0, and an op without one matches no sign.
  - `inplace_twin`, `view_twin`: the twin computes the same values into operand 0's storage,
    or as a view of it.
  - `sample_symbolic`: attributes that keep the op valid at every size of the symbols.
`torch_may_alias` is checked against torch eager in tests/ir/analysis/test_inplace.py.
"""
from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import z3

from ir import GenConfig, generate
from ir.core.dtypes import DType
from ir.core.op import OP_REGISTRY, Op
from ir.core.sampling import SymbolicSampleContext
from ir.core.shapes import holds
from ir.core.types import TensorType
from ir.gen.builder import GenerationError

sys.path.insert(0, str(Path(__file__).parent))
from opcheck import LIBRARY_OPS  # noqa: E402

torch.set_num_threads(1)

F32 = DType.float32


def _env(g, seed: int = 0) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    env = {}
    for v in (*g.inputs, *g.params):
        d = v.type.dtype
        if d.is_float:
            a = rng.uniform(-2, 2, v.type.shape)
        elif d.is_int:
            a = rng.integers(-4, 5, v.type.shape)
        else:
            a = rng.integers(0, 2, v.type.shape).astype(bool)
        env[v.name] = torch.from_numpy(np.asarray(a, dtype=d.numpy))
    return env


def _results(out) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


def _f32_instances(name: str, count: int = 4):
    """(op, operand tensors) of `count` generated one-op graphs with a float32 operand or result
    (the only float dtype offered)."""
    rng = random.Random(name)
    found = 0
    for _ in range(40 * count):
        if found >= count:
            break
        cfg = GenConfig(nodes=1, max_elems=64, ops_include=[name], dtypes=["f32", "i64", "i32", "b8"])
        try:
            g = generate(rng.randrange(2**31), cfg)
        except GenerationError:
            continue
        inst = g.insts[0]
        env = _env(g)
        args = [env[a] for a in inst.args]
        if any(a.is_floating_point() for a in args) or any(r.type.dtype.is_float for r in inst.results):
            found += 1
            yield inst.op, args


def _pure_ops_with_no_attributes(arity: int) -> list[type[Op]]:
    return [c for n, c in OP_REGISTRY.items()
            if n in LIBRARY_OPS and c.arities() == range(arity, arity + 1)
            and not dataclasses.fields(c)]


# ---- exact --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in LIBRARY_OPS if OP_REGISTRY[n].exact])
def test_an_exact_op_does_not_round(name):
    seen = 0
    for op, args in _f32_instances(name):
        wide = [a.double() if a.is_floating_point() else a for a in args]
        for r32, r64 in zip(_results(op.torch(*args)), _results(op.torch(*wide)), strict=True):
            assert torch.equal(r64.to(r32.dtype), r32), (name, op)
        seen += 1
    assert seen, f"{name}: no float32 instance"


def test_a_cast_is_correctly_rounded():
    from ir.ops.cast import Cast

    x = np.random.default_rng(2).normal(0, 1e3, 256)
    x[:3] = [1 + 2**-24, 1 + 3 * 2**-24, -(1 + 2**-24)]  # ties: to even
    got = Cast(to=F32).torch(torch.from_numpy(x))
    assert np.array_equal(got.numpy(), x.astype(np.float32))


def test_ops_outside_the_library_are_exact():
    """Views, in-place writes and functionalization's helpers move or select values (the
    reference perturbs the functionalized graph, where only pure library ops round); control
    flow's results are its bodies'."""
    for name, c in OP_REGISTRY.items():
        if c.takes_blocks or not c.generic:
            assert c.exact, name


# ---- tolerance_factor ---------------------------------------------------------------------------


def test_the_ops_of_a_family_share_their_tolerance_factor():
    factors: dict[str, set[float]] = {}
    for c in OP_REGISTRY.values():
        factors.setdefault(c.family, set()).add(c.tolerance_factor)
    assert all(len(f) == 1 for f in factors.values()), factors
    assert all(f >= 1.0 for fs in factors.values() for f in fs)


# ---- fragile_when_iterated ----------------------------------------------------------------------

#: values that meet every kind of edge: zero, integers, halves, poles' neighbourhoods, the
#: steep and the large
EDGES = np.array([0.0, 1.0, -1.0, 0.5, -2.5, 1.5708, -1.5708, 0.995, -0.995, 3.0, 12.0, -12.0,
                  25.0, 100.0, -100.0, 0.3, -0.7, 2.2], dtype=np.float32)


def _reaches_its_domain(op: Op) -> bool:
    x = torch.from_numpy(EDGES)
    y = torch.from_numpy(np.roll(EDGES, 5))
    args = (x,) if op.arities() == range(1, 2) else (x, y)
    return any(bool((v > 0).any()) for v in op.domain(*args))


def _non_float_result_of_floats(c: type[Op]) -> bool:
    sigs = [s for n in c.arities() for s in c.signatures(n)]
    return any(all(d.is_float for d in ins) and not all(d.is_float for d in outs) for ins, outs in sigs)


@pytest.mark.parametrize("name", [n for n, c in OP_REGISTRY.items() if c.fragile_when_iterated])
def test_a_fragile_op_has_an_edge_that_iteration_can_reach(name):
    c = OP_REGISTRY[name]
    if _non_float_result_of_floats(c):
        return  # a selection or comparison: ties
    assert not dataclasses.fields(c), name
    assert _reaches_its_domain(c()), name


# ---- combines_with_copy -------------------------------------------------------------------------


def _self_combined(c: type[Op], d: DType) -> torch.Tensor:
    rng = np.random.default_rng(0)
    if d.is_float:
        x = rng.uniform(0.5, 2.0, 16)  # positive: in every binary op's domain
    elif d.is_int:
        x = rng.integers(1, 9, 16)
    else:
        x = rng.integers(0, 2, 16).astype(bool)
    t = torch.from_numpy(np.asarray(x, dtype=d.numpy))
    return c().torch(t, t.clone())


@pytest.mark.parametrize("c", _pure_ops_with_no_attributes(2), ids=lambda c: c.name)
def test_combining_with_a_copy_does_not_degenerate(c):
    same = [ins[0] for ins, _ in c.signatures(2) if ins[0] == ins[1]]
    if not same:
        assert not c.combines_with_copy
        return
    constant = [bool((r := _self_combined(c, d)).eq(r.flatten()[0]).all()) for d in same]
    if c.combines_with_copy:
        assert not any(constant), c.name
    if all(constant):
        assert not c.combines_with_copy, c.name


# ---- comparison_sign ----------------------------------------------------------------------------


@pytest.mark.parametrize("c", [c for c in _pure_ops_with_no_attributes(2)
                               if ((F32, F32), (DType.bool,)) in c.signatures(2)],
                         ids=lambda c: c.name)
def test_the_comparison_sign_is_the_side_that_makes_it_true(c):
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.uniform(-2, 2, 32).astype(np.float32))
    b = torch.from_numpy(rng.uniform(-2, 2, 32).astype(np.float32))
    got = c().torch(a, b)
    matches = {s for s in (1, -1) if torch.equal(got, (a - b) * s > 0)}
    assert matches == ({c.comparison_sign} if c.comparison_sign is not None else set()), c.name


def test_only_comparisons_have_a_sign():
    for name, c in OP_REGISTRY.items():
        if c.comparison_sign is not None:
            assert c.comparison_sign in (1, -1) and ((F32, F32), (DType.bool,)) in c.signatures(2), name


# ---- in-place and view twins --------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in LIBRARY_OPS if OP_REGISTRY[n].inplace_twin])
def test_the_inplace_twin_writes_the_same_values_into_operand_0(name):
    seen = 0
    for op, args in _f32_instances(name, 6):
        want = op.torch(*args)
        if want.shape != args[0].shape or want.dtype != args[0].dtype:
            continue  # (broadcast into a larger result: no place to write it)
        twin = op.inplace_form()
        assert twin is not None and type(twin) is op.inplace_twin
        assert twin.effect.writes == 0, name
        dest = args[0].clone()
        out = twin.torch(dest, *args[1:])
        assert out is dest and torch.equal(dest, want), name
        seen += 1
    assert seen, name


@pytest.mark.parametrize("name", [n for n in LIBRARY_OPS if OP_REGISTRY[n].view_twin])
def test_the_view_twin_is_the_same_movement_as_a_view(name):
    seen = 0
    for op, args in _f32_instances(name, 4):
        view_cls = op.view_twin
        assert view_cls is not None and view_cls.effect.view_of == 0
        assert {f.name for f in dataclasses.fields(view_cls)} == set(op.attrs()), name
        (x,) = args
        got = view_cls(**op.attrs()).torch(x)
        assert got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), name
        assert torch.equal(got, op.torch(x)), name
        seen += 1
    assert seen, name


def test_twins_are_not_inherited_by_the_twins():
    for name, c in OP_REGISTRY.items():
        if not c.effect.pure:
            assert c.inplace_twin is None and c.view_twin is None, name


# ---- sample_symbolic ----------------------------------------------------------------------------


def _at(v, values: dict[str, int]):
    if isinstance(v, tuple):
        return tuple(_at(x, values) for x in v)
    if isinstance(v, z3.ExprRef):
        pairs = [(z3.Int(k), z3.IntVal(n)) for k, n in values.items()]
        return z3.simplify(z3.substitute(v, *pairs)).as_long()
    return v


@pytest.mark.parametrize("name", LIBRARY_OPS)
def test_symbolic_attributes_keep_the_op_valid_at_every_size(name):
    """Over a type [B, 1, 3, L] (B, L symbols): the attributes drawn name exactly the op's
    fields, and the op they make is valid at large sizes (a small one may break its
    constraints, which the generator adds to the symbols')."""
    c = OP_REGISTRY[name]
    b, n = z3.Int("B"), z3.Int("L")
    first = TensorType((b, 1, 3, n), F32)
    drawn = 0
    for seed in range(12):
        ctx = SymbolicSampleContext(random.Random(seed), [b, n], dim_hint=4, max_rank=4)
        attrs = c.sample_symbolic(ctx, first)
        if attrs is None:
            continue
        drawn += 1
        assert set(attrs) == {f.name for f in dataclasses.fields(c)}, name
        for values in ({"B": 9, "L": 11}, {"B": 12, "L": 16}):
            t = TensorType(_at(first.shape, values), F32)
            op = c(**{k: _at(v, values) for k, v in attrs.items()})
            assert all(holds(x) for x in op.requires([t])), (name, attrs, values)
            op.infer([t])
    assert drawn or c.sample_symbolic.__func__ is Op.sample_symbolic.__func__, name
