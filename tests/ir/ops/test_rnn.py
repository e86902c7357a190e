"""The recurrent layers (`lstm`, `gru`, `rnn`): generated instances agree with ONNX Runtime, the
gate-order mapping is proven against torch.nn.LSTM/GRU/RNN (ONNX Runtime and the torch
materializer both match the modules once their weights are converted gate by gate), TVM reports
the ops unsupported, and Inductor and the torch.onnx exporter compile them."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from opcheck import check_against, op_graphs

from campaign.artifacts import Materialized
from campaign.backends import make_backend
from campaign.oracle import judge
from campaign.reference import run_reference
from campaign.testcase import TestCase
from campaign.verdict import Stage, Verdict
from ir import parse, print_graph, verify
from ir.analysis.precision import output_precisions, output_tolerances
from ir.core.verify import VerifyError
from ir.materialize.to_torch import run_graph_torch
from ir.numerics.values import random_values

RNN_OPS = ("lstm", "gru", "rnn")

#: gate blocks in order, named by torch's letters (ONNX's LSTM `c` is torch's `g`, the cell
#: candidate; ONNX's GRU `h` is torch's `n`, the hidden candidate)
TORCH_GATES = {"lstm": "ifgo", "gru": "rzn", "rnn": "n"}
ONNX_GATES = {"lstm": "iofg", "gru": "zrn", "rnn": "n"}
MODULES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}

SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6


@pytest.fixture(scope="module")
def ort_noopt():
    torch.set_num_threads(1)
    return make_backend("ort_noopt")


# ---- generated instances --------------------------------------------------------------------


@pytest.mark.parametrize("name", RNN_OPS)
def test_generated_instances_agree_with_ort(name, ort_noopt):
    """Chains of up to three instructions (states and sequences feed later ones), every
    direction, arity and dtype, larger than the per-op sweep's (hidden > 1 for lstm/gru)."""
    graphs = op_graphs(name, 12, nodes=3, max_elems=1024)
    seen = set()
    for seed, g in enumerate(graphs):
        text = print_graph(g)
        assert parse(text) == g
        for inst in g.insts:
            op = inst.op
            seen |= {op.direction, len(inst.args), g.types()[inst.args[0]].dtype.short,
                     getattr(op, "nonlinearity", "tanh"), "hidden>1" if op.hidden > 1 else "hidden=1"}
        outcome = check_against(g, seed, ort_noopt)
        assert outcome.valid, text
        assert outcome.agrees, f"{outcome.message}\n{text}"
    expected = {"forward", "reverse", "bidirectional", 4, 5, "f16", "f32", "tanh", "hidden>1"}
    expected |= {6} if name == "lstm" else {"relu"} if name == "rnn" else set()
    assert expected <= seen, sorted(map(str, expected - seen))


def test_verifier_ties_weights_and_states_to_hidden_and_directions():
    ok = """graph main(%x0: f32[5,3,4], %x1: f32[2,3,2],
    %w1: param f32[2,8,4], %w2: param f32[2,8,2], %w3: param f32[2,16]) {
  %v4, %v5, %v6 = lstm[hidden=2, direction=bidirectional](%x0, %w1, %w2, %w3, %x1)
    : f32[5,3,4], f32[2,3,2], f32[2,3,2]
  return %v4, %v5, %v6
}"""
    g = verify(parse(ok))
    assert parse(print_graph(g)) == g
    assert "lstm[hidden=2, direction=bidirectional]" in print_graph(g)
    for good, bad in [
        ("%w1: param f32[2,8,4]", "%w1: param f32[2,6,4]"),  # W rows != gates * hidden
        ("%w3: param f32[2,16]", "%w3: param f32[2,8]"),  # B holds both biases
        ("%x1: f32[2,3,2]", "%x1: f32[1,3,2]"),  # h0 needs one state per direction
        ("direction=bidirectional", "direction=sideways"),
    ]:
        with pytest.raises(VerifyError, match="constraint violated"):
            verify(parse(ok.replace(good, bad)))


# ---- the gate mapping, proven against torch.nn modules ---------------------------------------


def _to_onnx_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    """A torch weight/bias (gate blocks along dim 0 in torch's order) in ONNX's gate order."""
    blocks = dict(zip(TORCH_GATES[name], t.split(HIDDEN), strict=True))
    return torch.cat([blocks[g] for g in ONNX_GATES[name]])


def _module_case(name: str, direction: str, nonlinearity: str, states: int):
    """(IR graph, values, expected outputs) from a torch.nn module with random weights.
    `reverse` is checked against the reverse half of a bidirectional module."""
    torch.manual_seed(0)
    kw = {"nonlinearity": nonlinearity} if name == "rnn" else {}
    module = MODULES[name](INPUT, HIDDEN, bidirectional=direction != "forward", **kw).double()
    nd = 2 if direction == "bidirectional" else 1
    sfx = [""] if direction == "forward" else ["_reverse"] if direction == "reverse" else ["", "_reverse"]

    def stack(kind):
        return torch.stack([_to_onnx_rows(getattr(module, f"{kind}_l0{s}"), name) for s in sfx])

    gates = len(TORCH_GATES[name])
    values = {"x": torch.rand(SEQ, BATCH, INPUT, dtype=torch.float64) * 4 - 2,
              "w": stack("weight_ih"), "r": stack("weight_hh"),
              "b": torch.cat([stack("bias_ih"), stack("bias_hh")], 1)}
    module_states = []
    for s in ("h0", "c0")[:states]:
        values[s] = torch.rand(nd, BATCH, HIDDEN, dtype=torch.float64) * 2 - 1
        # a bidirectional module run for `reverse` gets zeros for its unused forward direction
        module_states.append(values[s] if direction != "reverse"
                             else torch.cat([torch.zeros_like(values[s]), values[s]]))
    if name == "lstm" and states == 1:
        module_states.append(torch.zeros_like(module_states[0]))
    with torch.no_grad():
        if not module_states:
            y, hn = module(values["x"])
        else:
            y, hn = module(values["x"], tuple(module_states) if name == "lstm" else module_states[0])
    finals = list(hn) if name == "lstm" else [hn]
    if direction == "reverse":
        y, finals = y[..., HIDDEN:], [f[1:] for f in finals]
    expected = [y, *finals]

    values = {k: v.detach().to(torch.float32).numpy() for k, v in values.items()}
    states_in = [f"%{s}" for s in ("h0", "c0")[:states]]
    state_t = f"f32[{nd},{BATCH},{HIDDEN}]"
    params = [f"%w: param f32[{nd},{gates * HIDDEN},{INPUT}]",
              f"%r: param f32[{nd},{gates * HIDDEN},{HIDDEN}]",
              f"%b: param f32[{nd},{2 * gates * HIDDEN}]"]
    header = [f"%x: f32[{SEQ},{BATCH},{INPUT}]"] + [f"{s}: {state_t}" for s in states_in] + params
    attrs = f"hidden={HIDDEN}, direction={direction}"
    attrs += f", nonlinearity={nonlinearity}" if name == "rnn" else ""
    results = ", ".join(["%y", "%yh", "%yc"][:len(expected)])
    types = ", ".join([f"f32[{SEQ},{BATCH},{nd * HIDDEN}]"] + [state_t] * (len(expected) - 1))
    text = (f"graph main({', '.join(header)}) {{\n"
            f"  {results} = {name}[{attrs}](%x, %w, %r, %b{''.join(', ' + s for s in states_in)})"
            f" : {types}\n"
            f"  return {results}\n}}")
    return verify(parse(text)), values, [e.numpy() for e in expected]


MODULE_CASES = [("lstm", d, "tanh", s) for d in ("forward", "reverse", "bidirectional") for s in (0, 1, 2)]
MODULE_CASES += [("gru", d, "tanh", s) for d in ("forward", "reverse", "bidirectional") for s in (0, 1)]
MODULE_CASES += [("rnn", d, nl, s) for d in ("forward", "reverse", "bidirectional")
                 for nl in ("tanh", "relu") for s in (0, 1)]


@pytest.mark.parametrize("name,direction,nonlinearity,states", MODULE_CASES)
def test_torch_and_onnx_match_torch_nn_modules(name, direction, nonlinearity, states, ort_noopt):
    g, values, expected = _module_case(name, direction, nonlinearity, states)
    env = {k: torch.from_numpy(v) for k, v in values.items()}
    with torch.no_grad():
        ours = [t.numpy() for t in run_graph_torch(g, env)]
    m = Materialized(TestCase("nn", 0, g, values))
    ort = ort_noopt.evaluate(m)
    assert not ort.failed, ort.error_msg
    for got in (ours, ort.outputs):
        assert len(got) == len(expected)
        for e, a in zip(expected, got, strict=True):
            assert a.shape == e.shape and a.dtype == np.float32
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


# ---- backends --------------------------------------------------------------------------------

#: every op and direction in one graph: layers stack (Y feeds X), final states feed initial ones
CHAIN = """graph main(%x0: f32[6,2,3], %x1: f32[2,2,4],
    %w1: param f32[2,16,3], %w2: param f32[2,16,4], %w3: param f32[2,32],
    %w7: param f32[1,9,8], %w8: param f32[1,9,3], %w9: param f32[1,18],
    %w12: param f32[1,5,3], %w13: param f32[1,5,5], %w14: param f32[1,10],
    %w17: param f32[2,5,5], %w18: param f32[2,5,5], %w19: param f32[2,10]) {
  %v4, %v5, %v6 = lstm[hidden=4, direction=bidirectional](%x0, %w1, %w2, %w3, %x1, %x1)
    : f32[6,2,8], f32[2,2,4], f32[2,2,4]
  %v10, %v11 = gru[hidden=3, direction=reverse](%v4, %w7, %w8, %w9) : f32[6,2,3], f32[1,2,3]
  %v15, %v16 = rnn[hidden=5, direction=forward, nonlinearity=relu](%v10, %w12, %w13, %w14)
    : f32[6,2,5], f32[1,2,5]
  %v20, %v21 = rnn[hidden=5, direction=bidirectional, nonlinearity=tanh](%v15, %w17, %w18, %w19)
    : f32[6,2,10], f32[2,2,5]
  return %v6, %v11, %v16, %v20, %v21
}"""


def _chain_case() -> Materialized:
    g = verify(parse(CHAIN))
    return Materialized(TestCase("chain", 0, g, random_values(g, 0)))


def test_tvm_reports_each_rnn_op_unsupported():
    pytest.importorskip("tvm")
    for name in RNN_OPS:
        g = op_graphs(name, 1, nodes=1)[0]
        r = make_backend("tvm").evaluate(Materialized(TestCase(name, 0, g, random_values(g, 0))))
        assert (r.verdict, r.stage) == (Verdict.UNSUPPORTED, Stage.IMPORT), r.error_msg
        assert f"not supported for frontend ONNX: {name.upper()}" in r.error_msg


@pytest.mark.parametrize("spec", ["ort", "ort_noopt"])
def test_ort_runs_the_chain(spec):
    m = _chain_case()
    r = make_backend(spec).evaluate(m)
    assert not r.failed, r.error_msg
    ref = run_reference(m)
    assert ref.problem is None
    g = m.tc.graph
    assert judge(ref.outputs, r.outputs, output_tolerances(g), output_precisions(g)).verdict is Verdict.PASS


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["inductor", "onnx_export"])
def test_compilers_run_the_chain(spec):
    """Inductor (LSTM becomes oneDNN's mkldnn_rnn_layer, GRU/RNN are unrolled) and the
    torch.onnx exporter (ONNX LSTM/GRU nodes; RNN unrolled) compile the torch materializer."""
    if spec == "onnx_export":
        pytest.importorskip("onnxscript")
    m = _chain_case()
    r = make_backend(spec).evaluate(m)
    assert not r.failed, r.error_msg
    ref = run_reference(m)
    g = m.tc.graph
    assert judge(ref.outputs, r.outputs, output_tolerances(g), output_precisions(g)).verdict is Verdict.PASS
