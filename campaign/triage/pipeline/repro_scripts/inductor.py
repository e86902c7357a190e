"""torch.compile of the graph's module (`InductorBackend`): stage import builds and wraps it,
compile is the first call, run calls it on every input set. A gradient test trains
(`training.train_step`: the forward, then the compiled backward)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from campaign.triage.pipeline.repro_scripts.localize import Probe
from campaign.triage.pipeline.repro_scripts.model import Model
from campaign.triage.pipeline.repro_scripts.prelude import (
    EXPECT,
    GRADIENTS,
    INPUTS,
    PARAMS,
    failed,
    finish,
    input_sets,
    stage,
)
from campaign.triage.pipeline.repro_scripts.torch_compile import (
    COMPILER,
    DEVICE,
    DYNAMIC,
    FULLGRAPH,
    ablate_compile,
    configure,
    describe,
    set_training_flags,
)
from campaign.triage.pipeline.repro_scripts.training import train_step


def main() -> None:
    backend = configure()
    print(describe("", DEVICE), flush=True)
    sets = input_sets()
    stage("import")
    try:
        params = {n: np.array(sets[0][n], copy=True) for n in PARAMS}
        model = Model(params).to(DEVICE).eval()
        program = torch.compile(model, backend=backend, fullgraph=FULLGRAPH, dynamic=DYNAMIC) \
            if COMPILER != "none" else model  # none: run eagerly (localization)
        args = [[torch.from_numpy(np.array(s[n], copy=True)).to(DEVICE) for n in INPUTS]
                for s in sets]
    except Exception as e:
        failed(e)

    def call(k: int, xs: list[torch.Tensor]) -> Any:
        xs = [x.clone() for x in xs]  # fresh inputs each call: the program may write to them
        if GRADIENTS:  # forward, then the compiled backward
            return train_step(program, model, xs, k)
        with torch.no_grad():
            return program(*xs)

    outs = []
    set_training_flags()
    # run eagerly, the first call compiles nothing: it is the stage the failure expects (an
    # Inductor finding's compile, an eager one's run), so the judgement compares like with like
    stage("compile" if COMPILER != "none" or EXPECT.get("stage") != "run" else "run")
    try:
        call(0, args[0])
    except Exception as e:
        failed(e)
    stage("run")
    try:
        for k, xs in enumerate(args):
            outs += [o.detach().cpu().numpy() for o in call(k, xs)]
    except Exception as e:
        failed(e)
    finish(outs)



def ablate(probe: Probe) -> tuple[str | None, str]:
    """`repro.py --localize`: torch.compile's plan (torch_compile.ablate_compile)."""
    return ablate_compile(probe)
