"""torch.compile of a dynamic-shape test (docs/dynshape.md), as `InductorBackend` runs one: the
program computes its shape arguments from its inputs' sizes (`Model`), is compiled with
`dynamic=None` (DYNAMIC) and each symbolic input dim marked on every call (`maybe_mark_dynamic`), and
runs every input set, each of its own shapes; the graphs compiled per set are counted. Judged
like any test (the outputs over every set, a crash), and a compile for a later set whose
symbolic dims are all >= 2 is the `recompile` failure, named by the torch code that added the
guard that failed (`shape_guards.recompile_cause`). `ablate`: torch.compile's plan; for a
recompile its stage names the cause: `dynamo: a size specialized by _max_pool1d
(nn/functional.py)` when backend='eager' (Dynamo alone) recompiles alike."""
from __future__ import annotations

from typing import Any

import torch

from campaign.backends.inductor.shape_guards import (
    ANY_RECOMPILE,
    GuardLog,
    clear_guard_failures,
    guard_failure_reasons,
    recompile_cause,
)
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
    EXPECT,
    GRADIENTS,
    done,
    failed,
    finish,
    input_sets,
    judge,
    stage,
)
from campaign.backends.repro_scripts.training import train_step

# ---- per-test values
#: per graph input, its symbolic dims; per input set, its shape assignment (`B=3,L=5`) and
#: whether every symbolic dim is >= 2 there (a compile for such a set is unexpected: torch
#: specializes 0/1 sizes by design)
DYNAMIC_DIMS: list[list[int]] = []
SHAPE_SETS: list[str] = []
GENERIC_SETS: list[bool] = []
# ---- end of per-test values

#: graphs compiled so far (`counting`)
COMPILED = [0]


def counting(backend: Any) -> Any:
    """torch.compile's backend argument that counts the graphs it compiles (the fuzzer's
    `CompileCounter`), then compiles each as `backend` does (a name, or a function)."""
    from torch._dynamo.backends.registry import lookup_backend

    inner = lookup_backend(backend) if isinstance(backend, str) else backend

    def counted(gm: Any, example_inputs: Any) -> Any:
        COMPILED[0] += 1
        return inner(gm, example_inputs)

    return counted


def main() -> None:
    backend = configure()
    print(f"{describe('', DEVICE)}; symbolic dims marked (maybe_mark_dynamic): "
          f"{DYNAMIC_DIMS}; input sets: {SHAPE_SETS}", flush=True)
    model, program, args = build_program(input_sets(), counting(backend))

    def mark(xs: list[torch.Tensor]) -> None:
        for x, dims in zip(xs, DYNAMIC_DIMS, strict=True):
            for d in dims:  # on every call alike: Dynamo guards on how inputs are marked
                torch._dynamo.maybe_mark_dynamic(x, d)

    def call(k: int, xs: list[torch.Tensor]) -> Any:
        xs = [x.clone() for x in xs]
        if GRADIENTS:  # marked once made leaves (new tensors, without the clones' marks)
            return train_step(program, model, xs, k, mark)
        mark(xs)
        with torch.no_grad():
            return program(*xs)

    outs: list[Any] = []
    compiles: list[int] = []
    set_training_flags()
    clear_guard_failures()
    with GuardLog() as guards:
        stage(first_call_stage())
        try:
            call(0, args[0])
        except Exception as e:
            failed(e)
        first = COMPILED[0]
        stage("run")
        try:
            for k, xs in enumerate(args):
                before = COMPILED[0]
                outs += [o.detach().cpu().numpy() for o in call(k, xs)]
                compiles.append(COMPILED[0] - before + (first if k == 0 else 0))
        except Exception as e:
            failed(e)
    print(f"[repro] graphs compiled per input set: {compiles}", flush=True)
    recompiled = next((k for k in range(1, len(compiles)) if compiles[k] and GENERIC_SETS[k]),
                      None)
    if judge(outs) is None and recompiled is not None:
        cause, detail = recompile_cause(guard_failure_reasons(), guards.added)
        what = (f"{cause}: compiled again for input set {recompiled} "
                f"({SHAPE_SETS[recompiled]}), every symbolic dim >= 2 there; {detail}")
        if EXPECT["verdict"] == "recompile" and EXPECT.get("error_sig") in (None, ANY_RECOMPILE,
                                                                            cause):
            done(1, f"REPRODUCED: recompile: {what}")
        done(2, f"DIFFERENT FAILURE: recompile: {what} (expected {EXPECT['verdict']} "
                f"{EXPECT.get('error_sig') or ''})")
    finish(outs)


def ablate(probe: Probe) -> tuple[str | None, str]:
    """torch.compile's plan (`ablate_compile`: the first stage that fails the same way, ...);
    a recompile's culprit is that stage and the cause its signature names (the torch code
    whose guard failed, the same in every run that recompiles alike)."""
    culprit, why = ablate_compile(probe)
    sig = str(EXPECT.get("error_sig") or "")
    if (EXPECT["verdict"] == "recompile" and culprit is not None
            and sig.startswith("Recompile: ") and sig != ANY_RECOMPILE):
        stage_of = culprit.split(":")[0]
        return (f"{stage_of}: {sig.removeprefix('Recompile: ')}",
                f"{why}; the stage adds the guard while it traces: {culprit}")
    return culprit, why
