"""Every preset with a torch backend runs a short real campaign on the torch this interpreter
has: exit 0, rows from its torch backends, and no row that is our harness failing (a sandbox
that did not start, torch's refusal of autograd after a fork, an actor that did not start).
CI's second leg runs these on torch 2.14.1, the CUDA build (.ci/run); they are `slow`, so the
default run on 2.13 leaves them out."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as pads
import pytest

REPO = Path(__file__).resolve().parents[2]

#: the presets whose backends include a torch compiler (Inductor, aot_eager, eager, the
#: exporter, TVM's torch frontend)
TORCH_PRESETS = ("tour", "cpu_all", "cpu_dynamic", "cpu_configs", "cpu_inplace",
                 "cpu_dynshape", "cpu_train", "cpu_models", "cpu_extend")

#: what a row says when our harness failed rather than the compiler
HARNESS_MARKS = ("fork-based multiprocessing", "sandbox process for", "did not start",
                 "SandboxError", "harness error in backend", "harness error on ")


def harness_errors(rows: list[dict]) -> list[str]:
    """The rows (backend: message) whose failure is our harness's, not the compiler's."""
    out = []
    for r in rows:
        text = " ".join(str(r.get(k) or "") for k in ("error_class", "error_sig", "error_msg"))
        if any(mark in text for mark in HARNESS_MARKS):
            out.append(f"{r['backend']}: {text[:200]}")
    return out


def test_harness_errors_are_told_from_compiler_failures():
    rows = [{"backend": "aot_eager", "error_class": "BackendCompilerFailed",
             "error_msg": "RuntimeError: Unable to handle autograd's threading in combination "
                          "with fork-based multiprocessing."},
            {"backend": "inductor", "error_class": "LoweringException", "error_msg": "bad"}]
    assert harness_errors(rows) == [
        "aot_eager: BackendCompilerFailed  RuntimeError: Unable to handle autograd's threading "
        "in combination with fork-based multiprocessing."]


@pytest.mark.slow
@pytest.mark.parametrize("preset", TORCH_PRESETS)
def test_a_torch_preset_runs_without_harness_errors(preset, tmp_path):
    import torch

    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "run.py", f"campaign={preset}", "campaign.budget=120s",
         "triage.budget=0", "campaign.report=false", f"hydra.run.dir={out}",
         f"ray.temp_dir=/tmp/dsray-presets-{preset}"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = pads.dataset(out / "results", format="parquet").to_table().to_pylist()
    assert rows, f"{preset} on torch {torch.__version__}: no rows"
    assert harness_errors(rows) == [], f"{preset} on torch {torch.__version__}"
