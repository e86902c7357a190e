"""torch.compile of the graph's module (`InductorBackend`): stage import builds and wraps it,
compile is the first call, run calls it on every input set. A gradient test trains
(`training.train_step`: the forward, then the compiled backward)."""
from __future__ import annotations

from typing import Any

import torch

from campaign.backends.inductor.torch_compile import (
    DEVICE,
    ablate_compile,
    build_program,
    configure,
    describe,
    first_call_stage,
    set_training_flags,
)
from campaign.backends.repro_scripts.localize import Probe
from campaign.backends.repro_scripts.prelude import (
    GRADIENTS,
    failed,
    finish,
    input_sets,
    stage,
)
from campaign.backends.repro_scripts.training import train_step


def main() -> None:
    backend = configure()
    print(describe("", DEVICE), flush=True)
    model, program, args = build_program(input_sets(), backend)

    def call(k: int, xs: list[torch.Tensor]) -> Any:
        xs = [x.clone() for x in xs]  # fresh inputs each call: the program may write to them
        if GRADIENTS:  # forward, then the compiled backward
            return train_step(program, model, xs, k)
        with torch.no_grad():
            return program(*xs)

    outs = []
    set_training_flags()
    stage(first_call_stage())
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
