"""ONNX Runtime on `model.onnx`, in a session with the failing configuration's options
(`ort_session`, as the fuzzer makes it)."""
from __future__ import annotations

import os

import onnxruntime as ort

from campaign.triage.pipeline.repro_scripts.ort_session import ort_session
from campaign.triage.pipeline.repro_scripts.prelude import HERE, INPUTS, failed, finish, input_sets, stage

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
        sess = ort_session(os.path.join(HERE, "model.onnx"), OPT_LEVEL, DEVICE, EXECUTION_MODE,
                           THREADS, DISABLED_OPTIMIZERS)
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
