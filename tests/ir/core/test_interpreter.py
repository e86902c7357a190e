"""The one interpreter (`ir.core.interpreter`): its hooks are called in order, bodies come back
through `run_body` as the op runs them, subclasses change what a hook does, and the torch
interpreters built on it (to_torch, the in-place plan) keep the frames Dynamo splits a
python-dialect program at."""
from __future__ import annotations

from functools import partial

import torch

from ir import parse, verify
from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import Fixes, Interpreter
from ir.core.op import lookup_op
from ir.materialize.to_torch import GraphModule, TorchInterpreter, evaluate_torch

IF = """graph main(%x0: f32[3], %x1: f32[]) {
  %v2 = reduce_sum[axis=0, keepdim=false](%x0) : f32[]
  %v3 = gt(%v2, %x1) : b8[]
  %v4 = if(%v3, %x0) : f32[3] {
    graph then(%t0: f32[3]) {
      %t1 = relu(%t0) : f32[3]
      return %t1
    }
    graph else(%e0: f32[3]) {
      %e1 = neg(%e0) : f32[3]
      return %e1
    }
  }
  %v5 = exp(%v4) : f32[3]
  return %v5
}
"""

LOOP = """graph main(%x0: f32[2], %x1: i64[]) {
  %v2 = loop(%x1, %x0) : f32[2] {
    graph body(%i3: i64[], %b4: f32[2]) {
      %b5 = tanh(%b4) : f32[2]
      return %b5
    }
  }
  return %v2
}
"""


class Recorder(Interpreter):
    """Logs every hook call as (hook, level, index)."""

    def __init__(self):
        super().__init__()
        self.log: list[tuple] = []

    def start(self, g, env):
        self.log.append(("start", g.name))
        return super().start(g, env)

    def before_inst(self, g, index, inst, args):
        self.log.append(("before_inst", g.name, index))

    def op_of(self, g, index, inst, values):
        self.log.append(("op_of", g.name, index))
        return inst.op

    def run_body(self, g, index, inst, body, args):
        self.log.append(("run_body", g.name, index, body.name))
        return super().run_body(g, index, inst, body, args)

    def after_call(self, g, index, inst, values):
        assert not any(r.name in values for r in inst.results)  # not bound yet
        self.log.append(("after_call", g.name, index))

    def on_result(self, g, index, inst, r, t, values):
        assert values[r.name] is t
        self.log.append(("on_result", g.name, index, r.name))


def _env(g: Graph, **arrays) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v) for k, v in arrays.items()}


def _inst(level: str, i: int, result: str) -> list[tuple]:
    """The hook calls of a plain instruction."""
    return [("before_inst", level, i), ("op_of", level, i), ("after_call", level, i),
            ("on_result", level, i, result)]


def test_hooks_are_called_in_order_and_the_taken_body_is_run_through_run_body():
    g = verify(parse(IF))
    rec = Recorder()
    values = rec.run(g, _env(g, x0=[1.0, -2.0, 3.0], x1=0.0))  # sum 2 > 0: then
    assert rec.log == [
        ("start", "main"), *_inst("main", 0, "v2"), *_inst("main", 1, "v3"),
        ("before_inst", "main", 2), ("op_of", "main", 2),
        ("run_body", "main", 2, "then"), ("start", "then"), *_inst("then", 0, "t1"),
        ("after_call", "main", 2), ("on_result", "main", 2, "v4"),
        *_inst("main", 3, "v5"),
    ]
    assert set(values) == {"x0", "x1", "v2", "v3", "v4", "v5"}  # this level's values only
    assert torch.allclose(values["v5"], torch.exp(torch.relu(torch.tensor([1.0, -2.0, 3.0]))))


def test_a_loop_body_is_run_once_per_trip_each_on_a_level_of_its_own():
    g = verify(parse(LOOP))
    rec = Recorder()
    values = rec.run(g, _env(g, x0=[0.5, -1.0], x1=3))
    assert [e for e in rec.log if e[0] == "run_body"] == [("run_body", "main", 0, "body")] * 3
    assert rec.log.count(("start", "body")) == 3
    want = torch.tensor([0.5, -1.0])
    for _ in range(3):
        want = torch.tanh(want)
    assert torch.allclose(values["v2"], want)
    assert "b5" not in values  # a body's values stay in the body


def test_zero_trips_run_no_body():
    g = verify(parse(LOOP))
    rec = Recorder()
    values = rec.run(g, _env(g, x0=[0.5, -1.0], x1=0))
    assert not [e for e in rec.log if e[0] in ("run_body", "start") and e[1] != "main"]
    assert torch.equal(values["v2"], torch.tensor([0.5, -1.0]))


class NegatedRelu(Interpreter):
    """An override of `op_of`: every relu runs as neg, bodies included."""

    def op_of(self, g, index, inst, values):
        return lookup_op("neg")() if inst.op.name == "relu" else inst.op


def test_an_op_of_override_reaches_into_bodies():
    g = verify(parse(IF))
    x0 = torch.tensor([1.0, -2.0, 3.0])
    out = NegatedRelu().run(g, {"x0": x0, "x1": torch.tensor(0.0)})["v5"]
    assert torch.allclose(out, torch.exp(-x0))


class Doubled(Interpreter):
    """An override of `on_result`: every result is bound doubled (the next instruction reads
    the doubled value)."""

    def on_result(self, g, index, inst, r, t, values):
        values[r.name] = t * 2


def test_an_on_result_override_rebinds_what_later_instructions_read():
    g = verify(parse(LOOP))
    out = Doubled().run(g, {"x0": torch.tensor([0.5, -1.0]), "x1": torch.tensor(2)})["v2"]
    want = torch.tensor([0.5, -1.0])
    for _ in range(2):
        want = torch.tanh(want) * 2  # the body's result, doubled in the body
    assert torch.allclose(out, want * 2)  # and the loop's result, doubled at the top


class Fixed(Interpreter):
    """`fixes`: inputs and results through builtin callables, a size derived from an input,
    read by `op_of`."""

    def fixes(self, g):
        if g.name != "main":
            return super().fixes(g)
        return Fixes(inputs={"x0": torch.Tensor.neg, "x9": torch.Tensor.neg},
                     derived={"#n": ("x0", partial(torch.Tensor.size, dim=0))},
                     results={"v2": partial(torch.Tensor.mul, other=3.0)})

    def op_of(self, g, index, inst, values):
        self.size = values.get("#n")
        return inst.op


def test_fixes_apply_to_given_inputs_at_the_start_and_to_results_as_they_are_bound():
    g = verify(parse(LOOP))
    x0 = torch.tensor([0.5, -1.0])
    fixed = Fixed()
    values = fixed.run(g, {"x0": x0, "x1": torch.tensor(1)})
    assert torch.allclose(values["x0"], -x0) and "x9" not in values  # only given inputs
    assert torch.allclose(values["v2"], torch.tanh(-x0) * 3.0)
    assert values["#n"] == 2 and fixed.size is None  # the body: no fixes of its own
    assert torch.equal(x0, torch.tensor([0.5, -1.0]))  # the caller's env is not written


def test_the_torch_interpreter_is_the_reference_evaluation():
    g = verify(parse(IF))
    env = _env(g, x0=[1.0, -2.0, 3.0], x1=5.0)  # sum 2 < 5: else
    seen: list[str] = []

    def result(inst: Inst, t: torch.Tensor) -> torch.Tensor:
        seen.append(inst.results[0].name)
        return t

    values = evaluate_torch(g, env, result=result)
    assert torch.allclose(values["v5"], torch.exp(-env["x0"]))
    assert seen == ["v2", "v3", "e1", "v4", "v5"]  # bodies included, in program order
    plain = TorchInterpreter().run(g, env)
    assert all(torch.equal(plain[k], values[k]) for k in values)


def test_a_result_hook_only_sees_tensors_and_can_replace_them():
    g = verify(parse(LOOP))
    env = _env(g, x0=[0.5, -1.0], x1=1)
    out = TorchInterpreter(result=lambda inst, t: t + 1).run(g, env)["v2"]
    assert torch.allclose(out, torch.tanh(env["x0"]) + 1 + 1)


#: the `if` comes first: its result is copied (it is written later, and torch may return a
#: body's input as it is); Dynamo skips a hook's code for good once a frame of it held no tensor
#: work, so a copy in a hook would become a graph only on the first instruction
INPLACE = """graph main(%x0: f32[4], %x1: b8[]) {
  %v2 = if(%x1, %x0) : f32[4] {
    graph then(%t0: f32[4]) {
      %t1 = relu(%t0) : f32[4]
      return %t1
    }
    graph else(%e0: f32[4]) {
      %e1 = exp(%e0) : f32[4]
      return %e1
    }
  }
  %v3 = view_slice[axis=0, start=0, end=2, step=1](%v2) : f32[2]
  %v4 = add_(%v3, %v3) : f32[2]
  %v5 = mul(%v2, %v2) : f32[4]
  return %v5
}
"""


def _compiled_graphs(module: torch.nn.Module, *inputs) -> list[list[str]]:
    """The calls of every graph Dynamo compiles for one call of `module`."""
    import torch._dynamo

    graphs: list[list[str]] = []

    def backend(gm, example_inputs):
        graphs.append([getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
                       if n.op in ("call_function", "call_method")])
        return gm.forward

    torch._dynamo.reset()
    try:
        out = torch.compile(module, backend=backend, fullgraph=False)(*inputs)
    finally:
        torch._dynamo.reset()
    return graphs, out


def test_a_python_dialect_break_in_the_loop_compiles_no_graph_for_the_plans_fixes():
    """The `if` graph-breaks inside the loop, so Dynamo runs the loop's frame eagerly and
    compiles each op's call on its own; the in-place plan's copies (`Fixes`: builtins) run
    eagerly there, as inline code did, instead of becoming graphs of their own."""
    g = verify(parse(INPLACE))
    module = GraphModule(g, {})
    assert module.plan is not None
    assert any(lv[0].results for lv in module.plan.fixes.values()), \
        "the test needs a graph whose plan copies a result"
    x0, x1 = torch.tensor([1.0, -2.0, 3.0, 0.5]), torch.tensor(True)
    graphs, (out,) = _compiled_graphs(module, x0, x1)
    assert graphs and ["clone"] not in graphs and ["contiguous"] not in graphs, graphs
    v2 = torch.relu(x0) * torch.tensor([2.0, 2.0, 1.0, 1.0])  # the slice doubled in place
    assert torch.allclose(out, v2 * v2)


def test_hooks_see_values_by_name_and_interpretation_does_not_touch_the_graph():
    g = verify(parse(LOOP))
    before = g
    Recorder().run(g, _env(g, x0=[0.5, -1.0], x1=2))
    assert g == before and isinstance(g.insts[0].results[0], Value)
