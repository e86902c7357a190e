"""TVM's torch frontend: `torch.export` of the graph's module, `from_exported_program`, then
compile and run (`relax`); `ablate`, the localization plan (`relax.ablate_relax`, then the same
program through TVM's ONNX frontend: a wrong module of the torch frontend shows there)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
import tvm
from tvm.relax.frontend.torch import from_exported_program

from campaign.backends.repro_scripts.localize import PASSES, Probe
from campaign.backends.repro_scripts.model import Model
from campaign.backends.repro_scripts.prelude import (
    EXPECT,
    HERE,
    INPUTS,
    PARAMS,
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

#: the frontend main() imports with: "torch" (torch.export, then from_exported_program), or
#: "onnx" (model.onnx, from_onnx: the localization's cross-check of the torch frontend)
FRONTEND = "torch"


def exported(sets: list[dict[str, np.ndarray]]) -> Any:
    """`torch.export.export` of the graph's module on input set 0."""
    model = Model({n: np.array(sets[0][n], copy=True) for n in PARAMS}).eval()
    args = tuple(torch.from_numpy(np.array(sets[0][n], copy=True)) for n in INPUTS)
    return torch.export.export(model, args)


def main() -> None:
    import warnings

    torch.set_num_threads(1)
    print(f"torch {torch.__version__} torch.export.export, tvm {tvm.__version__} "
          f"from_exported_program, target {target_spec()!r}, opt_level {OPT_LEVEL}, "
          f"pipeline {PIPELINE!r}", flush=True)
    sets = input_sets()
    stage("import")
    if FRONTEND == "onnx":
        import onnx
        from tvm.relax.frontend.onnx import from_onnx

        try:
            mod = from_onnx(onnx.load(os.path.join(HERE, "model.onnx")))
        except Exception as e:
            failed(e)
        finish(compile_and_run(mod, feeds_of(sets)))
    try:
        program = exported(sets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = from_exported_program(program)
    except Exception as e:
        failed(e)
    finish(compile_and_run(mod, feeds_of(sets)))


def export_fails() -> str | None:
    """How `torch.export.export` fails on this graph (in this process), or None: it exports."""
    try:
        torch.set_num_threads(1)
        exported(input_sets())
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return f"torch.export.export fails: {type(e).__name__}: {first}"
    return None


def ablate(probe: Probe) -> tuple[str | None, str]:
    """The localization plan (`ablate_relax`): a failure while importing is the frontend's,
    unless torch.export, before it, fails. When no pass is at fault, the same program through
    TVM's ONNX frontend (model.onnx), built and run the same way: passing there, the torch
    frontend's module is what is wrong (F23: selu's scale dropped by its elu converter)."""
    culprit, why = ablate_relax(probe, "torch frontend (from_exported_program)", export_fails)
    if (culprit is not None or EXPECT.get("stage") == "import"
            or not os.path.exists(os.path.join(HERE, "model.onnx"))):
        return culprit, why
    fares = probe("the same program through TVM's ONNX frontend (model.onnx, from_onnx)",
                  FRONTEND="onnx")
    if fares == PASSES:
        return ("tvm: torch frontend (from_exported_program)",
                f"{why}; through TVM's ONNX frontend, built and run the same way, it passes: "
                "the torch frontend's module is wrong")
    return None, f"{why}; through TVM's ONNX frontend it {fares} too"
