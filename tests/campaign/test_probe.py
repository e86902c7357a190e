"""The support probe finds exactly the signatures a backend cannot compile, alone or in context."""
from __future__ import annotations

import numpy as np
import pytest

from campaign import probe as probe_mod
from campaign.backends.base import BACKENDS, Backend, StageFailed
from campaign.verdict import Stage
from ir.gen.builder import GenConfig, signature_key
from ir.gen.generate import generate


class RefusesF64Softmax(Backend):
    """A backend double that cannot compile float64 softmax, and another op only when fused
    after a neighbour (like NNSmith's Erf float16 case)."""

    name = "refuses_f64_softmax"
    version = "test-1"

    def _evaluate(self, m, result):
        insts = m.tc.graph.insts
        for i, inst in enumerate(insts):
            dtypes = {m.tc.graph.types()[a].dtype.short for a in inst.args}
            if inst.op.name == "softmax" and dtypes == {"f64"}:
                raise StageFailed(Stage.COMPILE, NotImplementedError("no f64 softmax kernel"))
            if inst.op.name == "sigmoid" and dtypes == {"f32"} and i > 0:
                raise StageFailed(Stage.COMPILE, NotImplementedError("fused sigmoid f32 failed"))
        return [np.zeros(1)]


@pytest.fixture
def refusing_backend(tmp_path, monkeypatch):
    monkeypatch.setattr(probe_mod, "CACHE_DIR", tmp_path)
    BACKENDS[RefusesF64Softmax.name] = RefusesF64Softmax
    yield RefusesF64Softmax.name
    del BACKENDS[RefusesF64Softmax.name]


def test_probe_finds_alone_and_in_context_failures_and_caches(refusing_backend):
    report = probe_mod.probe(refusing_backend)
    assert not report.cached
    assert set(report.unsupported) == {"softmax(f64)->f64", "sigmoid(f32)->f32"}
    assert report.unsupported["sigmoid(f32)->f32"] == "compile: fused sigmoid f32 failed"
    again = probe_mod.probe(refusing_backend)
    assert again.cached and again.unsupported == report.unsupported


def test_denied_signatures_are_never_generated(refusing_backend):
    deny = probe_mod.deny_list([refusing_backend])
    cfg = GenConfig(deny=deny, ops_include=["softmax", "sigmoid", "cast", "relu"])
    for seed in range(40):
        g = generate(seed, cfg)
        types = g.types()
        for inst in g.insts:
            key = signature_key(inst.op.name, [types[a].dtype for a in inst.args],
                                [r.type.dtype for r in inst.results])
            assert key not in deny


def test_every_signature_gets_a_probe_graph():
    missing = [signature_key(c.name, i, o) for c, i, o in probe_mod.all_signatures()
               if not probe_mod.probe_graphs(c, i, o)]
    assert missing == []
