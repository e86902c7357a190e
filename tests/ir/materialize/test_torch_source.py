"""ir.materialize.torch_source prints in-place writes that are statements (`setitem`: `x[i] = y`, which returns
nothing), refuses any other effect-only call rather than dropping it, and checks the code it
prints against the interpreter (outputs and written inputs) before a reproducer uses it."""
from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.materialize import torch_source as source_module
from ir.materialize.torch_source import CodegenError, check_source, example_values, torch_source
from ir.ops.inplace import SetItem

#: the reduced graph of bucket aot_eager-mismatch-f2326addbe (a cpu_train campaign): its repro
#: printed `v4 = x0` for the setitem, a program without the write
REDUCED = """graph main(%x0: f32[1], %x4: f32[], %x17: f32[]) {
  %v15 = fill_[value=2.0](%x4) : f32[]
  %v4 = setitem[starts=[0], ends=[1], steps=[0]](%x0, %x17) : f32[1]
  %v5 = cos(%x0) : f32[1]
  return %v5, %x0, %v15, %x4
}"""

#: slices and an integer index on two axes, a broadcast source
SLICED = """graph main(%x0: f32[4,3], %y1: f32[], %z2: f32[2,3]) {
  %v3 = setitem[starts=[1, 2], ends=[3, 3], steps=[1, 0]](%x0, %y1) : f32[4,3]
  %v4 = setitem[starts=[0], ends=[4], steps=[2]](%x0, %z2) : f32[4,3]
  %v5 = mul(%x0, %x0) : f32[4,3]
  return %x0, %v5
}"""


def _values(g) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {v.name: rng.uniform(-2, 2, tuple(int(d) for d in v.type.shape))
            .astype(v.type.dtype.numpy) for v in g.inputs}


@pytest.mark.parametrize("dialect", ["python", "hop"])
def test_setitem_is_printed_as_an_indexed_assignment(dialect):
    g = ir.verify(ir.parse(REDUCED))
    src = torch_source(g, dialect)
    assert "x0[0,] = x17" in src and "_t1 = x4.fill_(_f_v15_value)" in src, src
    assert "\n_f_v15_value = 2.0\n" in src, src  # read from a global, as the module reads it
    assert check_source(src, g, _values(g)) is None, src
    g = ir.verify(ir.parse(SLICED))
    src = torch_source(g, dialect)
    assert "x0[1:3:1, 2] = y1" in src and "x0[0:4:2,] = z2" in src, src
    assert check_source(src, g, _values(g)) is None, src


def test_check_source_catches_a_dropped_write():
    g = ir.verify(ir.parse(REDUCED))
    src = torch_source(g, "hop")
    dropped = src.replace("        x0[0,] = x17\n", "")
    assert dropped != src
    assert check_source(dropped, g, _values(g)) == "output 0: values differ"
    # on its own example values too: torch_source runs this check before it returns
    assert check_source(dropped, g, example_values(g)) is not None


def test_check_source_compares_the_inputs_a_module_writes():
    g = ir.verify(ir.parse(REDUCED))
    src = torch_source(g, "python")
    # the same outputs, computed without writing the caller's x4
    forked = src.replace("_t1 = x4.fill_(_f_v15_value)",
                         "x4 = x4.clone(); _t1 = x4.fill_(_f_v15_value)")
    assert forked != src
    assert check_source(forked, g, _values(g)) == "input %x4 (after the run): values differ"


def test_torch_source_refuses_code_that_computes_something_else(monkeypatch):
    g = ir.verify(ir.parse(REDUCED))
    real = source_module._source
    monkeypatch.setattr(source_module, "_source", lambda *a: real(*a).replace("x0[0,] = x17", "pass"))
    with pytest.raises(CodegenError, match="output 0: values differ"):
        torch_source(g, "python")
    assert "pass" in torch_source(g, "python", verify=False)


def _write(x, y):
    """A torch-function-aware call that writes `x` and returns nothing (as `__setitem__`)."""
    from torch.overrides import handle_torch_function, has_torch_function

    if has_torch_function((x, y)):
        return handle_torch_function(_write, (x, y), x, y)
    x.copy_(y)
    return None


def test_an_effect_only_call_is_refused_not_dropped(monkeypatch):
    def setitem_by_call(self, x, y):
        _write(x[0], y)
        return x

    monkeypatch.setattr(SetItem, "torch", setitem_by_call)
    g = ir.verify(ir.parse(REDUCED))
    with pytest.raises(CodegenError, match="returns nothing"):
        torch_source(g, "python")


#: a float the module reads (batch_norm's epsilon, ir.ops.norm.EPS) used inside a cond branch
#: and outside it, an op attribute (leaky_relu's alpha) and int() of one (clip on an int
#: tensor): issue 30's leads L4/L5, docs/findings F44 and F40
FLOATS = """graph main(%p: f32[], %t: f32[], %x: f32[2,3], %k: i64[3], %s: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) {
  %c = gt(%p, %t) : b8[]
  %n1 = if(%c, %x, %s, %b, %m, %v) : f32[2,3] {
    graph then(%b4: f32[2,3], %b5: f32[3], %b6: f32[3], %b7: f32[3], %b8: f32[3]) {
      %v9 = batch_norm(%b4, %b5, %b6, %b7, %b8) : f32[2,3]
      return %v9
    }
    graph else(%b10: f32[2,3], %b11: f32[3], %b12: f32[3], %b13: f32[3], %b14: f32[3]) {
      return %b10
    }
  }
  %n2 = batch_norm(%x, %s, %b, %m, %v) : f32[2,3]
  %l = leaky_relu[alpha=0.25](%n2) : f32[2,3]
  %y = add(%n1, %l) : f32[2,3]
  %q = clip[lo=-3.0, hi=2.0](%k) : i64[3]
  return %y, %q
}"""


def test_floats_the_module_reads_are_read_from_globals_not_printed_as_literals():
    g = ir.verify(ir.parse(FLOATS))
    src = torch_source(g, "hop")
    # one global per source the module reads: ir.ops.norm.EPS once, each op attribute
    assert "\n_f_EPS = 1e-05\n_f_l_alpha = 0.25\n_f_q_lo = -3.0\n_f_q_hi = 2.0\n" in src, src
    forward = src[src.index("def forward"):]
    assert forward.count("_f_EPS") == 2 and "1e-05" not in forward, src
    assert "_f_l_alpha" in forward and "0.25" not in forward, src
    assert "int(_f_q_lo), int(_f_q_hi)" in forward, src
    assert check_source(src, g, example_values(g)) is None
    # the recording leaves the ops' modules as they were
    from ir.ops import elementwise, norm

    assert type(norm.EPS) is float and "int" not in vars(norm) and "int" not in vars(elementwise)


def _values_of(g) -> dict[str, np.ndarray]:
    vals = example_values(g)
    vals["p"] = np.array(2.0, dtype=np.float32)  # the branch with the batch norm
    return vals


def _compiled(module, inputs, backend):
    """(error class or None, each captured graph's placeholders: what Dynamo made an input,
    in sorted order: the two programs read them in another order)."""
    import torch

    graphs: list = []

    def capture(gm, example_inputs):
        graphs.append(sorted(type(x).__name__ if not isinstance(x, torch.Tensor)
                             else f"{x.dtype}[{x.dim()}]" for x in example_inputs))
        return gm.forward

    torch._dynamo.reset()
    try:
        torch.compile(module, backend=backend or capture, fullgraph=True, dynamic=True)(*inputs)
        return None, graphs
    except Exception as e:
        return type(e).__name__, graphs
    finally:
        torch._dynamo.reset()


def _both(text: str, backend=None):
    import torch

    from ir.materialize.to_torch import GraphModule

    g = ir.verify(ir.parse(text))
    vals = _values_of(g)
    inputs = [torch.from_numpy(vals[v.name]) for v in g.inputs]
    ns: dict = {}
    exec(compile(torch_source(g, "hop"), "<generated>", "exec"), ns)
    campaign = _compiled(GraphModule(g, {}, dialect="hop"), inputs, backend)
    repro = _compiled(ns["Model"]({}), inputs, backend)
    return campaign, repro


def test_the_printed_program_compiles_as_the_module_the_campaign_compiles():
    """Under torch.compile(dynamic=True) Dynamo captures the same graph inputs from the printed
    program as from the campaign's module (a dynamic float is a float64 0-d input): with the
    floats printed as literals it captured none of them, and F40/F44 did not reproduce."""
    one_side = FLOATS.replace("%v9 = batch_norm(%b4, %b5, %b6, %b7, %b8)",
                              "%v9 = leaky_relu[alpha=0.5](%b4)")  # EPS outside only: no F44
    campaign, repro = _both(one_side)
    assert campaign[0] is None and campaign == repro, (campaign, repro)
    # EPS, both alphas, clip's bounds
    assert sum(p == "torch.float64[0]" for p in campaign[1][0]) == 5, campaign


def test_a_float_used_in_a_cond_branch_and_outside_fails_alike_in_both(tmp_path):
    """docs/findings F44 (issue 30's L4): EPS read in the branch and outside. Whatever Dynamo
    does with it (torch 2.13 fails), the printed program does the same as the module."""
    (campaign_error, _), (repro_error, _) = _both(FLOATS, backend="eager")
    assert campaign_error == repro_error, (campaign_error, repro_error)


#: `split3` returns torch views of its operand, which a later write through a view of that
#: operand would change: the torch module's plan (`ir.analysis.inplace.TorchPlan`) copies such
#: results; the printed program did not, so it computed something else and the bucket got no
#: repro.py ("CodegenError: ... output 1: values differ", an onnx_export bucket of the tour)
ALIASED = """graph main(%x: f32[3,6], %y: f32[6,3]) {
  %a = sign(%x) : f32[3,6]
  %s0, %s1, %s2 = split3[axis=0, sizes=[1,1,1]](%a) : f32[1,6], f32[1,6], f32[1,6]
  %p = view_permute[perm=[1,0]](%a) : f32[6,3]
  %w = mul_(%p, %y) : f32[6,3]
  return %s1, %w
}"""


@pytest.mark.parametrize("dialect", ["python", "hop"])
def test_the_copies_the_modules_plan_makes_are_printed(dialect):
    g = ir.verify(ir.parse(ALIASED))
    src = torch_source(g, dialect)  # checked against the interpreter: raised before
    assert "s1 = _t2[1].clone(memory_format=torch.contiguous_format)" in src, src
    assert check_source(src, g, _values(g)) is None


#: an in-place op on a graph input, its result returned beside the input: the op's code
#: (`getattr(x, "sigmoid_")(); return x`) goes on with its receiver, so Dynamo returns the input
#: from the frame and the graph has no output for it; printed as `v0 = _t2` (the call's
#: result, a graph node) the program compiled otherwise, and aot_eager's lost input write
#: (bucket aot_eager-mismatch-6a8ce7b1ae of a cpu_dynamic run) did not reproduce
RECEIVER = """graph main(%x0: f64[2,4], %x12: f64[]) {
  %v16 = round(%x0) : f64[2,4]
  %v0 = sigmoid_(%x12) : f64[]
  return %v16, %v0, %x12
}"""


def test_an_in_place_ops_result_is_the_variable_the_op_returns():
    import torch

    from ir.materialize.to_torch import GraphModule

    g = ir.verify(ir.parse(RECEIVER))
    src = torch_source(g, "hop")
    assert "x12.sigmoid_()" in src and "v0 = x12\n" in src, src
    ns: dict = {}
    exec(compile(src, "<generated>", "exec"), ns)
    shapes = []
    for module in (GraphModule(g, {}, dialect="hop"), ns["Model"]({})):
        def capture(gm, example_inputs):
            out = next(n for n in gm.graph.nodes if n.op == "output")
            shapes.append(len(out.args[0]))  # noqa: B023 (called at once)
            return gm.forward

        torch._dynamo.reset()
        xs = [torch.rand(2, 4, dtype=torch.float64), torch.rand((), dtype=torch.float64)]
        torch.compile(module, backend=capture, fullgraph=True)(*xs)
        torch._dynamo.reset()
    assert shapes[0] == shapes[1] == 1, shapes  # round's result only: x12 leaves the frame as is
