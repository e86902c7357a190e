"""torch eager and ONNX Runtime (optimizations off and on) agree on generated graphs."""
from __future__ import annotations

import pytest

from campaign.artifacts import Materialized
from campaign.backends import make_backend
from campaign.oracle import compare
from campaign.reference import run_reference
from campaign.testcase import TestCase, random_values
from ir import generate
from ir.analysis.precision import output_precisions
from ir.numerics.input_search import make_valid


@pytest.fixture(scope="module")
def backends():
    import torch

    torch.set_num_threads(1)
    return [make_backend("ort_noopt"), make_backend("ort")]


def test_torch_and_ort_agree_on_generated_graphs(backends):
    valid = 0
    for seed in range(200):
        test = make_valid(generate(seed), seed)
        if test is None:
            continue
        g = test.graph
        m = Materialized(TestCase(str(seed), seed, g, test.search.values))
        m.onnx_model  # noqa: B018 the full ONNX checker passes
        ref = run_reference(m)
        assert ref.problem is None, (seed, ref.problem)  # the search and the reference agree
        valid += 1
        for b in backends:
            res = b.evaluate(m)
            assert not res.failed, (seed, b.name, res.error_msg)
            cmp = compare(ref.outputs, res.outputs, output_precisions(g))
            assert cmp.ok, (seed, b.name, cmp.message)
    assert valid >= 196  # >= 98% valid


def test_torch_module_matches_interpreter():
    import numpy as np
    import torch

    from ir.materialize.to_torch import GraphModule, torch_inputs

    g = generate(7)
    values = random_values(g, 7)
    mod = GraphModule(g, {p.name: values[p.name] for p in g.params})
    out = mod(*torch_inputs(g, values))
    ref = run_reference(Materialized(TestCase("t", 7, g, values)))
    assert len(out) == len(g.outputs)
    for a, b in zip(out, ref.outputs, strict=True):
        np.testing.assert_array_equal(a.numpy(), b)
    assert isinstance(out[0], torch.Tensor)
