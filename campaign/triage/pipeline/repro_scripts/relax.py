"""Compile and run of a Relax module, as the fuzzer's TVM backends do (`RelaxBackend`): shared
by the repros of every TVM backend (each imports the graph its own way)."""
from __future__ import annotations

from typing import Any

import numpy as np
import tvm
from tvm import relax

from campaign.triage.pipeline.repro_scripts.prelude import INPUTS, failed, stage

# ---- per-test values
#: the target's name (llvm, cuda), the CPU of an llvm target (None: this machine's), the
#: PassContext's opt_level, the Relax pipeline (fused: the target's default, or "default")
TARGET = "llvm"
MCPU: str | None = None
OPT_LEVEL = 3
PIPELINE = "fused"
# ---- end of per-test values

#: the target: its name, or the llvm target of one CPU
TARGET_SPEC: Any = TARGET if MCPU is None else {"kind": TARGET, "mcpu": MCPU}


def compile_and_run(mod: Any, sets: list[dict[str, np.ndarray]]) -> list[Any]:
    """Compile `mod` (stage compile), run its main on every input set (stage run); the
    outputs of every set, in order."""
    stage("compile")
    try:
        target = tvm.target.Target(TARGET_SPEC)
        pipeline = relax.get_default_pipeline(target) if PIPELINE == "fused" else "default"
        with tvm.transform.PassContext(opt_level=OPT_LEVEL):
            ex = tvm.compile(mod, target=target, relax_pipeline=pipeline)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        dev = tvm.cuda(0) if TARGET == "cuda" else tvm.cpu(0)
        vm = relax.VirtualMachine(ex, dev)
        for s in sets:
            out = vm["main"](*[tvm.runtime.tensor(np.asarray(s[n]), dev) for n in INPUTS])
            outs += [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]
    except Exception as e:
        failed(e)
    return outs
