"""TVM's ONNX frontend on `model.onnx`, then compile and run (`relax`); a gradient test trains
as the backend does (`relax_training.train_relax`: the leaf params as inputs, the loss,
`relax.transform.Gradient`); `ablate`, the localization plan (`relax.ablate_relax`)."""
from __future__ import annotations

import os

import onnx
import tvm
from tvm.relax.frontend.onnx import from_onnx

from campaign.backends.repro_scripts.localize import Probe
from campaign.backends.repro_scripts.prelude import (
    GRADIENTS,
    HERE,
    failed,
    finish,
    input_sets,
    stage,
)
from campaign.backends.tvm.relax import (
    OPT_LEVEL,
    PIPELINE,
    ablate_relax,
    compile_and_run,
    feeds_of,
    target_spec,
)
from campaign.backends.tvm.relax_training import train_relax


def main() -> None:
    print(f"tvm {tvm.__version__}, target {target_spec()!r}, opt_level {OPT_LEVEL}, "
          f"pipeline {PIPELINE!r}", flush=True)
    sets = input_sets()
    if GRADIENTS:  # a gradient test: its outputs, then its gradients
        finish(train_relax(onnx.load(os.path.join(HERE, "model.onnx")), sets))
    stage("import")
    try:
        mod = from_onnx(onnx.load(os.path.join(HERE, "model.onnx")))
    except Exception as e:
        failed(e)
    finish(compile_and_run(mod, feeds_of(sets)))


def ablate(probe: Probe) -> tuple[str | None, str]:
    """The localization plan (`ablate_relax`): a failure while importing is the frontend's."""
    return ablate_relax(probe, "ONNX frontend (from_onnx)")
