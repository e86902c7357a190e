"""torch.compile as the fuzzer's Inductor backend runs it (`InductorBackend`): its process-wide
options, the backend argument of the failing configuration, AOT autograd's options. Shared by
the repro of a test (`inductor`) and of a transform test (`inductor_transform`), and so is the
localization plan both bodies run (`ablate_compile`, docs/triage.md "Where the fault is")."""
from __future__ import annotations

import os
import sys
import tempfile
import types
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
    done,
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

# ---- localization switches (`--set NAME=<json>`, as the plan's runs set them; every script
# has them so: docs/triage.md, "Where the fault is")
#: the program's compile regions (`torch.compiler.nested_compile_region` functions): "marked"
#: as printed; "unmarked": each region function called plainly (Dynamo inlines its body);
#: "no_reuse": marked, but Dynamo never stamps out a region it traced for one call at another
#: (its reuse lookup finds nothing: every call traced anew); "inlined": marked, and Dynamo's
#: invoke_subgraph calls put back in place before the backend gets the graph
#: (`torch._dynamo.config.inline_invoke_subgraph`)
REGIONS = "marked"


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
        model_class = Model if model_class is None else model_class
        use_regions(model_class)
        model = model_class(params).to(DEVICE).eval()
        program = torch.compile(model, backend=backend, fullgraph=FULLGRAPH, dynamic=DYNAMIC) \
            if COMPILER != "none" else model  # none: run eagerly (localization)
        args = [[torch.from_numpy(np.array(s[n], copy=True)).to(DEVICE) for n in INPUTS]
                for s in sets]
    except Exception as e:
        failed(e)
    return model, program, args


def program_namespace(model_class: Any) -> dict[str, Any]:
    """The module namespace of the program that defines `model_class` (its functions, custom
    ops and compile regions)."""
    found = getattr(getattr(model_class, "forward", None), "__globals__", None)
    return found if isinstance(found, dict) else vars(sys.modules[model_class.__module__])


def region_functions(namespace: dict[str, Any]) -> dict[str, Any]:
    """The program's compile regions: each name bound to a function marked
    `torch.compiler.nested_compile_region`, with the plain function it marks."""
    out = {}
    for name, value in namespace.items():
        plain = value
        while isinstance(plain, types.FunctionType) \
                and hasattr(plain, "__marked_compile_region_fn__"):
            plain = plain.__marked_compile_region_fn__
        if plain is not value:
            out[name] = plain
    return out


def mutating_custom_ops(namespace: dict[str, Any]) -> list[str]:
    """The custom ops the program calls (the names it binds to `torch.ops.<ns>.<op>`) whose
    schema writes an argument (`torch.library.custom_op(..., mutates_args=...)`)."""
    return sorted(value._qualified_op_name for value in namespace.values()
                  if isinstance(value, torch._ops.OpOverloadPacket)
                  and not value._qualified_op_name.startswith(("aten::", "prims::"))
                  and any(getattr(value, o)._schema.is_mutable for o in value.overloads()))


def use_regions(model_class: Any) -> None:
    """Make the compile regions of the program that defines `model_class` what REGIONS says
    (nothing to do when they stay marked; a torch without the switch fails otherwise)."""
    if REGIONS == "marked":
        return
    if REGIONS == "unmarked":  # the names the program calls bound to the plain functions
        for name, plain in region_functions(program_namespace(model_class)).items():
            program_namespace(model_class)[name] = plain
    elif REGIONS == "no_reuse":
        from torch._dynamo.variables import invoke_subgraph

        if not hasattr(invoke_subgraph, "has_reuse_entries"):
            done(2, f"DIFFERENT FAILURE: REGIONS={REGIONS!r}: torch {torch.__version__} has "
                    "no region reuse lookup (torch._dynamo.variables.invoke_subgraph."
                    "has_reuse_entries)")
        invoke_subgraph.has_reuse_entries = lambda tx, fn_var: False
    elif REGIONS == "inlined":
        if not hasattr(torch._dynamo.config, "inline_invoke_subgraph"):
            done(2, f"DIFFERENT FAILURE: REGIONS={REGIONS!r}: torch {torch.__version__} has "
                    "no torch._dynamo.config.inline_invoke_subgraph")
        torch._dynamo.config.inline_invoke_subgraph = True
    else:
        done(2, f"DIFFERENT FAILURE: REGIONS={REGIONS!r}: not one of marked, unmarked, "
                "no_reuse, inlined")
    print(f"[repro] compile regions: {REGIONS}", flush=True)


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


def _eager_at_fault(probe: Probe, program: dict[str, Any]) -> tuple[str | None, str]:
    """The program fails the same way run eagerly. The reference (expected.npz) ran the same
    graph in the python dialect, where control flow is Python's and no higher-order op runs:
    what only this program does is call the higher-order ops (their eager forward and their
    autograd rule), so one kind of them is the culprit; several kinds, or none, are not
    localized, except that compile regions can be unmarked (REGIONS): passing so, the
    regions are the culprit; still failing alike with one other kind left, that one is. A
    mismatch needs its reference confirmed (truth.npz, the float64 shadow's results: an
    element fails only when off both): a wrong reference fails alike too."""
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
        kinds = (f"it calls {len(HIGHER_ORDER_OPS)} kinds of higher-order op "
                 f"({', '.join(HIGHER_ORDER_OPS)})")
        region = next((h for h in HIGHER_ORDER_OPS if h.endswith("nested_compile_region")),
                      None)
        unmarked = ""
        if region is not None and region_functions(program):
            fares = probe("no torch.compile, compile regions unmarked (each region function "
                          "called plainly)", COMPILER="none", REGIONS="unmarked")
            rest = [h for h in HIGHER_ORDER_OPS if h != region]
            if fares == PASSES:
                return (f"torch: {region} run eagerly ({what})",
                        f"{why}; {kinds}; with the compile regions unmarked (each region "
                        f"function called plainly) it passes")
            if fares == SAME and len(rest) == 1:
                return (f"torch: {rest[0]} run eagerly ({what})",
                        f"{why}; {kinds}; with the compile regions unmarked it still fails the "
                        f"same way, and the only other higher-order op it calls is {rest[0]}")
            unmarked = f"; with the compile regions unmarked it {fares}"
        return None, (f"{why}; {kinds}: which one, the script cannot switch to Python control "
                      f"flow to tell{unmarked}")
    return None, (f"{why}, and it calls no higher-order op: torch eager itself computes it "
                  f"so, or the reference (expected.npz) is not what torch computes here")


def ablate_compile(probe: Probe, program: dict[str, Any] | None = None
                   ) -> tuple[str | None, str]:
    """The torch.compile plan: is it the compiler at all (COMPILER none), then the first stage
    that fails the same way (eager: Dynamo; aot_eager: AOT autograd;
    aot_eager_decomp_partition: Inductor's decompositions and partitioner), then within
    Inductor the smallest set of the drawn options that still fails (a needed one, such as
    the C++ wrapper, is the culprit), then torch's CompilerBisector (its config changes and
    subsystems, read from the installed torch). At the first stage that fails, and before
    the bisector, the switches of what the program's extensions use (`extension_probes`: its
    compile regions, its custom ops that write) come first. `program`: the namespace of the
    torch program (default: this script's)."""
    program = globals() if program is None else program
    eager = SAME if COMPILER == "none" else probe("no torch.compile (COMPILER=none: run "
                                                  "eagerly)", COMPILER="none")
    if eager == SAME:
        return _eager_at_fault(probe, program)
    seen = ["without torch.compile it passes"]
    names = [name for name, _, _ in STAGES]
    upto = (len(STAGES) if COMPILER == "inductor" else
            names.index(COMPILER) + 1 if COMPILER in names else 0)
    for name, culprit, why in STAGES[:upto]:
        # the failing backend's own stage is the run that failed
        fares = SAME if name == COMPILER else probe(f"COMPILER={name}", COMPILER=name)
        if fares == SAME:
            found, ext = extension_probes(probe, name, program)
            if found is not None:
                return found, "; ".join([*seen, why, ext])
            why = "; ".join([why, *([ext] if ext else [])])
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
    what = f"{'; '.join(seen)}; only Inductor fails" + (
        f"; drawn options kept, none alone the fault: {'; '.join(flag_notes)}"
        if flag_notes else "")
    found, ext = extension_probes(probe, "inductor", program)
    if found is not None:
        return found, f"{what}; {ext}"
    what += f"; {ext}" if ext else ""
    found, notes = _inductor_subsystems(probe)
    if found is not None:
        return found, f"{what}; {notes}"
    drawn = _configuration()
    return None, (f"{what}; CompilerBisector: {notes}; "
                  + ("it fails the same way with none of the drawn options"
                     if drawn else "no drawn options to drop")
                  + ": no single pass, subsystem or option is at fault")


# ---- the extensions' switches (docs/extensions.md): compile regions, custom ops that write

#: the environment of a run with Inductor's re-inplacing pass switched off
#: (`torch._inductor.config.disabled_passes`, whose environment variable overrides any
#: setting: the pass skipped as GraphTransformObserver skips a disabled pass); every
#: auto_functionalized op then clones what it writes
REINPLACE_OFF = {"TORCHINDUCTOR_DISABLED_PASSES": "REINPLACE_INPLACEABLE_OPS"}
#: the environment of a run whose functionalization emits auto_functionalized (v1) for a
#: custom op that writes, not auto_functionalized_v2
#: (`torch._inductor.config.enable_auto_functionalized_v2`, read from it when torch loads)
AUTO_FUNCTIONALIZED_V1 = {"TORCHDYNAMO_AUTO_FUNCTIONALIZED_V2": "0"}

#: who handles a region's invoke_subgraph at each stage that may fail first, and how
INVOKE_SUBGRAPH = {
    "eager": "torch: invoke_subgraph run eagerly",
    "aot_eager": "aot_eager: invoke_subgraph (AOT autograd's tracing of the region)",
    "aot_eager_decomp_partition": "inductor: invoke_subgraph (decompositions/partitioner)",
    "inductor": "inductor: invoke_subgraph (the region's subgraph compiled)",
}


def extension_probes(probe: Probe, stage: str, program: dict[str, Any]
                     ) -> tuple[str | None, str]:
    """At `stage`, the first that fails the same way (its backend; inductor: the failing
    configuration), the switches of what the program's extensions use: its compile regions
    (`_regions`), then its custom ops that write (`_custom_ops`). Returns (culprit or None,
    what the runs showed; empty when the program has neither)."""
    values = {} if stage == COMPILER else {"COMPILER": stage}
    notes = []
    if region_functions(program):
        found, why = _regions(probe, stage, values)
        if found is not None:
            return found, why
        notes.append(why)
    ops = mutating_custom_ops(program)
    if ops and stage != "eager":  # Dynamo alone calls the op as it is: nothing functionalized
        found, why = _custom_ops(probe, stage, values, ops)
        if found is not None:
            return found, why
        notes.append(why)
    return None, "; ".join(notes)


def _regions(probe: Probe, stage: str, values: dict[str, Any]) -> tuple[str | None, str]:
    """The program's compile regions at `stage`: unmarked (every region function called
    plainly); when that passes, the marks are needed, and Dynamo's reuse switched off alone
    (every call traced anew) tells a reused region at fault, then the regions' invoke_subgraph
    calls inlined before the backend tell the backend's handling of them from Dynamo's trace
    of the region."""
    at = f"COMPILER={stage}, " if values else ""
    unmarked = probe(f"{at}compile regions unmarked (each region function called plainly)",
                     **values, REGIONS="unmarked")
    if unmarked != PASSES:
        return None, f"with the compile regions unmarked it {unmarked}"
    shown = "with the compile regions unmarked it passes"
    no_reuse = probe(f"{at}compile regions marked, Dynamo's region reuse off (every call "
                     "traced anew)", **values, REGIONS="no_reuse")
    if no_reuse == PASSES:
        return ("dynamo: nested_compile_region (region reuse)",
                f"{shown}; marked, with Dynamo's reuse of a traced region off (every call "
                f"traced anew) it passes: a region traced for one call and stamped out at "
                f"another is at fault (its guards let it be reused where it does not fit)"
                + ("" if stage == "eager" else
                   f"; it shows from backend={stage!r} on, backend='eager' running the same "
                   f"reused graph right"))
    shown += f"; with Dynamo's region reuse off it {no_reuse}"
    inlined = probe(f"{at}compile regions marked, their invoke_subgraph calls inlined before "
                    "the backend (torch._dynamo.config.inline_invoke_subgraph)",
                    **values, REGIONS="inlined")
    if inlined == PASSES:
        return (INVOKE_SUBGRAPH[stage],
                f"{shown}; with the regions' invoke_subgraph calls inlined into the graph "
                f"before the backend it passes: backend={stage!r}'s handling of "
                f"invoke_subgraph is at fault, not Dynamo's trace of the region")
    shown += f"; with their invoke_subgraph calls inlined before the backend it {inlined}"
    if stage == "eager" and inlined == SAME:
        return ("dynamo: nested_compile_region (the region's trace)",
                f"{shown}: the graph Dynamo traced through the marked regions is at fault, "
                f"reused or not, as a subgraph or inlined")
    return None, (f"{shown}: the marks change the graph backend={stage!r} gets, and no "
                  f"switch of the regions alone makes it pass")


def _custom_ops(probe: Probe, stage: str, values: dict[str, Any],
                ops: list[str]) -> tuple[str | None, str]:
    """The program's custom ops that write (`ops`), at `stage`: functionalization turns each
    call into an auto_functionalized_v2 op (v1 under AUTO_FUNCTIONALIZED_V1), which Inductor's
    re-inplacing pass turns back into a write where it may (REINPLACE_OFF: every written
    argument cloned instead). A stage before Inductor runs no re-inplacing: only v1 is
    asked there."""
    at = f"COMPILER={stage}, " if values else ""
    what = f"the program's custom ops that write ({', '.join(ops)})"
    notes = []
    reinplace = None
    if stage == "inductor":
        reinplace = probe.run(f"{at}Inductor's re-inplacing pass off "
                              "(TORCHINDUCTOR_DISABLED_PASSES=REINPLACE_INPLACEABLE_OPS)",
                              values, REINPLACE_OFF)
        notes.append(f"with Inductor's re-inplacing pass off it {reinplace}")
    v1 = probe.run(f"{at}auto_functionalized v1 for custom ops that write "
                   "(TORCHDYNAMO_AUTO_FUNCTIONALIZED_V2=0)", values, AUTO_FUNCTIONALIZED_V1)
    notes.append(f"with auto_functionalized (v1) instead of v2 it {v1}")
    shown = f"{what}: {'; '.join(notes)}"
    if reinplace == PASSES:
        if v1 == PASSES:
            return ("inductor: reinplace (auto_functionalized_v2)",
                    f"{shown}: the re-inplacing of auto_functionalized_v2 ops is at fault")
        return ("inductor: reinplace (auto_functionalized)",
                f"{shown}: the re-inplacing pass is at fault, whichever auto_functionalized "
                f"form it gets")
    if v1 == PASSES:
        if stage == "aot_eager":
            return ("functionalization: auto_functionalized_v2",
                    f"{shown}: AOT autograd's functionalization of the custom ops into "
                    f"auto_functionalized_v2 is at fault")
        if stage == "aot_eager_decomp_partition":
            return ("inductor: auto_functionalized_v2 (decompositions/partitioner)",
                    f"{shown}: backend='aot_eager' runs the v2 graph right, Inductor's "
                    f"decompositions or partitioner make it wrong")
        return ("inductor: auto_functionalized_v2",
                f"{shown}: backend='aot_eager' runs the v2 graph right, Inductor compiles it "
                f"wrong, and not in its re-inplacing")
    return None, shown


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
