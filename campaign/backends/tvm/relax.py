"""Compile and run of a Relax module, as the fuzzer's TVM backends do (`RelaxBackend`): shared
by the repros of every TVM backend (each imports the graph its own way); `ablate_relax`, their
localization plan (docs/triage.md, "Where the fault is")."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import relax

from campaign.backends.repro_scripts.localize import SAME, Probe, first_failing, one_at_fault
from campaign.backends.repro_scripts.prelude import EXPECT, GRADIENTS, INPUTS, failed, stage

# ---- per-test values
#: the target's name (llvm, cuda), the CPU of an llvm target (None: this machine's), the
#: PassContext's opt_level, the Relax pipeline (fused: the target's default, or "default"),
#: the passes the PassContext switches off by name (the localization's bisection sets them)
TARGET = "llvm"
MCPU: str | None = None
OPT_LEVEL = 3
PIPELINE = "fused"
DISABLED_PASS: list[str] = []
# ---- end of per-test values

#: when set, a file the compile appends each pass it runs to (`depth name`, depth 0 the
#: outermost): how the localization learns the passes of this module's build
PASS_LOG_ENV = "REPRO_TVM_PASS_LOG"
#: the name the pass log gives a gradient test's differentiation (`relax_training`, before
#: the build): a compile that stops inside it failed in `relax.transform.Gradient`
GRADIENT_PASS = "Gradient"
#: when set, a file a gradient test's compile writes (JSON) the gradients the Gradient pass
#: typed unlike their leaves (`relax_training.mistyped_gradients`): how the localization tells
#: the pass's fault from the build's
GRAD_TYPES_ENV = "REPRO_TVM_GRAD_TYPES"
#: Relax passes a build for the VM cannot do without (lowering to TIR, to the VM's builtins):
#: switching one off fails otherwise, so the bisection leaves them on
LOWERING_PASSES = frozenset({
    "DispatchSampling", "NormalizeGlobalVar", "DispatchSortScan", "LegalizeOps",
    "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite", "LowerAllocTensor",
    "LowerRuntimeBuiltin", "ComputePrimValue", "VMShapeLower", "AttachGlobalSymbol",
    "VMBuiltinLower", "_pipeline", "sequential"})
#: TIR passes that only optimize (the build works without them): the second bisection's
#: candidates, when no Relax pass is at fault
OPTIONAL_TIR_PASSES = (
    "s_tir.LoopPartition", "tirx.VectorizeLoop", "s_tir.InjectDoubleBuffer",
    "tirx.StorageRewrite", "s_tir.HoistIfThenElse", "tirx.UnrollLoop",
    "s_tir.RenormalizeSplitPattern", "tirx.StmtSimplify", "s_tir.StmtSimplify",
    "tirx.RemoveNoOp", "s_tir.RewriteUnsafeSelect", "tirx.CommonSubexprElim",
    "tirx.NarrowDataType", "s_tir.InjectSoftwarePipeline")


def target_spec() -> Any:
    """The target: its name, or the llvm target of one CPU."""
    return TARGET if MCPU is None else {"kind": TARGET, "mcpu": MCPU}


def pass_recorder(path: str) -> Any:
    """A pass instrument that appends `depth name` to `path` when a pass starts, and
    `depth /name` when it ends."""
    depth = [0]

    @tvm.instrument.pass_instrument
    class Recorder:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            with open(path, "a") as f:
                f.write(f"{depth[0]} {info.name}\n")
            depth[0] += 1

        def run_after_pass(self, mod: Any, info: Any) -> None:
            depth[0] -= 1
            with open(path, "a") as f:
                f.write(f"{depth[0]} /{info.name}\n")

    return Recorder()


def feeds_of(sets: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    """The graph inputs of every input set, in order: what `main` takes."""
    return [[s[n] for n in INPUTS] for s in sets]


def compile_and_run(mod: Any, feeds: list[list[np.ndarray]], func: str = "main",
                    unpack: Callable[[Any], list[Any]] | None = None) -> list[Any]:
    """Compile `mod` (stage compile), call `func` on the arguments of every input set
    (`feeds`; stage run); the results of every set, in order (`unpack`: one call's result as
    arrays; default its tensor, or its tensors)."""
    stage("compile")
    try:
        target = tvm.target.Target(target_spec())
        pipeline = relax.get_default_pipeline(target) if PIPELINE == "fused" else "default"
        log = os.environ.get(PASS_LOG_ENV)
        with tvm.transform.PassContext(opt_level=OPT_LEVEL, disabled_pass=list(DISABLED_PASS),
                                       instruments=[pass_recorder(log)] if log else []):
            ex = tvm.compile(mod, target=target, relax_pipeline=pipeline)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        dev = tvm.cuda(0) if TARGET == "cuda" else tvm.cpu(0)
        vm = relax.VirtualMachine(ex, dev)
        for args in feeds:
            out = vm[func](*[tvm.runtime.tensor(np.asarray(x), dev) for x in args])
            outs += (unpack(out) if unpack is not None else
                     [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out])
    except Exception as e:
        failed(e)
    return outs


def passes_run(probe: Probe, opt_level: int) -> tuple[list[tuple[int, str]], str | None]:
    """The passes the build runs at `opt_level` (`depth`, name), in order, and the innermost
    pass that started and never ended (where a compile that fails stops), if any: one run of
    the script with the pass log on (a run of the ablation too)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "passes.txt")
        probe.run(f"opt_level {opt_level}, recording the passes the build runs",
                  {"OPT_LEVEL": opt_level}, {PASS_LOG_ENV: path})
        if not os.path.exists(path):
            return [], None
        with open(path) as f:
            rows = [line.split(" ", 1) for line in f.read().splitlines() if " " in line]
    ran: list[tuple[int, str]] = []
    open_: list[str] = []
    for d, name in rows:
        if name.startswith("/"):
            if open_ and open_[-1] == name[1:]:
                open_.pop()
        else:
            ran.append((int(d), name))
            open_.append(name)
    return ran, open_[-1] if open_ else None


def mistyped_gradients_of(probe: Probe) -> list[dict[str, str]]:
    """The gradients the Gradient pass typed unlike their leaves (`relax_training.
    mistyped_gradients`): one run of the script that records them."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grad_types.json")
        probe.run("recording the types of the gradients relax.transform.Gradient makes", {},
                  {GRAD_TYPES_ENV: path})
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return list(json.load(f))


def ablate_relax(probe: Probe, frontend: str,
                 import_fails: Callable[[], str | None] | None = None) -> tuple[str | None, str]:
    """TVM's plan: the stage (a failure while importing is the frontend's: `frontend`, unless
    `import_fails` says the part before TVM fails), the lowest opt_level that fails, then the
    one pass whose switching off (`disabled_pass`) alone makes it pass, by bisection over the
    optional Relax passes the build runs, then over its optional TIR passes."""
    if EXPECT.get("stage") == "import":
        before = import_fails() if import_fails is not None else None
        if before:  # the stage before TVM's frontend, run alone, fails
            return "torch: torch.export (before TVM)", (f"it fails while importing, before "
                                                        f"TVM: {before}")
        return f"tvm: {frontend}", "it fails while importing the model, before any compile"
    if GRADIENTS and EXPECT.get("stage") in ("compare", "run"):
        wrong = mistyped_gradients_of(probe)
        if wrong:
            w = wrong[0]
            return (f"tvm: relax.transform.{GRADIENT_PASS}",
                    f"the adjoint relax.transform.Gradient makes declares the gradient of "
                    f"%{w['leaf']} as {w['gradient']}, and %{w['leaf']} is {w['leaf_type']}: "
                    f"a gradient has its leaf's type, whatever the build does after"
                    + (f" ({len(wrong)} such gradients)" if len(wrong) > 1 else ""))
    if GRADIENTS and EXPECT.get("stage") == "compile":  # in the differentiation, or the build?
        logged, inside = passes_run(probe, OPT_LEVEL)
        if inside == GRADIENT_PASS:
            return (f"tvm: relax.transform.{GRADIENT_PASS}",
                    "it fails while relax.transform.Gradient differentiates the loss, before "
                    "the build (no PassContext option reaches it)")
        if not logged:  # neither the differentiation nor the build began
            return None, ("it fails while the loss function is made of the imported main, "
                          "before relax.transform.Gradient and the build: an output of the "
                          "frontend's module that is no tensor?")
    below = list(range(OPT_LEVEL))
    i, outcomes = first_failing(probe, [(f"opt_level {lv}", {"OPT_LEVEL": lv}) for lv in below])
    lowest = below[i] if i is not None else OPT_LEVEL
    lower = [f"opt_level {lv} {outcome}" for lv, outcome in zip(below, outcomes, strict=False)
             if outcome != SAME]
    where = (f"it fails from opt_level {lowest} on" + (f" ({'; '.join(lower)})" if lower else "")
             + f", during {EXPECT.get('stage')}")
    ran, inside = passes_run(probe, lowest)
    if EXPECT.get("stage") == "compile" and inside:
        where += f" (the build stops inside pass {inside})"
    ran = [(d, n) for d, n in ran if n != GRADIENT_PASS]  # not the build's: always runs
    relax_depth = min((d for d, n in ran if "." not in n and n not in LOWERING_PASSES),
                      default=0)
    relax_passes = [n for d, n in ran if d == relax_depth and "." not in n
                    and n not in LOWERING_PASSES and n not in DISABLED_PASS]
    tir_passes = [n for n in OPTIONAL_TIR_PASSES
                  if n in {name for _, name in ran} and n not in DISABLED_PASS]
    print(f"[localize] optional Relax passes the build runs: {', '.join(relax_passes) or 'none'}",
          flush=True)

    def switched_off(subset: list[str]) -> tuple[str, dict[str, Any], dict[str, str]]:
        return (f"opt_level {lowest}, disabled_pass += {subset}",
                {"OPT_LEVEL": lowest, "DISABLED_PASS": list(DISABLED_PASS) + subset}, {})

    culprit, why = one_at_fault(probe, relax_passes, switched_off)
    if culprit is not None:
        return f"tvm: relax.transform.{culprit}", f"{where}; {why}"
    if not why.endswith(SAME) and relax_passes:
        return None, f"{where}; of the {len(relax_passes)} optional Relax passes: {why}"
    culprit, tir_why = one_at_fault(probe, tir_passes, switched_off)
    if culprit is not None:
        return f"tvm: {culprit}", f"{where}; no Relax pass alone ({why}); {tir_why}"
    rest = ("; so the fault is in what every build does: the frontend's module, a lowering "
            "(LegalizeOps' TIR, the VM's builtins) or code generation"
            + (", or the gradients relax.transform.Gradient made" if GRADIENTS else "")
            if why.endswith(SAME) and tir_why.endswith(SAME) else "")
    return None, (f"{where}; of the {len(relax_passes)} optional Relax passes: {why}; of the "
                  f"{len(tir_passes)} optional TIR passes: {tir_why}{rest}")
