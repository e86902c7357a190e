"""End to end: the real CLI (Hydra + Ray + the real FuzzWorker on onnxruntime) writes a results
dataset that pyarrow reads back whole."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as pads

from campaign.schema import RESULT_SCHEMA
from campaign.verdict import Verdict

REPO = Path(__file__).resolve().parents[2]


def test_cli_smoke_campaign(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "run.py", "campaign.budget=20", f"hydra.run.dir={out}",
         "ray.temp_dir=/tmp/dsray-e2e"],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    table = pads.dataset(out / "results", format="parquet").to_table()
    assert table.schema.equals(RESULT_SCHEMA)
    assert table.num_rows == 20  # 20 tests x 1 backend (smoke: ort)
    assert len(set(table.column("test_id").to_pylist())) == 20
    assert set(table.column("verdict").to_pylist()) <= {v.value for v in Verdict}
    assert set(table.column("campaign").to_pylist()) == {"smoke"}

    summary = json.loads((out / "summary.json").read_text())
    assert summary["tests"] == 20 and summary["rows"] == 20
    assert "results:" in proc.stdout and "backend" in proc.stdout
    for row in table.filter(pads.field("finding_dir").is_valid()).to_pylist():
        assert (out / row["finding_dir"] / "info.json").is_file()
