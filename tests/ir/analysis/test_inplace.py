"""In-place ops, views and the in-place analysis (docs/inplace.md): semantics against real torch,
every documented rejection with its exact message (and what torch itself does with the same
program), functionalization, the torch plan, generation, and the property that the in-place
program on torch eager, its functionalized form on torch eager and the functionalized ONNX on
ONNX Runtime agree."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from campaign.artifacts import Materialized
from campaign.backends import make_backend
from campaign.oracle import compare
from campaign.testcase import TestCase
from ir import GenConfig, generate, parse, print_graph, verify
from ir.analysis import inplace
from ir.analysis.precision import output_tolerances
from ir.core.op import OP_REGISTRY
from ir.core.verify import VerifyError
from ir.materialize.to_onnx import to_onnx
from ir.materialize.to_torch import GraphModule, evaluate_torch
from ir.numerics.domain import evaluate_checked
from ir.numerics.input_search import make_valid

torch.set_num_threads(1)


def _env(g, seed=0):
    rng = np.random.default_rng(seed)
    env = {}
    for v in (*g.inputs, *g.params):
        d = v.type.dtype
        if d.is_float:
            a = rng.uniform(-2, 2, v.type.shape)
        elif d.is_int:
            a = rng.integers(-4, 5, v.type.shape)
        else:
            a = rng.random(v.type.shape) < 0.5
        env[v.name] = torch.from_numpy(np.asarray(a, dtype=d.numpy))
    return env


def _outputs_inplace(g, env):
    values = evaluate_torch(g, env)
    return [values[o].numpy() for o in g.outputs]


def _outputs_functional(g, env):
    fg = inplace.functionalize(g).graph
    assert not inplace.has_writes(fg)
    verify(fg)
    values = evaluate_torch(fg, env)
    return [values[o].numpy() for o in fg.outputs]


# ---- semantics ---------------------------------------------------------------------------------

EXAMPLE = """
graph main(%x0: f32[4,4], %y1: f32[4]) {
  %v2 = view_slice[axis=0, start=1, end=3, step=1](%x0) : f32[2,4]
  %v3 = add_(%v2, %y1) : f32[2,4]
  %v4 = view_diagonal[offset=0, dim1=0, dim2=1](%x0) : f32[4]
  %v5 = mul_(%v4, %y1) : f32[4]
  %v6 = view_unfold[dim=1, size=2, step=2](%x0) : f32[4,2,2]
  %v7 = relu_(%v6) : f32[4,2,2]
  %v8 = mul(%x0, %x0) : f32[4,4]
  %v9 = setitem[starts=[0], ends=[3], steps=[2]](%v8, %y1) : f32[4,4]
  %v10 = view_permute[perm=[1,0]](%v8) : f32[4,4]
  %v11 = view_reshape[shape=[16]](%x0) : f32[16]
  %v12 = view_select[axis=1, index=2](%v10) : f32[4]
  %v13 = fill_[value=0.5](%v12) : f32[4]
  return %x0, %v8, %v10, %v11, %v3, %v2
}
"""


def _torch_example(x, y):
    """EXAMPLE written by hand in torch (the semantics the IR must have)."""
    x[1:3].add_(y)
    x.diagonal(0, 0, 1).mul_(y)
    x.unfold(1, 2, 2).relu_()
    v8 = x * x
    v8[0:3:2] = y
    v10 = v8.permute(1, 0)
    v11 = x.view(16)
    v10.select(1, 2).fill_(0.5)
    return x, v8, v10, v11, x[1:3], x[1:3]


def test_example_matches_handwritten_torch_and_its_functional_form():
    g = verify(parse(EXAMPLE))
    env = _env(g)
    expected = [t.numpy() for t in _torch_example(env["x0"].clone(), env["y1"].clone())]
    got = _outputs_inplace(g, env)
    for e, a in zip(expected, got, strict=True):
        np.testing.assert_array_equal(a, e)
    for e, a in zip(expected, _outputs_functional(g, env), strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-6)


def test_reading_the_old_name_after_a_write_sees_the_new_contents():
    g = verify(parse("""
graph main(%x0: f32[3]) {
  %v1 = relu(%x0) : f32[3]
  %v2 = view_slice[axis=0, start=0, end=2, step=1](%v1) : f32[2]
  %v3 = fill_[value=7.0](%v2) : f32[2]
  %v4 = neg(%v2) : f32[2]
  %v5 = neg(%v1) : f32[3]
  return %v4, %v5, %v3, %v1
}"""))
    env = {"x0": torch.tensor([-1.0, 2.0, 3.0])}
    for outs in (_outputs_inplace(g, env), _outputs_functional(g, env)):
        # after the write, v2 (the old name of the written view) reads [7, 7], its base v1
        # [7, 7, 3]; the outputs v3 and v1 are read at the end
        np.testing.assert_array_equal(outs[0], [-7.0, -7.0])
        np.testing.assert_array_equal(outs[1], [-7.0, -7.0, -3.0])
        np.testing.assert_array_equal(outs[2], [7.0, 7.0])
        np.testing.assert_array_equal(outs[3], [7.0, 7.0, 3.0])


def test_evaluate_torch_leaves_inputs_alone_but_the_module_mutates_them():
    g = verify(parse("""
graph main(%x0: f32[3], %x1: f32[3]) {
  %v2 = add_(%x0, %x1) : f32[3]
  return %x0
}"""))
    x, y = torch.ones(3), torch.full((3,), 2.0)
    evaluate_torch(g, {"x0": x, "x1": y})
    assert torch.equal(x, torch.ones(3))
    (out,) = GraphModule(g, {})(x, y)
    assert torch.equal(x, torch.full((3,), 3.0)) and out is x


def test_text_round_trip_of_every_inplace_and_view_op():
    g = verify(parse(EXAMPLE))
    assert parse(print_graph(g)) == g
    g2 = _generated(40, 0.5)
    for h in g2:
        assert parse(print_graph(h)) == h


def test_torch_may_alias_covers_every_op_whose_torch_form_aliases():
    """Every op that does not declare `torch_may_alias` returns new storage in torch (the torch
    plan relies on it to keep pure results pure), and every op that does declare it returns an
    operand's memory in torch for some operands."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "ops"))
    from opcheck import LIBRARY_OPS, op_graphs

    aliasing = set()
    for name in LIBRARY_OPS:
        for g in op_graphs(name, 2, nodes=1):
            inst = g.insts[0]
            env = _env(g)
            args = [env[a] for a in inst.args]
            res = inst.op.torch(*args)
            res = res if isinstance(res, tuple) else (res,)
            ptrs = {a.untyped_storage().data_ptr() for a in args}
            if any(r.untyped_storage().data_ptr() in ptrs for r in res):
                aliasing.add(name)
    declared = {n for n in LIBRARY_OPS if OP_REGISTRY[n].torch_may_alias}
    assert aliasing == declared, (sorted(aliasing - declared), sorted(declared - aliasing))


def test_a_pure_result_torch_makes_a_view_stays_new_storage():
    """`slice` is a view in torch; written, it must not change its operand (value semantics)."""
    g = verify(parse("""
graph main(%x0: f32[4]) {
  %v1 = relu(%x0) : f32[4]
  %v2 = slice[axis=0, start=0, end=2, step=1](%v1) : f32[2]
  %v3 = fill_[value=9.0](%v2) : f32[2]
  %v4 = reshape[shape=[2,2]](%v1) : f32[2,2]
  %v5 = mul_(%v1, %v1) : f32[4]
  return %v1, %v3, %v4
}"""))
    env = {"x0": torch.tensor([1.0, 2.0, 3.0, 4.0])}
    for outs in (_outputs_inplace(g, env), _outputs_functional(g, env)):
        np.testing.assert_array_equal(outs[0], [1.0, 4.0, 9.0, 16.0])
        np.testing.assert_array_equal(outs[1], [9.0, 9.0])
        np.testing.assert_array_equal(outs[2], [[1.0, 2.0], [3.0, 4.0]])


def test_inplace_in_a_body_on_a_local_value():
    g = verify(parse("""
graph main(%x0: b8[], %x1: f32[3]) {
  %v2 = if(%x0, %x1) : f32[3] {
    graph then(%a3: f32[3]) {
      %v4 = relu(%a3) : f32[3]
      %v5 = view_slice[axis=0, start=1, end=3, step=1](%v4) : f32[2]
      %v6 = fill_[value=5.0](%v5) : f32[2]
      return %v4
    }
    graph else(%a7: f32[3]) {
      return %a7
    }
  }
  %v8 = mul_(%v2, %x1) : f32[3]
  return %v8, %x1
}"""))
    for pred in (True, False):
        env = {"x0": torch.tensor(pred), "x1": torch.tensor([-1.0, 2.0, 3.0])}
        for dialect in ("python", "hop"):
            values = evaluate_torch(g, env, dialect)
            out = values["v8"].numpy()
            want = np.array([0.0, 10.0, 15.0]) if pred else np.array([1.0, 4.0, 9.0])
            np.testing.assert_array_equal(out, want)
            np.testing.assert_array_equal(values["x1"].numpy(), [-1.0, 2.0, 3.0])
        np.testing.assert_allclose(_outputs_functional(g, env)[0], want)


# ---- rejections --------------------------------------------------------------------------------


def _refuses(fn) -> bool:
    try:
        fn()
    except Exception:  # RuntimeError, or torch.cond's UncapturedHigherOrderOpError
        return True
    return False


class Runs:
    """The same program runs on torch eager (the rejection is ours: ill-defined or unsupported)."""

    def __init__(self, fn):
        self.fn = fn


def _t_expand_add():
    base = torch.zeros(1, 3)
    v = base.expand(2, 3)
    v.add_(v)


def _t_transpose_overlap():
    b = torch.arange(9.0).reshape(3, 3)
    b.add_(b.t())


def _t_setitem_overlap():
    b = torch.arange(8.0)
    b[0:4] = b[2:6]


REJECTED = [
    # (case, program, exact summary, the same program in torch: a function torch refuses to
    #  run, Runs(a function it runs), or None where there is no direct torch equivalent)
    ("broadcast", """graph main(%x0: f32[3], %x1: f32[2,3]) {
  %v2 = add_(%x0, %x1) : f32[3]
  return %x0
}""", "graph main, inst 0 (add_): result shape [2,3] (broadcast) differs from the destination's [3]",
     lambda: torch.zeros(3).add_(torch.ones(2, 3))),
    ("no_broadcast", """graph main(%x0: f32[3], %x1: f32[4]) {
  %v2 = mul_(%x0, %x1) : f32[3]
  return %x0
}""", "graph main, inst 0 (mul_): operand shape [4] does not broadcast with the destination's [3]",
     lambda: torch.zeros(3).mul_(torch.ones(4))),
    ("mask_broadcast", """graph main(%x0: f32[3], %x1: b8[2,3]) {
  %v2 = masked_fill_[value=1.0](%x0, %x1) : f32[3]
  return %x0
}""", "graph main, inst 0 (masked_fill_): result shape [2,3] (broadcast) differs from the destination's [3]",
     lambda: torch.zeros(3).masked_fill_(torch.ones(2, 3, dtype=torch.bool), 1.0)),
    ("setitem_broadcast", """graph main(%x0: f32[4,3], %x1: f32[4]) {
  %v2 = setitem[starts=[0], ends=[2], steps=[1]](%x0, %x1) : f32[4,3]
  return %x0
}""", "graph main, inst 0 (setitem): source shape [4] does not broadcast with the indexed region's [2,3]",
     lambda: torch.zeros(4, 3).__setitem__(slice(0, 2), torch.ones(4))),
    ("int_dest_float_result", """graph main(%x0: i32[3], %x1: f32[3]) {
  %v2 = add_(%x0, %x1) : i32[3]
  return %x0
}""", "graph main, inst 0 (add_): result dtype f32 cannot be written into a destination of dtype i32",
     lambda: torch.zeros(3, dtype=torch.int32).add_(torch.ones(3))),
    ("div_ints", """graph main(%x0: i64[3], %x1: i64[3]) {
  %v2 = div_(%x0, %x1) : i64[3]
  return %x0
}""", "graph main, inst 0 (div_): result dtype f32 cannot be written into a destination of dtype i64",
     lambda: torch.ones(3, dtype=torch.int64).div_(torch.ones(3, dtype=torch.int64))),
    ("sigmoid_int", """graph main(%x0: i64[3]) {
  %v1 = sigmoid_(%x0) : i64[3]
  return %x0
}""", "graph main, inst 0 (sigmoid_): result dtype f32 cannot be written into a destination of dtype i64",
     lambda: torch.ones(3, dtype=torch.int64).sigmoid_()),
    ("clamp_int_float_bounds", """graph main(%x0: i32[3]) {
  %v1 = clamp_[lo=-0.5, hi=2.5](%x0) : i32[3]
  return %x0
}""", "graph main, inst 0 (clamp_): result dtype f32 cannot be written into a destination of dtype i32",
     lambda: torch.ones(3, dtype=torch.int32).clamp_(-0.5, 2.5)),
    ("sub_bool", """graph main(%x0: i32[3], %x1: b8[3]) {
  %v2 = sub_(%x0, %x1) : i32[3]
  return %x0
}""", "graph main, inst 0 (sub_): sub_ of a bool operand: torch refuses subtraction with bool",
     lambda: torch.ones(3, dtype=torch.int32).sub_(torch.ones(3, dtype=torch.bool))),
    ("index_put_duplicate", """graph main(%x0: f32[3], %x1: f32[2]) {
  %v2 = index_put_[depth=1, indices=[1, 1], accumulate=false](%x0, %x1) : f32[3]
  return %x0
}""", "graph main, inst 0 (index_put_): index [1] is written twice without accumulate: torch leaves the result undefined",
     Runs(lambda: torch.zeros(3).index_put_((torch.tensor([1, 1]),), torch.ones(2)))),
    ("param", """graph main(%x0: f32[3], %w1: param f32[3]) {
  %v2 = add_(%w1, %x0) : f32[3]
  return %v2
}""", "graph main, inst 0 (add_): writes param %w1: weights are read-only", None),
    ("param_through_view", """graph main(%x0: f32[3], %w1: param f32[3]) {
  %v2 = view_slice[axis=0, start=0, end=2, step=1](%w1) : f32[2]
  %v3 = fill_[value=1.0](%v2) : f32[2]
  return %v3
}""", "graph main, inst 1 (fill_): writes param %w1 through %v2: weights are read-only", None),
    ("body_input", """graph main(%x0: b8[], %x1: f32[3]) {
  %v2 = if(%x0, %x1) : f32[3] {
    graph then(%a3: f32[3]) {
      %v4 = relu_(%a3) : f32[3]
      return %v4
    }
    graph else(%a5: f32[3]) {
      return %a5
    }
  }
  return %v2
}""", "graph main, inst 0 (if) > block 0 graph then, inst 0 (relu_): writes %a3, an input of this body: "
      "bodies may not mutate their operands",
     lambda: torch.cond(torch.tensor(True), lambda x: x.relu_(), lambda x: x.clone(), (torch.ones(3),))),
    ("expanded", """graph main(%x0: f32[1,3]) {
  %v1 = mul(%x0, %x0) : f32[1,3]
  %v2 = view_expand[shape=[2,3]](%v1) : f32[2,3]
  %v3 = add_(%v2, %v2) : f32[2,3]
  return %v3
}""", "graph main, inst 2 (add_): writes %v2, whose elements share memory (an expanded or overlapping "
      "unfold view): the result would depend on the order of the writes", _t_expand_add),
    ("overlapping_unfold", """graph main(%x0: f32[6]) {
  %v1 = relu(%x0) : f32[6]
  %v2 = view_unfold[dim=0, size=3, step=1](%v1) : f32[4,3]
  %v3 = relu_(%v2) : f32[4,3]
  return %v3
}""", "graph main, inst 2 (relu_): writes %v2, whose elements share memory (an expanded or overlapping "
      "unfold view): the result would depend on the order of the writes",
     Runs(lambda: torch.zeros(6).unfold(0, 3, 1).relu_())),
    ("through_expanded", """graph main(%x0: f32[1,3]) {
  %v1 = mul(%x0, %x0) : f32[1,3]
  %v2 = view_expand[shape=[2,3]](%v1) : f32[2,3]
  %v3 = view_select[axis=0, index=0](%v2) : f32[3]
  %v4 = fill_[value=1.0](%v3) : f32[3]
  return %v4
}""", "graph main, inst 3 (fill_): writes %v3 through %v2, whose elements share memory: writing back "
      "through such a view is not supported",
     Runs(lambda: torch.zeros(1, 3).expand(2, 3).select(0, 0).fill_(1.0))),
    ("read_overlaps_write", """graph main(%x0: f32[3,3]) {
  %v1 = relu(%x0) : f32[3,3]
  %v2 = view_permute[perm=[1,0]](%v1) : f32[3,3]
  %v3 = add_(%v1, %v2) : f32[3,3]
  return %v3
}""", "graph main, inst 2 (add_): reads %v2, which overlaps the memory it writes (%v1) without being "
      "the same elements: the result would depend on the order of reads and writes", _t_transpose_overlap),
    ("setitem_overlap", """graph main(%x0: f32[8]) {
  %v1 = relu(%x0) : f32[8]
  %v2 = view_slice[axis=0, start=2, end=6, step=1](%v1) : f32[4]
  %v3 = setitem[starts=[0], ends=[4], steps=[1]](%v1, %v2) : f32[8]
  return %v3
}""", "graph main, inst 2 (setitem): reads %v2, which overlaps the memory it writes (%v1[0:4]) without "
      "being the same elements: the result would depend on the order of reads and writes", _t_setitem_overlap),
    ("view_strides", """graph main(%x0: f32[3,4]) {
  %v1 = view_permute[perm=[1,0]](%x0) : f32[4,3]
  %v2 = view_reshape[shape=[12]](%v1) : f32[12]
  return %v2
}""", "graph main, inst 1 (view_reshape): cannot view %v1 (strides (1, 4)) as [12]: torch's view needs "
      "compatible strides", lambda: torch.zeros(3, 4).permute(1, 0).view(12)),
    ("unreturned_input", """graph main(%x0: f32[3], %x1: f32[3]) {
  %v2 = add_(%x0, %x1) : f32[3]
  return %v2
}""", "graph main: input %x0 is written (inst 0, add_) but is not an output: a mutated input must be "
      "returned", None),
]


@pytest.mark.parametrize("case,text,message,in_torch", REJECTED, ids=[c[0] for c in REJECTED])
def test_rejected_with_exact_message(case, text, message, in_torch):
    with pytest.raises(VerifyError) as err:
        verify(parse(text))
    assert err.value.summary == message
    if isinstance(in_torch, Runs):
        assert not _refuses(in_torch.fn), f"torch refuses case {case}"
    elif in_torch is not None:
        assert _refuses(in_torch), f"torch accepts case {case}"


def test_the_doc_lists_every_rejection_verbatim():
    from pathlib import Path

    doc = (Path(__file__).parents[3] / "docs" / "inplace.md").read_text()
    missing = [message for _, _, message, _ in REJECTED if message not in doc]
    assert not missing, missing


def test_unfold_with_gaps_accepted_and_identical_operand_accepted():
    g = verify(parse("""
graph main(%x0: f32[3,4]) {
  %v1 = relu(%x0) : f32[3,4]
  %v2 = view_unfold[dim=1, size=1, step=2](%v1) : f32[3,2,1]
  %v3 = add_(%v2, %v2) : f32[3,2,1]
  return %v1
}"""))
    env = _env(g)
    want = torch.relu(env["x0"])
    want.unfold(1, 1, 2).add_(want.unfold(1, 1, 2))
    np.testing.assert_array_equal(_outputs_inplace(g, env)[0], want.numpy())
    np.testing.assert_array_equal(_outputs_functional(g, env)[0], want.numpy())


# ---- validity, trace and rows ------------------------------------------------------------------


def test_validity_is_judged_on_the_functional_form_and_mapped_back():
    g = verify(parse("""
graph main(%x0: f32[3], %x1: f32[3]) {
  %v2 = relu(%x0) : f32[3]
  %v3 = fill_[value=0.0](%v2) : f32[3]
  %v4 = div_(%x1, %v2) : f32[3]
  return %x1, %v3
}"""))
    env = {"x0": torch.ones(3), "x1": torch.ones(3)}
    values, violation = evaluate_checked(g, env)
    assert violation is not None and violation.index == 2
    assert violation.message.startswith("inst 2 (div_), functionalized inst")
    assert violation.penalties  # differentiable: the input search can act on it


def test_counts_and_functional_onnx_is_valid():
    import onnx

    g = verify(parse(EXAMPLE))
    assert inplace.counts(g) == (5, 5)
    model = to_onnx(g, {})
    onnx.checker.check_model(model, full_check=True)
    assert len(model.graph.output) == len(g.outputs)


# ---- generation and the three-way property ---------------------------------------------------


def _generated(n: int, p: float, start: int = 0, **kw) -> list:
    out = []
    for seed in range(start, start + n):
        out.append(generate(seed, GenConfig(nodes=8, max_elems=256, p_inplace=p, **kw)))
    return out


def test_generation_is_deterministic_and_off_by_default():
    cfg = GenConfig(nodes=8, max_elems=256)
    for seed in range(10):
        g = generate(seed, cfg)
        assert not inplace.has_effects(g)
        assert generate(seed, GenConfig(nodes=8, max_elems=256, p_inplace=0.0)) == g
        a = generate(seed, GenConfig(nodes=8, max_elems=256, p_inplace=0.5))
        assert a == generate(seed, GenConfig(nodes=8, max_elems=256, p_inplace=0.5))


def _three_way(seeds, p_cf: float = 0.0) -> dict:
    ort = make_backend("ort_noopt")
    stats = {"checked": 0, "skipped": 0, "writes": 0, "view_writes": 0, "body_writes": 0}
    for seed in seeds:
        g = generate(seed, GenConfig(nodes=8, max_elems=256, p_inplace=0.4, p_if=p_cf,
                                     p_loop=p_cf))
        valid = make_valid(g, seed)
        if valid is None or not inplace.has_writes(valid.graph):
            stats["skipped"] += 1
            continue
        g, values = valid.graph, valid.search.values
        env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}
        fg = inplace.functionalize(g).graph
        tols = output_tolerances(fg)
        with torch.no_grad():
            eager = _outputs_inplace(g, env)
            func = _outputs_functional(g, env)
        c = compare(eager, func, tols)
        assert c.ok, f"seed {seed}: eager in-place vs functionalized: {c.message}\n{print_graph(g)}"
        r = ort.evaluate(Materialized(TestCase("t", seed, g, values)))
        assert not r.failed, f"seed {seed}: ORT: {r.error_msg}\n{print_graph(fg)}"
        c = compare(eager, r.outputs, tols)
        assert c.ok, f"seed {seed}: eager in-place vs ORT: {c.message}\n{print_graph(g)}"
        n, nv = inplace.counts(g)
        stats["checked"] += 1
        stats["writes"] += n
        stats["view_writes"] += nv
        stats["body_writes"] += sum(1 for inst, d in g.walk() if d and inst.op.effect.writes is not None)
    return stats


def test_eager_inplace_equals_functional_equals_ort_fast():
    """>= 100 generated graphs with in-place writes (some in control-flow bodies)."""
    stats = _three_way(range(0, 80))
    more = _three_way(range(1000, 1040), p_cf=0.2)
    checked = stats["checked"] + more["checked"]
    assert checked >= 100, (stats, more)
    assert stats["view_writes"] > 0 and more["body_writes"] > 0


@pytest.mark.slow
def test_eager_inplace_equals_functional_equals_ort_500():
    stats = _three_way(range(5000, 5460))
    more = _three_way(range(9000, 9160), p_cf=0.2)
    assert stats["checked"] + more["checked"] >= 500, (stats, more)
