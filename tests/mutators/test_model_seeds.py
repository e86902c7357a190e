"""Seeds from models (mutators/model_seeds.py): what `mutation.seeds` entries may be, windows
with their model and real weights beside them, and one-line errors (exit 2) for bad entries."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from campaign.config import Config, ConfigError, validate
from ir import parse
from ir.core.npz import npz_bytes
from ir.gen.builder import GenConfig
from ir.importers.windows import cut_windows
from mutators.engine import MutationConfig
from mutators.model_seeds import (
    WindowOptions,
    entries,
    kind,
    load_all,
    load_entry,
    torchvision_module,
)
from mutators.source import MutationSource, SeedError

REPO = Path(__file__).resolve().parents[2]
MLP = parse((REPO / "seeds" / "mlp.gir").read_text())
HINT = "; fix it, or set mutation.skip_bad_seeds=true to leave bad seeds out"


def test_entries_and_kinds():
    assert entries(None) == [] and entries("") == [] and entries("seeds") == ["seeds"]
    assert entries(["seeds", "torchvision:resnet18"]) == ["seeds", "torchvision:resnet18"]
    assert [kind(e) for e in ["seeds", "seeds/mlp.gir", "m/a.onnx", "torchvision:resnet18",
                              "timm:resnet18", "transformers:bert", "my_pkg.models:make"]] == [
        "dir", "gir", "onnx", "library", "library", "library", "factory"]


def _window_dir(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    d = tmp_path / "models"
    d.mkdir()
    w = cut_windows(MLP, "mlp", count=1, k_min=3, k_max=3, seed=0)[0]
    real = {p.name: np.full(p.type.shape, 0.25, dtype=np.float32) for p in MLP.params}
    (d / "mlp.w0.gir").write_text(w.text())
    (d / "mlp.w0.npz").write_bytes(npz_bytes(w.weights(real)))
    return d, w.weights(real)


def test_a_window_folder_gives_seeds_with_their_model_and_weights(tmp_path):
    d, weights = _window_dir(tmp_path)
    (s,) = load_entry(str(d))
    assert s.seed_id == "corpus/mlp.w0" and s.model == "mlp"
    assert set(s.weights) == set(weights) and all(
        np.array_equal(s.weights[k], weights[k]) for k in weights)
    # a hand-written seed has neither
    (m,) = load_entry(str(REPO / "seeds" / "mlp.gir"))
    assert m.model == "" and m.weights == {}
    # both entries at once, ids unique
    assert [x.seed_id for x in load_all([str(d), str(d)])] == ["corpus/mlp.w0", "corpus/mlp.w0~2"]


def test_real_weights_reach_the_pool_and_the_lineage(tmp_path):
    d, weights = _window_dir(tmp_path)
    src = MutationSource(MutationConfig(seeds=str(d), generated_seeds=0, rate=1.0), GenConfig())
    src.seed_pool()
    (e,) = src.pool.entries.values()
    assert e.model == "mlp" and e.lineage[0] == {"seed_id": "corpus/mlp.w0", "model": "mlp"}
    start = src.start_values(e.graph, [{"seed_id": "corpus/mlp.w0", "model": "mlp"}])
    assert set(start) == set(weights)
    g, lineage = src.make("t1", 3)
    assert lineage[0].get("model") == "mlp"
    fresh = MutationSource(MutationConfig(seeds=str(d), generated_seeds=0, model_weights="fresh"),
                           GenConfig())
    fresh.seed_pool()
    assert fresh.start_values(e.graph, [{"seed_id": "corpus/mlp.w0"}]) == {}


def test_a_bad_npz_beside_a_window_is_one_line(tmp_path):
    d, _ = _window_dir(tmp_path)
    (d / "mlp.w0.npz").write_bytes(npz_bytes({"nosuch": np.zeros(3, np.float32)}))
    with pytest.raises(SeedError) as e:
        load_entry(str(d))
    assert str(e.value) == (f"{d / 'mlp.w0.npz'}:1: array 'nosuch' (float32[3]) is no param of "
                            f"mlp.w0.gir of that type")


def test_option_checks():
    cfg = Config()
    cfg.mutation.model_weights = "pretrained"
    with pytest.raises(ConfigError, match="^mutation.model_weights: must be real or fresh"):
        validate(cfg)
    cfg = Config()
    cfg.mutation.seeds = ["seeds", "nowhere/at_all"]
    with pytest.raises(ConfigError, match="^mutation.seeds: nowhere/at_all: no such file or "
                                          "directory"):
        validate(cfg)


def _run(tmp_path: Path, seeds: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", f"mutation.seeds={seeds}",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=REPO, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])})


def test_cli_a_corrupt_onnx_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07 this is not a protobuf of a model \xff\xff")
    proc = _run(tmp_path, str(bad))
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: mutation.seeds: {bad}: not an ONNX model: ") and \
        line.endswith(HINT)
    assert not (tmp_path / "run" / "results").exists()


def test_cli_an_unknown_model_name_is_one_line_and_exit_2(tmp_path):
    try:
        torchvision_module()
    except ImportError:
        pytest.skip("torchvision is not installed (the [models] extra)")
    proc = _run(tmp_path, "[seeds,torchvision:resnet1800]")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: mutation.seeds: torchvision:resnet1800: torchvision has no model 'resnet1800' "
        f"(torchvision.models.list_models()){HINT}"]


def test_cli_a_factory_that_raises_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "my_factories.py").write_text(
        "def broken():\n    raise RuntimeError('the checkpoint is gone')\n")
    proc = _run(tmp_path, "my_factories:broken")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: mutation.seeds: my_factories:broken: the factory raised RuntimeError: the "
        f"checkpoint is gone{HINT}"]


def test_the_model_weights_are_where_the_search_starts(tmp_path):
    from ir.numerics.input_search import make_valid

    d, weights = _window_dir(tmp_path)
    (s,) = load_entry(str(d))
    valid = make_valid(s.graph, 1, params=s.weights)
    assert valid is not None and valid.search.iters == 0  # 0.25 everywhere is valid as it is
    assert all(np.array_equal(valid.search.values[k], weights[k]) for k in weights)
    drawn = make_valid(s.graph, 1)
    assert drawn is not None and not any(
        np.array_equal(drawn.search.values[k], weights[k]) for k in weights)


def test_the_report_credits_findings_and_coverage_to_the_seed_model(tmp_path):
    import pyarrow.parquet as pq

    from campaign.report import build_report
    from campaign.report.data import FINDING_VERDICTS, load
    from campaign.report.synthetic import write_run

    run = tmp_path / "runs" / "camp" / "20260101-120000"
    write_run(run, campaign="camp", n_tests=300, backends=("ort", "tvm"), seed=3,
              coverage_rate=0.5, models=("resnet18", "moe"))
    rows = pq.read_table(run / "results").to_pylist()
    data = load([tmp_path / "runs"])
    got = {r["name"]: r for r in data.model_yield}
    assert set(got) == {"resnet18", "moe"}
    for model in got:
        tests = {r["test_id"] for r in rows if r["seed_model"] == model}
        hits = {r["test_id"] for r in rows
                if r["seed_model"] == model and r["verdict"] in FINDING_VERDICTS}
        assert (got[model]["tests"], got[model]["hits"]) == (len(tests), len(hits))
        lines = sum(r["cov_new"] or 0 for r in rows if r["seed_model"] == model)
        assert sum(c["lines"] for c in data.coverage.by_model if c["name"] == model) == lines
    res = build_report([tmp_path / "runs"], tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert "fig-models" in res.plot_ids
    assert "New compiler lines per seed model" in page


def test_an_onnx_file_gives_windows_of_its_model_with_its_weights(tmp_path):
    pytest.importorskip("ir.importers.onnx_model")
    import onnx

    from ir.materialize.to_onnx import to_onnx
    from ir.numerics.values import random_values

    model = parse((REPO / "seeds" / "attention.gir").read_text())
    values = random_values(model, 0)
    f = tmp_path / "encoder_block.onnx"
    onnx.save(to_onnx(model, {p.name: values[p.name] for p in model.params}), str(f))
    seeds = load_entry(str(f), WindowOptions(count=3, k_min=5, k_max=12))
    assert seeds and all(s.model == "encoder_block" for s in seeds)
    assert all(s.seed_id.startswith("model/encoder_block/") for s in seeds)
    assert all(5 <= s.graph.num_insts() <= 12 for s in seeds)
    assert any(s.weights for s in seeds)  # the initializers' values came along


def test_a_factory_gives_windows_of_its_module():
    pytest.importorskip("ir.importers.torch_export")
    seeds = load_entry("mutators.model_corpus:mlp_mixer", WindowOptions(count=2))
    assert seeds and {s.model for s in seeds} == {"mlp_mixer"}
    assert all(5 <= s.graph.num_insts() <= 30 and s.weights for s in seeds)
