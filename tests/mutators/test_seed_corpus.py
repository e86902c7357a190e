"""The shipped seed corpus (seeds/*.gir): model-shaped graphs that verify, round-trip, are valid
on the reference without repair and pass onnxruntime."""
from __future__ import annotations

import pytest
from mutator_graphs import seeds

from campaign.testcase import TestCase
from campaign.worker import FuzzWorker, WorkerConfig
from ir import parse, print_graph, verify
from ir.numerics.input_search import make_valid
from mutators.source import ROOT, load_seeds, seeds_dir

MODELS = {"cnn_block": {"conv2d", "batch_norm", "maxpool2d", "softmax"},
          "mlp": {"linear", "gelu", "layer_norm"},
          "attention": {"matmul", "softmax", "transpose", "layer_norm"},
          "lstm_tagger": {"lstm", "log_softmax"}, "gru_tagger": {"gru"},
          "resblock": {"conv2d", "batch_norm", "add"}, "rnn_encoder": {"conv1d", "rnn"}}


def test_the_corpus_has_the_model_shapes():
    got = {sid.split("/")[1]: g for sid, g in seeds()}
    assert set(MODELS) <= set(got)
    for name, ops in MODELS.items():
        assert ops <= set(got[name].op_counts()), name


@pytest.mark.parametrize("sid", [sid for sid, _ in load_seeds(ROOT / "seeds")])
def test_each_seed_verifies_round_trips_is_valid_and_passes_ort(sid):
    g = dict(seeds())[sid]
    verify(g)
    assert parse(print_graph(g)) == g
    valid = make_valid(g, 1)
    assert valid is not None and valid.dropped == [] and valid.graph == g
    tc = TestCase(f"seed-{sid}", 1, g, valid.search.values, [{"seed_id": sid}])
    rows = FuzzWorker(WorkerConfig(backends=["ort", "ort_noopt"], sandbox=False)).run_case(tc).rows
    assert [r["verdict"] for r in rows] == ["pass", "pass"], [r["error_msg"] for r in rows]


def test_seed_directory_lookup(tmp_path, monkeypatch):
    assert seeds_dir("seeds") is not None and seeds_dir(None) is None and seeds_dir("") is None
    monkeypatch.chdir(tmp_path)  # relative: the working directory first, then the checkout
    assert seeds_dir("seeds") == ROOT / "seeds"
    (tmp_path / "seeds").mkdir()
    assert seeds_dir("seeds").resolve() == (tmp_path / "seeds").resolve()
    with pytest.raises(ValueError, match=r"^mutation.seeds: no directory 'nowhere'"):
        seeds_dir("nowhere")
