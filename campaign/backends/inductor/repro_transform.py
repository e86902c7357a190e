"""A transform test on Inductor (or the stage before it): torch.compile of the transformed
program (`transform_program`, copied from ir/materialize/torch_func.py), on the CPU, as
`InductorBackend._evaluate_transform` compiles it."""
from __future__ import annotations

import numpy as np
import torch

from campaign.backends.inductor.torch_compile import (
    COMPILER,
    DYNAMIC,
    FULLGRAPH,
    ablate_compile,
    configure,
    describe,
    set_training_flags,
    use_regions,
)
from campaign.backends.repro_scripts.localize import Probe
from campaign.backends.repro_scripts.model import Model
from campaign.backends.repro_scripts.prelude import (
    HERE,
    INPUTS,
    PARAMS,
    failed,
    finish,
    input_sets,
    stage,
)
from ir.materialize.torch_func import transform_program

# ---- per-test values
#: the graph's outputs by name (the cotangents in transform.npz are named by them)
OUTPUTS: list[str] = []
# ---- end of per-test values


def main() -> None:
    backend = configure()
    print(describe("<transformed program>, ", "cpu"), flush=True)
    sets = input_sets()
    stage("import")
    try:
        use_regions(Model)
        model = Model({n: np.array(sets[0][n], copy=True) for n in PARAMS}).eval()
        program, args, what = transform_program(model, sets, INPUTS, OUTPUTS, HERE)
        print(f"[repro] the program: {what}", flush=True)
        run = torch.compile(program, backend=backend, fullgraph=FULLGRAPH, dynamic=DYNAMIC) \
            if COMPILER != "none" else program  # none: run eagerly (localization)
    except Exception as e:
        failed(e)
    set_training_flags()
    stage("compile")
    try:
        run(*args)
    except Exception as e:
        failed(e)
    stage("run")
    try:
        outs = [o.detach().cpu().numpy() for o in run(*args)]
    except Exception as e:
        failed(e)
    finish(outs)



def ablate(probe: Probe) -> tuple[str | None, str]:
    """`repro.py --localize`: torch.compile's plan (torch_compile.ablate_compile)."""
    return ablate_compile(probe)
