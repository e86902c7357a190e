"""TVM's torch frontend: `torch.export` of the graph's module, `from_exported_program`, then
compile and run (`relax`); `ablate`, the localization plan (`relax.ablate_relax`)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import tvm
from tvm.relax.frontend.torch import from_exported_program

from campaign.triage.pipeline.repro_scripts.localize import Probe
from campaign.triage.pipeline.repro_scripts.model import Model
from campaign.triage.pipeline.repro_scripts.prelude import INPUTS, PARAMS, failed, finish, input_sets, stage
from campaign.triage.pipeline.repro_scripts.relax import (
    OPT_LEVEL,
    PIPELINE,
    ablate_relax,
    compile_and_run,
    feeds_of,
    target_spec,
)


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
    unless torch.export, before it, fails."""
    return ablate_relax(probe, "torch frontend (from_exported_program)", export_fails)
