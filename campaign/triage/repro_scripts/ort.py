"""ONNX Runtime on `model.onnx`, in the failing configuration's session options (as
`ort_session_options` sets them for the fuzzer)."""
from __future__ import annotations

import os
from typing import Any

import onnxruntime as ort

from campaign.triage.repro_scripts.prelude import HERE, INPUTS, failed, finish, input_sets, stage

# ---- per-test values
#: the session's options: graph optimizations (all, extended, basic, disabled), device (cpu,
#: cuda), optimizers turned off by name, executor (parallel: two inter-op threads), intra-op
#: threads
OPT_LEVEL = "all"
DEVICE = "cpu"
DISABLED_OPTIMIZERS: list[str] = []
EXECUTION_MODE = "sequential"
THREADS = 1
# ---- end of per-test values


def session(model: str, opt_level: str, device: str) -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 2 if EXECUTION_MODE == "parallel" else 1
    if EXECUTION_MODE == "parallel":
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    so.log_severity_level = 3
    so.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[opt_level]
    providers = ["CUDAExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    extra = {"disabled_optimizers": DISABLED_OPTIMIZERS} if DISABLED_OPTIMIZERS else {}
    return ort.InferenceSession(model, so, providers=providers, **extra)


def configuration() -> str:
    """The options that are not the default, as words."""
    return "".join([f", disabled_optimizers {DISABLED_OPTIMIZERS}" if DISABLED_OPTIMIZERS else "",
                    ", the parallel executor" if EXECUTION_MODE == "parallel" else "",
                    f", {THREADS} intra-op threads" if THREADS != 1 else ""])


def main() -> None:
    print(f"onnxruntime {ort.__version__}, graph optimizations {OPT_LEVEL!r}{configuration()}",
          flush=True)
    sets = input_sets()
    stage("compile")
    try:
        sess = session(os.path.join(HERE, "model.onnx"), OPT_LEVEL, DEVICE)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        for s in sets:
            outs += sess.run(None, {n: s[n] for n in INPUTS})
    except Exception as e:
        failed(e)
    finish(outs)
