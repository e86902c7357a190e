"""Taking a control-flow construct out of a test (ir/shrink/take_out.py): only the
instructions that ran as the named inlining on every input set go, and the program keeps its
inputs, output names and, on those inputs, its outputs."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ir
from ir.core.text import parse, print_graph
from ir.core.verify import verify
from ir.materialize.to_torch import run_graph_torch
from ir.numerics.input_search import make_valid
from ir.shrink.take_out import exact_sites, take_out

TWO_LOOPS = verify(parse("""graph main(%n: i64[], %m: i64[], %a: f32[3], %w: f32[3]) {
  %y = loop(%n, %a) : f32[3] {
    graph body(%i: i64[], %b: f32[3]) {
      %s = sin(%b) : f32[3]
      return %s
    }
  }
  %z, %w2 = loop(%m, %a, %w) : f32[3], f32[3] {
    graph body(%j: i64[], %c: f32[3], %d: f32[3]) {
      %p = mul(%c, %d) : f32[3]
      return %p, %d
    }
  }
  return %y, %z
}"""))


def values(n: int, m: int) -> dict[str, np.ndarray]:
    return {"n": np.array(n), "m": np.array(m), "a": np.arange(3, dtype=np.float32),
            "w": np.full(3, 0.5, np.float32)}


def test_a_zero_trip_loop_goes_and_the_program_keeps_its_names():
    out = take_out(TWO_LOOPS, [(TWO_LOOPS, values(2, 0))], "loop", "zero trips")
    assert out is not None and out.sites == ("1",) and out.added == {}
    assert [v.name for v in out.graph.inputs] == ["n", "m", "a", "w"]  # `w`, now unread, stays
    assert out.graph.outputs == ("y", "z")
    assert "%z = clone(%a) : f32[3]" in print_graph(out.graph)
    assert [inst.op.name for inst in out.graph.insts] == ["loop", "clone"]


def test_a_loop_that_runs_zero_trips_in_one_set_only_stays():
    sets = [(TWO_LOOPS, values(2, 0)), (TWO_LOOPS, values(2, 1))]
    assert exact_sites(TWO_LOOPS, sets, "loop", "zero trips") == []
    assert take_out(TWO_LOOPS, sets, "loop", "zero trips") is None


def test_a_loop_of_one_trip_is_its_body_once():
    out = take_out(TWO_LOOPS, [(TWO_LOOPS, values(1, 3))], "loop", "its body once")
    assert out is not None and out.sites == ("0",) and out.added == {}  # the counter is unread
    assert [inst.op.name for inst in out.graph.insts] == ["sin", "loop", "clone"]
    assert take_out(TWO_LOOPS, [(TWO_LOOPS, values(2, 3))], "loop", "its body once") is None


def test_an_if_is_the_branch_it_took():
    g = verify(parse("""graph main(%p: b8[], %x: f32[2]) {
  %y = if(%p, %x) : f32[2] {
    graph then(%a: f32[2]) {
      %s = sin(%a) : f32[2]
      return %s
    }
    graph else(%b: f32[2]) {
      %c = cos(%b) : f32[2]
      return %c
    }
  }
  return %y
}"""))
    x = np.array([0.5, 1.0], np.float32)
    out = take_out(g, [(g, {"p": np.array(False), "x": x})], "if", "its else branch")
    assert out is not None and [inst.op.name for inst in out.graph.insts] == ["cos", "clone"]
    assert take_out(g, [(g, {"p": np.array(True), "x": x})], "if", "its else branch") is None


@st.composite
def cases(draw):
    seed = draw(st.integers(0, 10_000))
    g = ir.generate(seed, ir.GenConfig(nodes=draw(st.integers(3, 10)), p_if=0.4, p_loop=0.4))
    valid = make_valid(g, seed)
    if valid is None:
        return None
    return valid.graph, valid.search.values, draw(st.sampled_from([
        ("loop", "zero trips"), ("loop", "its body once"), ("if", "its then branch"),
        ("if", "its else branch")]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_taking_out_keeps_inputs_output_names_and_outputs(case):
    if case is None:
        return
    g, vals, (op, way) = case
    out = take_out(g, [(g, vals)], op, way)
    if out is None:
        return
    assert out.sites and all(s.inst(g).op.name == op for s in map(ir.core.paths.Site.parse, out.sites))
    assert [v.name for v in out.graph.inputs][:len(g.inputs)] == [v.name for v in g.inputs]
    assert out.graph.outputs == g.outputs
    assert sum(inst.op.name == op for inst, _ in out.graph.walk()) < sum(
        inst.op.name == op for inst, _ in g.walk())
    env = {k: torch.from_numpy(np.array(v)) for k, v in vals.items()}
    want = run_graph_torch(g, env)
    got = run_graph_torch(out.graph, {**env, **{k: torch.from_numpy(v) for k, v in out.added.items()}})
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-6)
