"""Torch program forms (ir/materialize/form.py): every form of a graph computes the reference
interpreter's outputs, in both control-flow dialects, and each form is really the program it
says (numbers reach ops as Python scalars, params are nn.Parameters, writes are gone)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from ir import parse
from ir.core.graph import Graph
from ir.core.text import load
from ir.materialize.form import FORM_VALUES, TorchForm, parse_label
from ir.materialize.to_torch import GraphModule, run_graph_torch

#: a loop whose counter feeds an int add (a number at operand 1) and a cast (a tensor), and
#: 0-d params at operand 1 (a number), at operand 0 and in `max` (0-d tensors), a 2-d param
#: a loop with a counter read in its body, 0-d params and params used after it
LOOP = load(Path(__file__).resolve().parents[2] / "data" / "form_loop.gir")

#: an `if` and a scan, a 0-d int param compared with a carried scalar
IF_SCAN = parse("""graph main(%x: f32[4,3], %p: b8[], %s: i32[], %t: param i32[]) {
  %y = if(%p, %x) : f32[4,3] {
    graph then(%a: f32[4,3]) {
      %b = relu(%a) : f32[4,3]
      return %b
    }
    graph else(%c: f32[4,3]) {
      %d = neg(%c) : f32[4,3]
      return %d
    }
  }
  %h, %ys = scan[num_carries=1, reverse=false](%x, %y) : f32[4,3], f32[4,4,3] {
    graph body(%e: f32[4,3], %r: f32[3]) {
      %g = add(%e, %r) : f32[4,3]
      %o = tanh(%g) : f32[4,3]
      return %o, %o
    }
  }
  %q = add(%s, %t) : i32[]
  %l = lt(%q, %t) : b8[]
  return %h, %ys, %q, %l
}""")

#: in-place writes through views and a written input, beside a 0-d param
INPLACE = parse("""graph main(%x0: f32[4,4], %y1: f32[4], %w: param f32[]) {
  %v2 = view_slice[axis=0, start=1, end=3, step=1](%x0) : f32[2,4]
  %v3 = add_(%v2, %y1) : f32[2,4]
  %v4 = view_diagonal[offset=0, dim1=0, dim2=1](%x0) : f32[4]
  %v5 = mul_(%v4, %y1) : f32[4]
  %v8 = mul(%x0, %w) : f32[4,4]
  %v9 = setitem[starts=[0], ends=[3], steps=[2]](%v8, %y1) : f32[4,4]
  return %x0, %v8, %v3
}""")

GRAPHS = {"loop": LOOP, "if_scan": IF_SCAN, "inplace": INPLACE}


def _values(g: Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for v in (*g.inputs, *g.params):
        shape = tuple(int(d) for d in v.type.shape)
        dt = v.type.dtype
        if dt.is_float:
            out[v.name] = rng.uniform(-2, 2, shape).astype(dt.numpy)
        elif dt.is_int:
            out[v.name] = rng.integers(0, 5, shape).astype(dt.numpy)
        else:
            out[v.name] = rng.random(shape) < 0.5
    return out


def _reference(g: Graph, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}
    return [t.numpy() for t in run_graph_torch(g, env)]


def _run(g: Graph, values: dict[str, np.ndarray], dialect: str, form: TorchForm) -> list:
    m = GraphModule(g, {p.name: values[p.name] for p in g.params}, dialect, form).eval()
    xs = [torch.from_numpy(np.array(values[v.name], copy=True)) for v in g.inputs]
    with torch.no_grad():
        return [o.numpy() for o in m(*xs)]


FORMS = [TorchForm(**{k: v}) for k, vs in FORM_VALUES.items() for v in vs[1:]] + [
    TorchForm(scalars="number", params="parameter", inplace="functional")]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.label("form"))
@pytest.mark.parametrize("dialect", ["hop", "python"])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_form_computes_the_interpreters_outputs(name, dialect, form):
    g = GRAPHS[name]
    for seed in range(3):
        values = _values(g, seed)
        if name == "loop":
            values["n"] = np.asarray(seed + 1, np.int64)  # 1..3 trips
        want = _reference(g, values)
        got = _run(g, values, dialect, form)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


class _Calls(TorchFunctionMode):
    """Records the outermost torch calls and their positional arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append((getattr(func, "__name__", str(func)), args))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dialect", ["hop", "python"])
def test_the_number_form_passes_the_counter_and_scalar_params_as_python_numbers(
        dialect, monkeypatch):
    carried: list = []
    while_loop = torch.while_loop

    def spy(cond_fn, body_fn, carried_inputs):
        carried.append(carried_inputs)
        return while_loop(cond_fn, body_fn, carried_inputs)

    monkeypatch.setattr(torch, "while_loop", spy)
    values = _values(LOOP, 0)
    values["n"] = np.asarray(2, np.int64)
    m = GraphModule(LOOP, {p.name: values[p.name] for p in LOOP.params}, dialect,
                    TorchForm(scalars="number"))
    assert m.params_of.numbers == {"w": float(values["w"])}
    assert [n for n, _ in m.named_buffers()] == ["p_m"]
    xs = [torch.from_numpy(values[v.name]) for v in LOOP.inputs]
    with _Calls() as rec, torch.no_grad():
        m(*xs)
    adds = [args for name, args in rec.calls if name == "add"]
    if dialect == "python":  # the counter reaches the int add as an int
        assert any(type(a[1]) is int for a in adds), adds
    else:  # the counter is an int carried by while_loop (its body is traced, not recorded)
        assert [type(c[0]) for c in carried] == [int] and carried[0][0] == 0
    # the 0-d param reaches the float add as a float
    assert any(type(a[1]) is float and a[1] == float(values["w"]) for a in adds), adds
    # where a tensor is needed (cast, operand 0 of sub, max): a 0-d tensor of its dtype
    made = {type(args[0]) for name, args in rec.calls if name == "scalar_tensor"}
    assert made == ({int, float} if dialect == "python" else {float})


def test_the_parameter_form_registers_parameters_without_grad():
    values = _values(LOOP, 0)
    m = GraphModule(LOOP, {p.name: values[p.name] for p in LOOP.params}, "hop",
                    TorchForm(params="parameter"))
    params = dict(m.named_parameters())
    assert sorted(params) == ["p_m", "p_w"] and not list(m.named_buffers())
    assert all(isinstance(p, torch.nn.Parameter) and not p.requires_grad
               for p in params.values())


def test_the_functional_form_has_no_writes_and_leaves_the_inputs_alone():
    from ir.analysis.inplace import has_writes

    values = _values(INPLACE, 0)
    params = {"w": values["w"]}
    m = GraphModule(INPLACE, params, "python", TorchForm(inplace="functional"))
    assert has_writes(INPLACE) and not has_writes(m.graph)
    x = torch.from_numpy(np.array(values["x0"], copy=True))
    m(x, torch.from_numpy(values["y1"]))
    np.testing.assert_array_equal(x.numpy(), values["x0"])  # the written form writes it
    written = GraphModule(INPLACE, params, "python")
    written(x, torch.from_numpy(values["y1"]))
    assert not np.array_equal(x.numpy(), values["x0"])


def test_labels_name_the_changed_fields_and_parse_back():
    assert TorchForm().label("hop") == "hop"
    f = TorchForm(scalars="number", inplace="functional")
    assert f.label("python") == "python+inplace=functional+scalars=number"
    assert parse_label(f.label("python")) == ("python", f)
    assert parse_label("hop") == ("hop", TorchForm())


def test_a_bad_form_is_refused_with_its_values():
    with pytest.raises(ValueError) as e:
        TorchForm(params="weights")
    assert str(e.value) == "torch form: params must be one of buffer, parameter, got 'weights'"
    with pytest.raises(ValueError) as e:
        parse_label("hop+scalars")
    assert str(e.value) == "torch form label 'hop+scalars': bad part 'scalars'"


def test_each_number_operand_op_takes_a_python_number_with_the_tensors_result():
    """`Op.number_operand`: for every op that declares one, torch's function on (tensor,
    number) equals it on (tensor, 0-d tensor), for each dtype the op takes."""
    from ir.ops import OP_REGISTRY

    checked = 0
    for op_cls in OP_REGISTRY.values():
        if op_cls.number_operand is None:
            continue
        op = op_cls()
        for sig_in, _ in op_cls.signatures(2):
            dt = sig_in[0]
            x = torch.tensor([1, 2, 3]).to(dt.torch) if not dt.is_float else \
                torch.tensor([0.5, 1.25, 3.0], dtype=dt.torch)
            y = torch.tensor(2 if not dt.is_float else 1.5, dtype=dt.torch)
            if dt.name == "bool":
                x, y = torch.tensor([True, False, True]), torch.tensor(True)
            want = op.torch(x, y)
            got = op.torch(x, y.item())
            assert got.dtype == want.dtype and torch.equal(got, want), (op_cls.name, dt)
            checked += 1
    assert checked >= 30
