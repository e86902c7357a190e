"""TVM's ONNX frontend on `model.onnx`, then compile and run (`relax`)."""
from __future__ import annotations

import os

import onnx
import tvm
from tvm.relax.frontend.onnx import from_onnx

from campaign.triage.pipeline.repro_scripts.prelude import HERE, failed, finish, input_sets, stage
from campaign.triage.pipeline.repro_scripts.relax import OPT_LEVEL, PIPELINE, TARGET_SPEC, compile_and_run


def main() -> None:
    print(f"tvm {tvm.__version__}, target {TARGET_SPEC!r}, opt_level {OPT_LEVEL}, "
          f"pipeline {PIPELINE!r}", flush=True)
    sets = input_sets()
    stage("import")
    try:
        mod = from_onnx(onnx.load(os.path.join(HERE, "model.onnx")))
    except Exception as e:
        failed(e)
    finish(compile_and_run(mod, sets))
