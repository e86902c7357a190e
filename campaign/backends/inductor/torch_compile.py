"""torch.compile as the fuzzer's Inductor backend runs it (`InductorBackend`): its process-wide
options, the backend argument of the failing configuration, AOT autograd's options. Shared by
the repro of a test (`inductor`) and of a transform test (`inductor_transform`), and so is the
localization plan both bodies run (`ablate_compile`, docs/triage.md "Where the fault is")."""
from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import torch

from campaign.backends.repro_scripts.localize import PASSES, SAME, Probe
from campaign.backends.repro_scripts.model import Model
from campaign.backends.repro_scripts.prelude import (
    EXPECT,
    GRADIENTS,
    HERE,
    INPUTS,
    PARAMS,
    failed,
    stage,
)

# ---- per-test values
#: the backend's options: device (cpu, cuda), torch.compile's fullgraph and dynamic (False
#: static, True symbolic, None after a recompile), the C++ wrapper, Inductor's mode (None:
#: default) and `torch._inductor.config` flags, the torch.compile backend (inductor, or a stage
#: before it: aot_eager, aot_eager_decomp_partition, eager; `none`: no torch.compile, the
#: program run eagerly) and AOT autograd's options (`torch._functorch.config`)
DEVICE = "cpu"
FULLGRAPH = True
DYNAMIC: bool | None = False
CPP_WRAPPER = False
MODE: str | None = None
FLAGS: dict[str, Any] = {}
COMPILER = "inductor"
TRAINING_FLAGS: dict[str, Any] = {}
#: the torch higher-order ops the program calls (`torch.cond`, ...; none in the python dialect)
HIGHER_ORDER_OPS: list[str] = []
# ---- end of per-test values


def configure() -> Any:
    """Set Inductor's process-wide options as the fuzzer's sandbox does; torch.compile's
    `backend` argument."""
    import torch._inductor.config as icfg

    torch.set_num_threads(1)
    icfg.compile_threads = 1
    icfg.fx_graph_cache = False
    icfg.cpp_wrapper = CPP_WRAPPER
    if hasattr(icfg.test_configs, "bisect_keep_custom_backend_for_inductor"):
        # under CompilerBisector (TORCH_BISECT_BACKEND=inductor, a localization's runs)
        # torch.compile would replace the backend function that applies FLAGS by plain Inductor
        icfg.test_configs.bisect_keep_custom_backend_for_inductor = True
    return compile_backend()


def compile_backend(extra: dict[str, Any] | None = None) -> Any:
    """The stage before Inductor by name, or Inductor: with the failing configuration's
    `torch._inductor.config` options, for these compiles only, as the fuzzer set them
    (`compile_fx(config_patches=...)`, with what MODE sets: torch.compile takes no mode
    beside a backend function), and Inductor options `extra` besides (a cache test's
    near-twin's)."""
    if COMPILER == "none":
        return None
    if COMPILER != "inductor":
        return COMPILER
    if not FLAGS and MODE is None and not extra:
        return "inductor"
    from torch._inductor.compile_fx import compile_fx

    patches = dict(FLAGS)
    if MODE is not None:
        from torch._inductor import list_mode_options

        patches.update(list_mode_options(MODE))
    patches.update(extra or {})

    def inductor_with_config(gm: Any, example_inputs: Any) -> Any:
        return compile_fx(gm, example_inputs, config_patches=patches)

    print(f"torch._inductor.config patches: {patches}", flush=True)
    return inductor_with_config


def build_program(sets: list[dict[str, Any]], backend: Any,
                  model_class: Any = None) -> tuple[Any, Any, list[list[Any]]]:
    """Stage import: the graph's module (its params from set 0; `model_class`: that class
    instead of `Model`), the program that runs it (torch.compile with `backend`, or the
    module itself for COMPILER none) and every input set's arguments as tensors on DEVICE."""
    stage("import")
    try:
        params = {n: np.array(sets[0][n], copy=True) for n in PARAMS}
        model = (Model if model_class is None else model_class)(params).to(DEVICE).eval()
        program = torch.compile(model, backend=backend, fullgraph=FULLGRAPH, dynamic=DYNAMIC) \
            if COMPILER != "none" else model  # none: run eagerly (localization)
        args = [[torch.from_numpy(np.array(s[n], copy=True)).to(DEVICE) for n in INPUTS]
                for s in sets]
    except Exception as e:
        failed(e)
    return model, program, args


def first_call_stage() -> str:
    """The stage of the first call: compile, except for a program run eagerly, where it
    compiles nothing and is the stage the failure expects (an Inductor finding's compile, an
    eager one's run), so the judgement compares like with like."""
    return "compile" if COMPILER != "none" or EXPECT.get("stage") != "run" else "run"


def describe(program: str, device: str) -> str:
    """What is compiled, how, on which device (the script's first line)."""
    if COMPILER == "none":
        return (f"torch {torch.__version__}: {program or 'the module'} run eagerly, without "
                f"torch.compile (COMPILER='none'), on {device}")
    return (f"torch {torch.__version__}: torch.compile({program}backend={COMPILER!r}, "
            f"fullgraph={FULLGRAPH}, dynamic={DYNAMIC}), cpp_wrapper={CPP_WRAPPER}, on {device}")


def set_training_flags() -> None:
    """The failing configuration's AOT autograd options (`torch._functorch.config`), as the
    fuzzer set them for its compiles."""
    if not TRAINING_FLAGS:
        return
    import torch._functorch.config as fcfg

    for key, value in TRAINING_FLAGS.items():
        setattr(fcfg, key, value)
    print("torch._functorch.config:", TRAINING_FLAGS, flush=True)



# ---- localization (`repro.py --localize`: localize.py runs the body's `ablate`) ----------------

#: the stages before Inductor, each a torch.compile backend that stops earlier (the order of
#: torch's CompilerBisector), and what it means when one already fails the same way
STAGES = (
    ("eager", "dynamo", "Dynamo's graph capture: backend='eager' (Dynamo alone) fails the same "
                        "way"),
    ("aot_eager", "aot_eager", "AOT autograd (functionalization, the joint graph): "
                               "backend='aot_eager' fails the same way, 'eager' passes"),
    ("aot_eager_decomp_partition", "inductor",
     "decompositions/partitioner: backend='aot_eager_decomp_partition' (Inductor's "
     "decompositions and partitioner, no Inductor codegen) fails the same way, 'aot_eager' "
     "passes"),
)


def _bisect_files(root: str, backend: str, subsystem: str, state: str,
                  low: int | None = None) -> dict[str, str]:
    """The environment of a run that CompilerBisector drives from its files (under
    TORCHINDUCTOR_CACHE_DIR/bisect): `find_max_bounds` counts the subsystem's applications,
    `bisect` with low = high = N applies the first N + 1 and records the N-th's debug info."""
    os.makedirs(os.path.join(root, "bisect", backend), exist_ok=True)
    with open(os.path.join(root, "bisect", backend, f"{subsystem}_run_state.txt"), "w") as f:
        f.write(state)
    if low is not None:
        with open(os.path.join(root, "bisect", backend, f"{subsystem}_bisect_range.txt"),
                  "w") as f:
            f.write(f"low={low}\nhigh={low}\n")
    return {"TORCH_BISECT_BACKEND": backend, "TORCH_BISECT_SUBSYSTEM": subsystem,
            "TORCHINDUCTOR_CACHE_DIR": root}


def _read_file(root: str, backend: str, name: str) -> list[str]:
    path = os.path.join(root, "bisect", backend, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def bisect_subsystem(probe: Probe, backend: str, subsystem: str,
                     values: dict[str, Any]) -> tuple[str | None, str]:
    """torch's CompilerBisector on one subsystem of `backend` (pre_grad_passes, lowerings,
    decomposition, ...), each step a fresh run of this script with its environment
    variables: switched off whole (TORCH_BISECT_MAX=-1), then, when that passes, its
    applications counted and bisected to the first whose application makes the failure
    come back. Returns (what, why); what is None when switching it off does not help."""
    env = {"TORCH_BISECT_BACKEND": backend, "TORCH_BISECT_SUBSYSTEM": subsystem}
    off = probe.run(f"{backend}: every {subsystem} switched off (TORCH_BISECT_MAX=-1)",
                    values, {**env, "TORCH_BISECT_MAX": "-1"})
    if off != PASSES:
        return None, f"{subsystem} off: {off}"
    with tempfile.TemporaryDirectory() as root:
        count_dir, info_dir = os.path.join(root, "count"), os.path.join(root, "info")
        counted = probe.run(f"{backend}: {subsystem} applications counted",
                            values, _bisect_files(count_dir, backend, subsystem,
                                                  "find_max_bounds"))
        bounds = [line for line in _read_file(count_dir, backend,
                                              f"{subsystem}_bisect_range.txt")
                  if line.startswith("high=")]
        if counted != SAME:  # then switching it off showed nothing
            return None, (f"every {subsystem} off passes, but so does CompilerBisector's "
                          f"counting run, which switches nothing off (it {counted}): no "
                          "evidence")
        if not bounds:
            return subsystem, (f"switching off every {subsystem} makes it pass; its "
                               "applications could not be counted")
        low, high = 0, int(bounds[-1].split("=")[1])
        count = high + 1  # applications, numbered from 0
        while low < high:  # MAX=low-1 does not fail the same way, MAX=high does
            mid = (low + high) // 2
            fares = probe.run(f"{backend}: the first {mid + 1} {subsystem} applied "
                              f"(TORCH_BISECT_MAX={mid})", values,
                              {**env, "TORCH_BISECT_MAX": str(mid)})
            if fares == SAME:
                high = mid
            else:
                low = mid + 1
        shown = probe.run(f"{backend}: {subsystem} #{low} and those before it applied "
                          "(its debug info)", values,
                          _bisect_files(info_dir, backend, subsystem, "bisect", low))
        info = [line.partition("=")[2] for line in
                _read_file(info_dir, backend, f"{subsystem}_call_counter_debug_info.txt")
                if line.partition("=")[0] == str(low)]
    name = info[-1] if info else "?"
    return (f"{subsystem}: {name} (bisect number {low} of {count})",
            f"every {subsystem} switched off passes; with its first {low} applied it passes, "
            f"with the first {low + 1} it fails the same way (the debug-info run: {shown})")


def _configuration() -> list[tuple[str, str, Any]]:
    """The drawn configuration's options: (label, per-test value, key of a flag or None)."""
    out: list[tuple[str, str, Any]] = [(f"{k}={v}", "FLAGS", k) for k, v in FLAGS.items()]
    if CPP_WRAPPER:
        out.append(("cpp_wrapper", "CPP_WRAPPER", None))
    if DYNAMIC is not False:
        out.append((f"dynamic={DYNAMIC}", "DYNAMIC", None))
    if MODE is not None:
        out.append((f"mode={MODE}", "MODE", None))
    out += [(f"{k}={v}", "TRAINING_FLAGS", k) for k, v in TRAINING_FLAGS.items()]
    return out


def smallest_configuration(probe: Probe) -> tuple[list[str], list[str]]:
    """The drawn options the failure needs: each put back to its default (a flag dropped,
    cpp_wrapper off, dynamic False, mode None) while it still fails the same way, greedily, in
    order. Returns (needed, what each kept one's run gave): `needed` holds the options whose
    removal makes it pass. One whose removal makes it fail another way is kept (the failure's
    form needs it) but not named: the fault is still there without it (F22 under the Python
    wrapper fails its stride check instead; F47's duplicate buffer gives a wrong result)."""
    defaults = {"CPP_WRAPPER": False, "DYNAMIC": False, "MODE": None}
    current: dict[str, Any] = {"FLAGS": dict(FLAGS), "TRAINING_FLAGS": dict(TRAINING_FLAGS)}
    needed, notes = [], []
    for label, name, key in _configuration():
        trial = {**current}
        if key is None:
            trial[name] = defaults[name]
        else:
            trial[name] = {k: v for k, v in current[name].items() if k != key}
        changed = {n: v for n, v in trial.items()
                   if v != {"FLAGS": FLAGS, "TRAINING_FLAGS": TRAINING_FLAGS}.get(n, v)
                   or n in defaults}
        fares = probe(f"without {label}", **changed)
        if fares == SAME:
            current = trial
        else:  # the failure needs it; without it the program may still fail another way
            if fares == PASSES:
                needed.append(label)
            notes.append(f"without {label} it {fares}")
    return needed, notes


def _eager_at_fault() -> tuple[str | None, str]:
    """The program fails the same way run eagerly. The reference (expected.npz) ran the same
    graph in the python dialect, where control flow is Python's and no higher-order op runs:
    what only this program does is call the higher-order ops (their eager forward and their
    autograd rule), so one kind of them is the culprit; several kinds, or none, are not
    localized. A mismatch needs its reference confirmed (truth.npz, the float64 shadow's
    results: an element fails only when off both): a wrong reference fails alike too."""
    why = ("it fails the same way without torch.compile (this program run eagerly): no stage "
           "of the compiler is at fault")
    if EXPECT.get("verdict") == "mismatch" and not os.path.exists(os.path.join(HERE,
                                                                               "truth.npz")):
        return None, (f"{why}; torch eager itself computes it so, or the reference "
                      f"(expected.npz, with no float64 truth beside it) is not what torch "
                      f"computes here")
    what = "its autograd rule or eager forward" if GRADIENTS else "its eager forward"
    if len(HIGHER_ORDER_OPS) == 1:
        hop = HIGHER_ORDER_OPS[0]
        return (f"torch: {hop} run eagerly ({what})",
                f"{why}; the reference ran the same graph with Python control flow, and the "
                f"only higher-order op this program calls is {hop}")
    if HIGHER_ORDER_OPS:
        return None, (f"{why}; it calls {len(HIGHER_ORDER_OPS)} kinds of higher-order op "
                      f"({', '.join(HIGHER_ORDER_OPS)}): which one, the script cannot switch "
                      f"to Python control flow to tell")
    return None, (f"{why}, and it calls no higher-order op: torch eager itself computes it "
                  f"so, or the reference (expected.npz) is not what torch computes here")


def ablate_compile(probe: Probe) -> tuple[str | None, str]:
    """The torch.compile plan: is it the compiler at all (COMPILER none), then the first stage
    that fails the same way (eager: Dynamo; aot_eager: AOT autograd;
    aot_eager_decomp_partition: Inductor's decompositions and partitioner), then within
    Inductor the smallest set of the drawn options that still fails (a needed one, such as
    the C++ wrapper, is the culprit), then torch's CompilerBisector (its config changes and
    subsystems, read from the installed torch)."""
    eager = SAME if COMPILER == "none" else probe("no torch.compile (COMPILER=none: run "
                                                  "eagerly)", COMPILER="none")
    if eager == SAME:
        return _eager_at_fault()
    seen = ["without torch.compile it passes"]
    names = [name for name, _, _ in STAGES]
    upto = (len(STAGES) if COMPILER == "inductor" else
            names.index(COMPILER) + 1 if COMPILER in names else 0)
    for name, culprit, why in STAGES[:upto]:
        # the failing backend's own stage is the run that failed
        fares = SAME if name == COMPILER else probe(f"COMPILER={name}", COMPILER=name)
        if fares == SAME:
            if name == "aot_eager_decomp_partition":
                return _decompositions(probe, "; ".join([*seen, why]))
            return f"{culprit}: {why.split(':')[0]}", "; ".join([*seen, why])
        seen.append(f"{name} {fares}")
    if COMPILER != "inductor":
        return None, f"{'; '.join(seen)}; no plan for COMPILER={COMPILER}"
    # a drawn option the failure needs (the C++ wrapper, a flag) names the code at fault
    # before any pass does: without it Inductor compiles the program right
    needed, flag_notes = smallest_configuration(probe)
    if needed:
        return (f"inductor: {', '.join(needed)}",
                f"{'; '.join(seen)}; only Inductor fails; the smallest set of the drawn "
                f"options that still fails: {', '.join(needed)} ({'; '.join(flag_notes)})")
    found, notes = _inductor_subsystems(probe)
    what = f"{'; '.join(seen)}; only Inductor fails" + (
        f"; drawn options kept, none alone the fault: {'; '.join(flag_notes)}"
        if flag_notes else "")
    if found is not None:
        return found, f"{what}; {notes}"
    drawn = _configuration()
    return None, (f"{what}; CompilerBisector: {notes}; "
                  + ("it fails the same way with none of the drawn options"
                     if drawn else "no drawn options to drop")
                  + ": no single pass, subsystem or option is at fault")


def _decompositions(probe: Probe, why: str) -> tuple[str | None, str]:
    """aot_eager_decomp_partition fails, aot_eager passes: the partitioner's CSE, or which
    decomposition (CompilerBisector's subsystems of that backend)."""
    stage = {"COMPILER": "aot_eager_decomp_partition"}
    fares = probe("COMPILER=aot_eager_decomp_partition, functorch cse=False",
                  **stage, TRAINING_FLAGS={**TRAINING_FLAGS, "cse": False})
    if fares == PASSES:
        return "inductor: partitioner: cse", f"{why}; with torch._functorch.config.cse=False it passes"
    found, bisected = bisect_subsystem(probe, "aot_eager_decomp_partition", "decomposition",
                                       stage)
    if found is not None:
        return f"inductor: {found}", f"{why}; {bisected}"
    return "inductor: decompositions/partitioner", (f"{why}; cse=False {fares}; {bisected}: "
                                                    "no single decomposition named")


def _inductor_subsystems(probe: Probe) -> tuple[str | None, str]:
    """CompilerBisector's subsystems of Inductor, in its order: a config change (the flag set
    as it says: layout_optimization=False, ...) or a subsystem switched off that makes the
    failure pass, bisected to its application."""
    from torch._inductor import compiler_bisector as cb

    notes = []
    for sub in cb.BACKENDS["inductor"]:
        if isinstance(sub, cb.ConfigChange):
            if FLAGS.get(sub.config_field, object()) == sub.config_value:
                continue
            fares = probe(f"inductor: {sub.config_field}={sub.config_value}",
                          FLAGS={**FLAGS, sub.config_field: sub.config_value})
            if fares == PASSES:
                return (f"inductor: {sub.config_field}",
                        f"with torch._inductor.config.{sub.config_field}={sub.config_value} "
                        "it passes (CompilerBisector's config change)")
            notes.append(f"{sub.config_field}={sub.config_value} {fares}")
        elif sub.name == "cudagraphs" and DEVICE != "cuda" or sub.name == "pre_grad_graph":
            continue
        else:
            found, why = bisect_subsystem(probe, "inductor", sub.name, {})
            if found is not None:
                return f"inductor: {found}", why
            notes.append(why)
    return None, "; ".join(notes)
