"""ir.materialize.torch_source for dynamic-shape tests (docs/dynshape.md): one program for every
shape assignment, which binds the symbols to its inputs' sizes, computes the attributes that
depend on them, prints the sizes an op's code queries as queries, and is checked against the
interpreter on every assignment (a literal left where a size belongs is refused)."""
from __future__ import annotations

import random

import pytest

import ir
from ir.gen.builder import GenConfig
from ir.gen.symbolic_shapes import finish, generate_dyn
from ir.materialize import torch_source as source_module
from ir.materialize.dynshape import DynShape, instantiate
from ir.materialize.torch_source import CodegenError, _SymInt, check_source, example_values, torch_source

#: F17's trigger: x0 [1, 5, H, W] reshaped to [W, 5 * H]
RESHAPE = """graph main(%x0: f32[1,5,3,4]) {
  %v1 = reshape[shape=[4,15]](%x0) : f32[4,15]
  %v2 = sin(%v1) : f32[4,15]
  return %v2
}"""
RESHAPE_DYN = DynShape(
    {"H": "spatial", "W": "spatial"},
    {"x0": (1, 5, "H", "W"), "v1": ("W", "5*H"), "v2": ("W", "5*H")},
    {"v1": {"shape": ("W", "5*H")}},
    [{"H": 3, "W": 4}, {"H": 5, "W": 4}, {"H": 4, "W": 8}], [0, 1, 2], "infer")


def test_symbols_are_bound_to_input_sizes_and_attributes_computed_from_them():
    g = ir.verify(ir.parse(RESHAPE))
    src = torch_source(g, "python", dyn=RESHAPE_DYN)
    assert "        H = x0.size(2)\n        W = x0.size(3)\n" in src
    assert "x0.reshape((W, (5 * H)))" in src
    for a in RESHAPE_DYN.assignments:  # the one program on every shape
        gk = instantiate(g, RESHAPE_DYN, a)
        assert check_source(src, gk, example_values(gk, seed=1)) is None


def test_a_shape_printed_as_a_literal_is_refused_by_the_check_on_another_assignment(monkeypatch):
    g = ir.verify(ir.parse(RESHAPE))
    # a printer that forgets the attributes computed from the symbols: set 0's [4, 15] stays
    monkeypatch.setattr(source_module._Emitter, "op_of", lambda self, inst: inst.op)
    with pytest.raises(CodegenError, match=r"\(shape assignment H=5,W=4\): the generated code "
                                           r"failed: RuntimeError: shape '\[4, 15\]' is invalid"):
        torch_source(g, "python", dyn=RESHAPE_DYN)


def test_size_arithmetic_keeps_its_expression():
    b = _SymInt(3, ("sym", "B"))
    e = (2 * b + 1) // 2 - b % 2
    assert int(e) == (2 * 3 + 1) // 2 - 3 % 2
    assert e.render({}) == "((((2 * B) + 1) // 2) - (B % 2))"
    assert (-b).render({}) == "(-B)"
    assert type(b * 0.5) is float  # a float leaves the expression: printed as its value


def _dyn_tests(n: int, cfg: GenConfig):
    out = []
    for seed in range(200):
        g, seed_info = generate_dyn(seed, cfg)
        done = finish(g, seed_info, cfg, random.Random(seed))
        if done.dyn is not None:
            out.append((g, done.dyn))
        if len(out) == n:
            return out
    raise AssertionError("too few dynamic-shape graphs")


@pytest.mark.parametrize("dialect", ["python", "hop"])
def test_generated_dynamic_shape_tests_print_one_program_for_every_shape(dialect):
    cfg = GenConfig(p_dynshape=1.0, p_if=0.05, p_scan=0.1, max_depth=2)
    scans = 0
    for g, dyn in _dyn_tests(8, cfg):
        src = torch_source(g, dialect, dyn=dyn)  # checked on every assignment
        scans += "scan(" in src or ".size(0)):" in src
    assert scans >= 1  # a scan over a symbolic length: its steps are the input's size
