"""The triage localizes each new compiler bug whose repro reproduced: a real ONNX Runtime bug
(docs/findings F12, its note's own graph) found by a campaign worker comes out of the triage
with its culprit in the bugs table, info.json and report.md; a known one is not localized."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from test_triage import _case, campaign_dir

from campaign.triage.config import TriageConfig
from campaign.triage.pipeline.campaign_triage import triage

F12 = (Path(__file__).resolve().parents[2] / "docs" / "findings" / "graphs"
       / "F12-transpose_pad_reflect_transpose.gir").read_text()


def test_a_new_ort_bug_is_localized_to_its_graph_transformer(tmp_path):
    out = campaign_dir(tmp_path / "run", ["ort"], [_case(text=F12)])
    # the notes would know F12: without them it is a new bug
    triage(out, TriageConfig(max_tests=100, budget="5m", findings=None, db="off"),
           log=lambda s: None)
    (row,) = [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]
    assert row["repro_status"] == "reproduced", row
    assert row["culprit"] == "ort: TransposeOptimizer", row
    info = json.loads((out / row["artifact_path"] / "info.json").read_text())
    steps = info["localization"]["steps"]
    assert steps[0]["outcome"] == "fails the same way"  # as the triage found it
    assert any(s["outcome"] == "passes" and s["values"].get("DISABLED_OPTIMIZERS")
               == ["TransposeOptimizer"] for s in steps), steps
    report = (out / row["artifact_path"] / "report.md").read_text()
    assert "**Culprit: ort: TransposeOptimizer**" in report
    assert "### Describe the issue" in report and "| run | changed | outcome | s |" in report


def test_a_known_bug_is_not_localized_again(tmp_path):
    out = campaign_dir(tmp_path / "run", ["ort"], [_case(text=F12)])
    triage(out, TriageConfig(max_tests=100, budget="5m", db="off"), log=lambda s: None)
    (row,) = [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]
    assert not row["new"] and row["finding"].startswith("F12") and row["culprit"] is None, row
