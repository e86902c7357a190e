"""Compile regions (`ir.ops.region`, `ir.gen.region`): the text form, the body rule (exact
message), the plan (variants by skeleton, copied operands), and, on hand-written and
generated programs, that eager, the inlined graph, ONNX Runtime (a model-local function), the
printed torch source and torch.compile with the regions agree, in forward and backward."""
from __future__ import annotations

import collections
import random

import numpy as np
import onnxruntime as ort
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ir import GenConfig, VerifyError, generate, parse, print_graph, verify
from ir.core.graph import Graph
from ir.gen.region import add_regions
from ir.materialize.to_onnx import to_onnx
from ir.materialize.to_torch import GraphModule, run_graph_torch
from ir.materialize.torch_source import torch_source
from ir.numerics.input_search import make_valid
from ir.ops.region import Region, plan_regions, region_sites

#: pytorch#192905's shape: one function, two bodies chosen by an attribute of the site
#: argument, the second call nested in another region; and a second variant-0 call on
#: operands of another shape
FLAGS = """graph main(%x: f32[4,3], %z: f32[5,3], %w: param f32[4,3]) {
  %a = region[label=r0](%x) : f32[4,3] {
    graph r0(%x1: f32[4,3]) {
      %s = sin(%x1) : f32[4,3]
      return %s
    }
  }
  %b = region[label=r1](%x, %w) : f32[4,3] {
    graph r1(%x2: f32[4,3], %w2: f32[4,3]) {
      %m = mul(%x2, %w2) : f32[4,3]
      %c = region[label=r0](%m) : f32[4,3] {
        graph r0(%x3: f32[4,3]) {
          %k = cos(%x3) : f32[4,3]
          return %k
        }
      }
      return %c
    }
  }
  %d = region[label=r0](%z) : f32[5,3] {
    graph r0(%x4: f32[5,3]) {
      %s4 = sin(%x4) : f32[5,3]
      return %s4
    }
  }
  %v = view_slice[axis=0, start=0, end=2, step=1](%a) : f32[2,3]
  %e = add(%a, %b) : f32[4,3]
  return %e, %d, %v
}
"""

#: a region called once per trip of a loop (the python dialect unrolls it: one call per trip)
IN_LOOP = """graph main(%n: i64[], %x: f32[3], %w: param f32[3]) {
  %y = loop(%n, %x) : f32[3] {
    graph body(%i: i64[], %c: f32[3]) {
      %r = region[label=r0](%c) : f32[3] {
        graph r0(%c1: f32[3]) {
          %t = tanh(%c1) : f32[3]
          return %t
        }
      }
      return %r
    }
  }
  %o = mul(%y, %w) : f32[3]
  return %o
}
"""


def _values(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for v in (*g.inputs, *g.params):
        shape = [int(d) for d in v.type.shape]
        out[v.name] = (np.full(shape, 3) if v.type.dtype.name == "int64" else
                       rng.uniform(0.5, 1.5, shape)).astype(v.type.dtype.numpy)
    return out


def _torch(vals: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.array(v, copy=True)) for k, v in vals.items()}


def _close(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        np.allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5, equal_nan=True)
        for x, y in zip(a, b, strict=True))


def _inputs(g: Graph, vals: dict[str, np.ndarray]) -> list[torch.Tensor]:
    return [_torch(vals)[v.name] for v in g.inputs]


def _compiled(g: Graph, vals: dict[str, np.ndarray], backend: str, dialect: str = "python"
              ) -> list[np.ndarray]:
    torch._dynamo.reset()
    mod = GraphModule(g, {p.name: vals[p.name] for p in g.params}, dialect)
    with torch.no_grad():
        out = torch.compile(mod, backend=backend, fullgraph=dialect == "hop")(*_inputs(g, vals))
    return [t.numpy() for t in out]


def test_text_form_round_trips():
    g = parse(FLAGS)
    verify(g)
    assert parse(print_graph(g)) == g
    assert region_sites(g) == 4


def test_a_region_body_holds_no_view_or_write():
    bad = FLAGS.replace("%s = sin(%x1) : f32[4,3]", "%s = view_slice[axis=0, start=0, end=4, "
                        "step=1](%x1) : f32[4,3]")
    with pytest.raises(VerifyError, match="body holds view_slice: a region's body is pure "
                       r"code \(no control flow but regions, no views or in-place writes\)"):
        verify(parse(bad))


def test_the_plan_shares_a_variant_across_shapes_and_copies_what_may_alias():
    g = parse(FLAGS)
    plan = plan_regions(g)
    assert [len(plan.variants[k]) for k in ("r0", "r1")] == [2, 1]
    by_result = {inst.results[0].name: plan.sites[id(inst.blocks[0])]
                 for inst, _ in g.walk() if isinstance(inst.op, Region)}
    assert {k: s.variant for k, s in by_result.items()} == {"a": 0, "b": 0, "c": 1, "d": 0}
    # a top-level input and a pure op's fresh result (%c's operand %m) are passed as they are
    assert by_result["a"].copied == frozenset() and by_result["c"].copied == frozenset()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("text", [FLAGS, IN_LOOP], ids=["flags", "in_loop"])
def test_compiled_regions_match_eager(text: str, backend: str):
    g = parse(text)
    vals = _values(g)
    ref = [t.numpy() for t in run_graph_torch(g, _torch(vals))]
    assert _close(ref, _compiled(g, vals, backend))


def test_every_materialization_agrees():
    g = parse(FLAGS)
    vals = _values(g)
    ref = [t.numpy() for t in run_graph_torch(g, _torch(vals))]
    model = to_onnx(g, {p.name: vals[p.name] for p in g.params})
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert _close(ref, s.run(None, {v.name: vals[v.name] for v in g.inputs}))
    src = torch_source(g)  # runs its own check against the interpreter
    assert src.count("@torch.compiler.nested_compile_region") == 2
    assert "if site.variant == 1:" in src


def test_training_through_regions_under_aot_eager_matches_eager():
    g = parse(FLAGS)
    vals = _values(g)
    mod = GraphModule(g, {p.name: vals[p.name] for p in g.params})

    def grads(m: torch.nn.Module) -> tuple:
        x, z = (torch.from_numpy(vals[k].copy()).requires_grad_() for k in ("x", "z"))
        e, d, v = m(x, z)
        return torch.autograd.grad((e * e).sum() + d.sum() + v.sum(), (x, z))

    want = grads(mod)
    torch._dynamo.reset()
    got = grads(torch.compile(mod, backend="aot_eager", fullgraph=True))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(want, got, strict=True))


def test_the_generator_places_groups_of_every_kind():
    seen: collections.Counter = collections.Counter()
    for seed in range(100):
        g = generate(seed, GenConfig(nodes=10, p_if=0.2, p_loop=0.1, p_scan=0.1, dtypes=["f32"]))
        made = add_regions(g, random.Random(seed), groups=1)
        verify(made)
        labels = collections.Counter(i.op.label for i, _ in made.walk()
                                     if isinstance(i.op, Region))
        plan = plan_regions(made)
        seen["placed"] += bool(labels)
        seen["several calls"] += any(c > 1 for c in labels.values())
        seen["several variants"] += any(len(v) > 1 for v in plan.variants.values())
        seen["nested"] += any(isinstance(j.op, Region) for i, _ in made.walk()
                              if isinstance(i.op, Region) for j in i.blocks[0].insts)
        shapes = collections.defaultdict(set)
        for i, _ in made.walk():
            if isinstance(i.op, Region):
                shapes[i.op.label].add(tuple(v.type.shape for v in i.blocks[0].inputs))
        seen["other shapes"] += any(len(v) > 1 for v in shapes.values())
        seen["new outputs"] += len(made.outputs) > len(g.outputs)
    assert seen["placed"] >= 90, seen
    for kind in ("several calls", "several variants", "nested", "other shapes", "new outputs"):
        assert seen[kind] >= 3, seen


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_generated_regions_agree(seed: int):
    cfg = GenConfig(nodes=8, p_if=0.2, p_loop=0.1, p_scan=0.1, max_elems=256, p_region=1.0)
    g = generate(seed, cfg)
    valid = make_valid(g, seed)
    if valid is None or not region_sites(valid.graph):
        return
    g, vals = valid.graph, valid.search.values
    verify(g)
    assert parse(print_graph(g)) == g
    ref = [t.numpy() for t in run_graph_torch(g, _torch(vals))]
    ns: dict = {}
    exec(compile(torch_source(g), "<generated>", "exec"), ns)
    with torch.no_grad():
        got = ns["Model"]({p.name: vals[p.name] for p in g.params})(*_inputs(g, vals))
    assert _close(ref, [t.numpy() for t in got])
    assert _close(ref, _compiled(g, vals, "aot_eager"))


#: two labels of one shape: torch keys a region's reuse on its function's code object (F60),
#: so each label's function must have its own, or the second reuses the first's body
TWO_LABELS = """graph main(%x: f32[3]) {
  %a = region[label=r1](%x) : f32[3] {
    graph r1(%x1: f32[3]) {
      %t = tanh(%x1) : f32[3]
      return %t
    }
  }
  %b = region[label=r0](%a) : f32[3] {
    graph r0(%x2: f32[3]) {
      %l = log(%x2) : f32[3]
      return %l
    }
  }
  return %b
}
"""


def test_each_label_has_a_function_of_its_own_code():
    from ir.ops.region import _SITES, register_regions

    g = parse(TWO_LABELS)
    register_regions(g)
    fns = [_SITES[id(i.blocks[0])][1].__marked_compile_region_fn__ for i, _ in g.walk()
           if isinstance(i.op, Region)]
    codes = [f.__code__ for f in fns]
    assert [c.co_name for c in codes] == ["region_r1", "region_r0"] and codes[0] != codes[1]
    vals = _values(g)
    ref = [t.numpy() for t in run_graph_torch(g, _torch(vals))]
    assert _close(ref, _compiled(g, vals, "eager"))
