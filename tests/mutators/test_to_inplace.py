"""to_inplace: out-of-place ops become in-place ones (also through views) only where the
in-place analysis accepts the program; the mutants run on eager and ORT like the originals."""
from __future__ import annotations

import random

import pytest

from ir import GenConfig, parse, verify

pytest.importorskip("ir.ops.inplace")  # the in-place and view ops (docs/inplace.md)

from mutator_graphs import graphs  # noqa: E402

from ir.analysis.inplace import counts  # noqa: E402
from mutators import MUTATORS, MutationConfig  # noqa: E402


def test_in_place_mutants_verify_and_write():
    m = MUTATORS["to_inplace"]()
    seen = set()
    for i in range(80):
        g = graphs()[i % len(graphs())]
        mu = m.propose(g, random.Random(i), GenConfig())
        if mu is None:
            continue
        verify(mu.graph)  # the in-place analysis included
        assert counts(mu.graph)[0] > counts(g)[0]
        seen.add((mu.params["op"], mu.params.get("view")))
    assert len(seen) >= 4 and any(v for _, v in seen)


def test_a_movement_op_becomes_a_view_the_write_goes_through():
    g = verify(parse("""
graph main(%x: f32[4,6], %w: param f32[6,6]) {
  %h = matmul(%x, %w) : f32[4,6]
  %s = slice[axis=1, start=0, end=3, step=1](%h) : f32[4,3]
  %r = relu(%s) : f32[4,3]
  %o = add(%r, %r) : f32[4,3]
  return %o, %h
}"""))
    m = MUTATORS["to_inplace"]()
    views = set()
    for i in range(40):
        mu = m.propose(g, random.Random(i), GenConfig())
        if mu is not None:
            verify(mu.graph)
            views.add(mu.params.get("view"))
    assert "view_slice" in views


def test_params_and_body_inputs_are_never_written():
    g = verify(parse("""
graph main(%x: f32[4], %w: param f32[4]) {
  %r = relu(%w) : f32[4]
  %o = add(%r, %x) : f32[4]
  return %o
}"""))
    m = MUTATORS["to_inplace"]()
    for i in range(30):
        mu = m.propose(g, random.Random(i), GenConfig())
        if mu is not None:
            verify(mu.graph)
            written = [inst.args[0] for inst, _ in mu.graph.walk() if inst.op.effect.writes is not None]
            assert "w" not in written
            if "x" in written:
                assert "x" in mu.graph.outputs  # a mutated input is returned


def test_in_place_mutants_pass_on_eager_and_ort():
    from campaign.worker import FuzzWorker, WorkerConfig

    cfg = WorkerConfig(backends=["ort_noopt", "eager"], sandbox=False,
                       mutation=MutationConfig(rate=1.0, max_steps=2, weights={"to_inplace": 1.0}))
    inplace = 0
    with FuzzWorker(cfg) as w:
        for i in range(16):
            rows = w.run(f"t{i}", i).rows
            assert all(r["verdict"] == "pass" for r in rows), [(r["backend"], r["error_msg"]) for r in rows]
            inplace += rows[0]["n_inplace"] > 0
    assert inplace >= 8
