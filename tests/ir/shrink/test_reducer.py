"""The GraphIR reducer (`ir.shrink.reducer`): its passes, the size order, semantics-preserving cleanup,
and the property that reduction never grows a graph and keeps the predicate true."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ir
from ir.core.dtypes import DType
from ir.core.types import TensorType
from ir.materialize.to_torch import run_graph_torch
from ir.numerics.input_search import make_valid
from ir.shrink.reducer import PASSES, ReduceConfig, Size, dce, reduce_graph, retype, size_of, solve_shapes

GRAPH = """graph main(%x0: f32[2,3,4], %x1: f32[4,5], %x20: f32[], %w2: param f32[2,3,5]) {
  %v3 = matmul(%x0, %x1) : f32[2,3,5]
  %v4 = relu(%v3) : f32[2,3,5]
  %v5 = add(%v4, %w2) : f32[2,3,5]
  %v6 = tanh(%v5) : f32[2,3,5]
  %v7 = atan(%v6) : f32[2,3,5]
  %v8 = mul(%v7, %v4) : f32[2,3,5]
  %v9 = reduce_sum[axis=2, keepdim=false](%v8) : f32[2,3]
  %v10 = sigmoid(%v9) : f32[2,3]
  %v11 = reduce_sum[axis=1, keepdim=false](%v10) : f32[2]
  %v12 = reduce_sum[axis=0, keepdim=false](%v11) : f32[]
  %v13 = gt(%v12, %x20) : b8[]
  %v14 = if(%v13, %v8) : f32[2,3,5] {
    graph then(%t0: f32[2,3,5]) {
      %t1 = neg(%t0) : f32[2,3,5]
      return %t1
    }
    graph else(%e0: f32[2,3,5]) {
      %e1 = abs(%e0) : f32[2,3,5]
      %e2 = exp(%e1) : f32[2,3,5]
      return %e2
    }
  }
  return %v14, %v10
}"""


def _graph():
    g = ir.verify(ir.parse(GRAPH))
    valid = make_valid(g, 0)
    assert valid is not None and valid.graph == g
    return g, valid.search.values


def _ops(g) -> list[str]:
    return sorted(inst.op.name for inst, _ in g.walk())


def _outputs(g, values):
    env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}
    with torch.no_grad():
        return [t.numpy() for t in run_graph_torch(g, env)]


def _wrong_on(op: str):
    """A predicate like a backend that computes `op` wrongly: the outputs change when `op`'s
    results are perturbed."""
    from ir.core.graph import Inst

    def perturbed(g):
        def walk(graph):
            insts = []
            for inst in graph.insts:
                insts.append(Inst(inst.op, inst.args, inst.results,
                                  tuple(walk(b) for b in inst.blocks)))
            return graph.with_insts(insts)
        return walk(g)

    def predicate(g, values) -> bool:
        if not any(inst.op.name == op for inst, _ in g.walk()):
            return False
        want = _outputs(g, values)
        env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}

        def run(graph, env):
            env = dict(env)
            for inst in graph.insts:
                def run_block(body, args):
                    vals = run(body, {v.name: t for v, t in zip(body.inputs, args, strict=True)})
                    return [vals[o] for o in body.outputs]
                res = inst.op.torch_call([env[a] for a in inst.args], inst.blocks, run_block)
                res = (res,) if len(inst.results) == 1 else tuple(res)
                if inst.op.name == op:
                    res = tuple(t * 1.5 + 1 for t in res)
                for r, t in zip(inst.results, res, strict=True):
                    env[r.name] = t
            return env

        with torch.no_grad():
            env = run(perturbed(g), env)
        got = [env[o].numpy() for o in g.outputs]
        return any(a.shape != b.shape or not np.allclose(a, b) for a, b in zip(got, want, strict=True))

    return predicate


def test_size_order_is_lexicographic_and_total():
    g, _ = _graph()
    s = size_of(g)
    assert s.insts == 15 and s.elements > 0
    smaller = Size(s.insts - 1, s.elements * 10, 0, 0, 0, 0, 0, "zzz")
    assert smaller < s  # fewer instructions wins whatever else
    same = Size(s.insts, s.elements, s.rank, s.dtype_cost, s.io, s.params, s.outputs,
                s.text + "x")
    assert s < same or same < s  # the canonical text breaks ties


def test_dce_preserves_semantics_and_prunes_control_flow_operands():
    text = """graph main(%x0: f32[3], %x1: i64[], %x2: f32[3]) {
      %v3, %v4 = loop(%x1, %x0, %x2) : f32[3], f32[3] {
        graph body(%i0: i64[], %b0: f32[3], %b1: f32[3]) {
          %b2 = tanh(%b0) : f32[3]
          %b3 = add(%b1, %b0) : f32[3]
          return %b2, %b3
        }
      }
      %v5 = neg(%v4) : f32[3]
      return %v3
    }"""
    g = ir.verify(ir.parse(text))
    h = ir.verify(dce(g))
    assert _ops(h) == ["loop", "tanh"]  # carry 1 and its update went, with %x2
    assert [v.name for v in h.inputs] == ["x0", "x1"]
    vals = {"x0": np.array([0.1, -0.4, 2.0], np.float32), "x1": np.array(3), "x2": np.ones(3, np.float32)}
    assert np.array_equal(_outputs(g, vals)[0], _outputs(h, {k: vals[k] for k in ("x0", "x1")})[0])


def test_dce_prunes_if_operands_and_scan_carries_sequences_and_outputs():
    text = """graph main(%x0: b8[], %x1: f32[3], %x2: f32[3], %x3: f32[2,3], %x4: f32[2,3]) {
      %v5, %v6 = if(%x0, %x1, %x2) : f32[3], f32[3] {
        graph then(%t0: f32[3], %t1: f32[3]) {
          %t2 = neg(%t0) : f32[3]
          %t3 = exp(%t1) : f32[3]
          return %t2, %t3
        }
        graph else(%e0: f32[3], %e1: f32[3]) {
          return %e0, %e1
        }
      }
      %v7, %v8, %v9, %v10 = scan[num_carries=2, reverse=false](%v5, %x1, %x3, %x4) : f32[3], f32[3], f32[2,3], f32[2,3] {
        graph body(%c0: f32[3], %c1: f32[3], %s0: f32[3], %s1: f32[3]) {
          %c2 = add(%c0, %s0) : f32[3]
          %c3 = mul(%c1, %s1) : f32[3]
          return %c2, %c3, %c2, %c3
        }
      }
      return %v9
    }"""
    g = ir.verify(ir.parse(text))
    h = ir.verify(dce(g))
    (if_, scan) = h.insts
    assert len(if_.args) == 2 and len(if_.results) == 1  # only what the scan reads of the if
    assert scan.op.num_carries == 1 and len(scan.args) == 2 and len(scan.results) == 2
    assert [v.name for v in h.inputs] == ["x0", "x1", "x3"]
    vals = make_valid(g, 0).search.values
    assert np.array_equal(_outputs(g, vals)[0],
                          _outputs(h, {v.name: vals[v.name] for v in h.inputs})[0])


def test_wrong_answer_on_one_op_is_isolated():
    g, values = _graph()
    pred = _wrong_on("atan")
    assert pred(g, values)
    res = reduce_graph(g, values, pred, ReduceConfig(max_tests=200))
    assert _ops(res.graph) == ["atan"]
    assert pred(res.graph, res.values)
    ir.verify(res.graph)
    # shapes shrank too: a single element is enough here
    assert res.size.elements <= 2 and res.stopped == "fixed point"


def test_nested_op_is_isolated_through_the_if():
    g, values = _graph()

    def pred(h, vals):
        return any(inst.op.name == "exp" for inst, _ in h.walk())

    res = reduce_graph(g, values, pred)
    assert _ops(res.graph) == ["exp"]


def test_steps_strictly_decrease_and_nothing_is_tried_twice():
    g, values = _graph()
    calls = []

    def pred(h, vals):
        calls.append(ir.canonical_text(h))
        return "relu" in {i.op.name for i, _ in h.walk()} and "add" in {i.op.name for i, _ in h.walk()}

    res = reduce_graph(g, values, pred)
    sizes = [res.original] + [s.size for s in res.steps]
    assert all(b < a for a, b in zip(sizes, sizes[1:], strict=False))  # strict=False: neighbours: one shorter
    assert len(calls) == len(set(calls))
    assert res.tests == len(calls)
    assert set(_ops(res.graph)) == {"add", "relu"}


def test_loop_and_scan_are_unwrapped():
    text = """graph main(%x0: f32[1,3], %x1: i64[], %x2: f32[3]) {
      %v3 = loop(%x1, %x2) : f32[3] {
        graph body(%i0: i64[], %b0: f32[3]) {
          %b1 = sin(%b0) : f32[3]
          return %b1
        }
      }
      %v4, %v5 = scan[num_carries=1, reverse=false](%v3, %x0) : f32[3], f32[1,3] {
        graph body(%c0: f32[3], %s0: f32[3]) {
          %c1 = mul(%c0, %s0) : f32[3]
          %c2 = cos(%c1) : f32[3]
          return %c1, %c2
        }
      }
      return %v5
    }"""
    g = ir.verify(ir.parse(text))
    values = make_valid(g, 1).search.values
    for op, want in (("sin", ["sin"]), ("cos", ["cos"])):
        res = reduce_graph(g, values, lambda h, v, op=op: any(i.op.name == op for i, _ in h.walk()))
        assert _ops(res.graph) == want, ir.print_graph(res.graph)
    # a bug that needs the scan keeps it, but not what it does not need
    res = reduce_graph(g, values, lambda h, v: any(i.op.name == "scan" for i, _ in h.walk()))
    assert _ops(res.graph) == ["scan"]
    assert [p for p in PASSES] and res.stopped == "fixed point"


def test_shapes_are_resolved_with_z3_under_the_ops_constraints():
    text = """graph main(%x0: f32[2,6,8,8], %w1: param f32[4,6,3,3]) {
      %v2 = conv2d[stride=[1,1], padding=[1,1], dilation=[1,1], groups=1](%x0, %w1) : f32[2,4,8,8]
      %v3 = reshape[shape=[2,256]](%v2) : f32[2,256]
      %v4 = slice[axis=1, start=4, end=200, step=1](%v3) : f32[2,196]
      return %v4
    }"""
    g = ir.verify(ir.parse(text))
    h = solve_shapes(g, "min")
    assert h is not None
    ir.verify(h)
    assert size_of(h).elements < size_of(g).elements
    one = solve_shapes(g, "one", ("x0", 0))
    assert one is not None and ir.verify(one).inputs[0].type.shape[0] == 1


def test_ranks_and_dtypes_are_simplified_by_retyping():
    text = """graph main(%x0: f64[1,4], %x1: f64[1,4], %x4: i32[1,4]) {
      %v2 = add(%x0, %x1) : f64[1,4]
      %v5 = cast[to=f64](%x4) : f64[1,4]
      %v3 = mul(%v2, %v5) : f64[1,4]
      return %v3
    }"""
    g = ir.verify(ir.parse(text))
    h = retype(g, {"x0": TensorType((4,), DType.float64), "x1": TensorType((4,), DType.float64)})
    assert h is not None and ir.verify(h).output_types()[0].shape == (1, 4)  # broadcast
    values = make_valid(g, 0).search.values
    res = reduce_graph(g, values, lambda h, v: any(i.op.name == "cast" for i, _ in h.walk()))
    assert _ops(res.graph) == ["cast"]
    (x,) = res.graph.inputs
    assert x.type.dtype is DType.int64 and x.type.rank <= 1  # i32 -> i64, size-1 axis gone
    assert res.graph.insts[0].op.to is DType.float32  # the cast's target simplified too


def test_suspended_passes_resume_and_reach_a_fixed_point():
    g, values = _graph()

    def pred(h, vals):
        return {"relu", "add"} <= {i.op.name for i, _ in h.walk()}

    res = reduce_graph(g, values, pred, ReduceConfig(max_failures=1))
    assert res.stopped == "fixed point" and sum(st.suspended for st in res.passes.values()) > 0
    assert set(_ops(res.graph)) == {"add", "relu"}


def test_budget_stops_the_reducer():
    g, values = _graph()
    res = reduce_graph(g, values, lambda h, v: True, ReduceConfig(max_tests=3))
    assert res.stopped == "max_tests" and res.tests == 3 and res.size < res.original


# ---- property: reduction never grows a graph and keeps the predicate ---------------------------

@st.composite
def cases(draw):
    seed = draw(st.integers(0, 10_000))
    cf = draw(st.booleans())
    g = ir.generate(seed, ir.GenConfig(nodes=draw(st.integers(3, 10)),
                                       **({"p_if": 0.3, "p_loop": 0.3} if cf else {})))
    valid = make_valid(g, seed)
    if valid is None:
        return None
    ops = sorted({inst.op.name for inst, _ in valid.graph.walk()})
    return (valid.graph, valid.search.values, draw(st.sampled_from(ops)), draw(st.integers(5, 60)),
            draw(st.sampled_from([1, 5, 50])))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_reduction_never_grows_and_keeps_the_predicate(case):
    if case is None:
        return
    g, values, op, budget, max_failures = case

    def pred(h, v):
        return any(inst.op.name == op for inst, _ in h.walk())

    res = reduce_graph(g, values, pred, ReduceConfig(max_tests=budget, max_failures=max_failures))
    assert res.size <= res.original
    assert res.graph.num_insts() <= g.num_insts()
    assert pred(res.graph, res.values)
    ir.verify(res.graph)
    assert set(res.values) == {v.name for v in (*res.graph.inputs, *res.graph.params)}
    for v in (*res.graph.inputs, *res.graph.params):
        assert res.values[v.name].shape == tuple(v.type.shape)
