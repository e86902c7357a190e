"""The torch program forms in the reproducers: torchgen prints each form (ir/materialize/form.py)
as code that computes what the interpreter computes, and repro.py rebuilds the form of the
backend spec it replays."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from campaign.triage.pipeline.repro_source import repro_source, repro_spec_of
from ir import parse
from ir.core.text import load
from ir.materialize.form import TorchForm
from ir.materialize.torch_source import check_source, torch_source

#: a loop with a counter read in its body, 0-d params and params used after it
LOOP = load(Path(__file__).resolve().parents[1] / "data" / "form_loop.gir")

INPLACE = parse("""graph main(%x0: f32[4,4], %y1: f32[4]) {
  %v2 = view_slice[axis=0, start=1, end=3, step=1](%x0) : f32[2,4]
  %v3 = add_(%v2, %y1) : f32[2,4]
  %v8 = mul(%x0, %x0) : f32[4,4]
  return %x0, %v8
}""")


def _values(g) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for v in (*g.inputs, *g.params):
        shape = tuple(int(d) for d in v.type.shape)
        out[v.name] = (rng.uniform(-2, 2, shape).astype(v.type.dtype.numpy)
                       if v.type.dtype.is_float else np.full(shape, 2, v.type.dtype.numpy))
    return out


FORMS = [TorchForm(), TorchForm(scalars="number"), TorchForm(params="parameter"),
         TorchForm(scalars="number", params="parameter")]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.label("form"))
@pytest.mark.parametrize("dialect", ["python", "hop"])
def test_each_form_is_printed_as_code_that_computes_the_interpreters_outputs(dialect, form):
    src = torch_source(LOOP, dialect, form)
    assert check_source(src, LOOP, _values(LOOP)) is None, src
    assert f"({form.label(dialect)}: control flow and form)" in src
    assert ("register_parameter" in src) == (form.params == "parameter")
    assert ("register_buffer" in src) == (form.params == "buffer")
    if form.numbers:
        assert "setattr(self, f\"p_{name}\", value.item())" in src and "['w']" in src
        assert "torch.tensor(_i" not in src and "torch.scalar_tensor(" in src
        if dialect == "hop":  # the counter: an int carried by while_loop (the trip is %n)
            assert ", (0, n.clone(), *_fresh((x, k))))" in src
    else:
        assert "torch.scalar_tensor(" not in src
        if dialect == "hop":
            assert ", (torch.zeros((), dtype=torch.int64), n.clone(), *_fresh((x, k))))" in src


def test_the_functional_form_prints_the_graph_without_its_writes():
    written = torch_source(INPLACE, "python")
    functional = torch_source(INPLACE, "python", TorchForm(inplace="functional"))
    assert ".add_(" in written and ".add_(" not in functional
    assert check_source(functional, INPLACE, _values(INPLACE)) is None, functional


@pytest.mark.parametrize("spec", ["inductor?scalars=number&params=parameter",
                                  "onnx_export?inplace=functional", "tvm_torch?params=parameter"])
def test_repro_rebuilds_the_specs_form(spec):
    how = repro_spec_of(spec)
    form = how.form
    assert form == TorchForm(**dict(kv.split("=") for kv in spec.split("?")[1].split("&")))
    src = repro_source(how, LOOP, {"verdict": "crash", "stage": "compile"},
                       [(1e-5, 1e-6)] * len(LOOP.outputs), "header")
    assert f"(hop{'+' if form.changes() else ''}" in src
    assert ("register_parameter" in src) == (form.params == "parameter")
    assert ("value.item()" in src) == form.numbers


def test_the_reducer_shrinks_a_form_option_to_the_one_the_failure_needs(tmp_path):
    """A compiler that fails only on weights as nn.Parameters (`buggy_backends:BuggyInForm`),
    run on tests drawn in several forms at once: the triage's reducer keeps `params=parameter`
    and puts the other form options back, and without it the reduced test passes."""
    from test_triage import _case, campaign_dir

    from campaign.backends import make_backend
    from campaign.backends.configs import config_text, parse_config
    from campaign.triage.pipeline.reduction import BackendRunner, load_finding, reduce_finding
    from ir import print_graph

    spec = "buggy_backends:BuggyInForm"
    b = make_backend(spec)
    b.sample_configs = 1.0
    seed = next(s for s in range(1000) if (c := b.config_of(s, LOOP)).get("params") ==
                "parameter" and len(c) >= 2)
    drawn = b.config_of(seed, LOOP)
    out = campaign_dir(tmp_path / "run", [spec], [_case("run-000000", seed, print_graph(LOOP))],
                       configs={spec: 1.0})
    case = load_finding(next(p.parent for p in (out / "findings").glob("*/*/*/info.json")))
    assert parse_config(case.config) == drawn and case.verdict == "crash"
    runner = BackendRunner(spec, timeout_s=30)
    try:
        red = reduce_finding(case, runner, max_tests=100)
        assert red.status == "reduced" and red.config == "params=parameter", red.summary
        assert red.graph.params  # the failure needs a weight
        row, _, _ = runner.run("again", seed, red.graph, red.values, red.extra_sets)
        assert row["verdict"] == "pass"
    finally:
        runner.close()
    assert red.summary["config"]["original"] == config_text(drawn)
