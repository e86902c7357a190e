"""TVM's torch frontend: `torch.export` of the graph's module, `from_exported_program`, then
compile and run (`relax`)."""
from __future__ import annotations

import numpy as np
import torch
import tvm
from tvm.relax.frontend.torch import from_exported_program

from campaign.triage.pipeline.repro_scripts.model import Model
from campaign.triage.pipeline.repro_scripts.prelude import INPUTS, PARAMS, failed, finish, input_sets, stage
from campaign.triage.pipeline.repro_scripts.relax import OPT_LEVEL, PIPELINE, TARGET_SPEC, compile_and_run


def main() -> None:
    import warnings

    torch.set_num_threads(1)
    print(f"torch {torch.__version__} torch.export.export, tvm {tvm.__version__} "
          f"from_exported_program, target {TARGET_SPEC!r}, opt_level {OPT_LEVEL}, "
          f"pipeline {PIPELINE!r}", flush=True)
    sets = input_sets()
    stage("import")
    try:
        model = Model({n: np.array(sets[0][n], copy=True) for n in PARAMS}).eval()
        args = tuple(torch.from_numpy(np.array(sets[0][n], copy=True)) for n in INPUTS)
        program = torch.export.export(model, args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = from_exported_program(program)
    except Exception as e:
        failed(e)
    finish(compile_and_run(mod, sets))
