"""torch.onnx.export of the graph's module (stage import), then ONNX Runtime on the exported
model (compile: the session, run: every input set), as `OnnxExportBackend` does.

Its localization (`ablate`) stops the exporter after one of its steps (UNTIL) and judges what
it has: torch.export's program run, the same after the exporter's decompositions, the ONNX
translation without the optimizer in ORT; when only the optimized model fails, the onnx_ir
passes of the optimizer are switched off (SKIP_PASSES) to find the one at fault."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from campaign.backends.ort.session import ort_session
from campaign.backends.repro_scripts.localize import PASSES, SAME, Probe, one_at_fault
from campaign.backends.repro_scripts.model import Model
from campaign.backends.repro_scripts.prelude import (
    EXPECT,
    INPUTS,
    PARAMS,
    failed,
    finish,
    input_sets,
    stage,
)

# ---- per-test values
#: the exporter (dynamo=True: torch.export, with or without onnxscript's optimizer; False:
#: TorchScript), the opset (None: the exporter's default), ORT's graph optimizations and device
DYNAMO = True
OPTIMIZE = True
OPSET: int | None = None
OPT_LEVEL = "all"
DEVICE = "cpu"
# ---- end of per-test values
#: the localization's switches (`--set`; not the test's): where the export stops, None the
#: whole export; "export" torch.export's program, "decompositions" after the exporter's
#: decompositions (both run in torch), "translation" the ONNX model as torchlib writes it
#: (no opset conversion, no optimizer), "conversion" with the opset conversion
#: (onnxscript's version_converter, which the exporter runs whenever the opset differs
#: from torchlib's: by default 18 -> 20), run in ORT; and the onnx_ir passes (class names)
#: switched off
UNTIL: str | None = None
SKIP_PASSES: list[str] = []


def exporter() -> str:
    """How the model is exported, as words."""
    note = f"dynamo=True, optimize={OPTIMIZE}" if DYNAMO else "dynamo=False"
    return note + (f", opset_version={OPSET}" if OPSET is not None else "")


def patch_passes(skip: list[str], seen: list[str] | None = None) -> None:
    """Every onnx_ir pass (`PassBase.__call__`) whose class is named in `skip` does nothing;
    `seen` collects the class names of the passes run (containers left out)."""
    import onnx_ir as ir

    original = ir.passes.PassBase.__call__

    def call(self: Any, model_or_result: Any, /) -> Any:
        name = type(self).__name__
        if seen is not None and not isinstance(self, ir.passes.Sequential):
            seen.append(name)
        if name in skip:
            model = (model_or_result.model if isinstance(model_or_result, ir.passes.PassResult)
                     else model_or_result)
            return ir.passes.PassResult(model, modified=False)
        return original(self, model_or_result)

    ir.passes.PassBase.__call__ = call  # type: ignore[method-assign]


def conversion_module() -> Any:
    """The onnxscript module whose `convert_version` the exporter calls."""
    import importlib

    from torch.onnx._internal._lazy_import import onnxscript_apis

    return importlib.import_module(onnxscript_apis._name)  # type: ignore[attr-defined]


def switch_off_conversion() -> Any:
    """The exporter's opset conversion does nothing; returns the function it replaced."""
    module = conversion_module()
    original = module.convert_version
    module.convert_version = lambda model, target_version: model
    return original


def exported_program(model: Any, args: tuple[Any, ...]) -> Any:
    """torch.export's program of `model` (non-strict: the exporter's first capture
    strategy), after the exporter's decompositions when UNTIL says so."""
    program = torch.export.export(model, args, strict=False)
    if UNTIL == "decompositions":
        from torch.onnx._internal.exporter import _core, _registration

        program = _core._prepare_exported_program_for_export(
            program, registry=_registration.ONNXRegistry.from_torchlib())
    return program


def export(model: Any, args: tuple[Any, ...]) -> bytes:
    """The ONNX model of `model` called on `args`, serialized."""
    opset: dict[str, Any] = {"opset_version": OPSET} if OPSET is not None else {}
    if DYNAMO:
        if SKIP_PASSES:
            patch_passes(SKIP_PASSES)
        if UNTIL == "translation":
            switch_off_conversion()
        program = torch.onnx.export(model, args, dynamo=True,
                                    optimize=OPTIMIZE and UNTIL not in ("translation",
                                                                        "conversion"),
                                    verbose=False, report=False, **opset)
        assert program is not None  # dynamo=True returns the program
        return program.model_proto.SerializeToString()
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.onnx")
        torch.onnx.export(model, args, path, dynamo=False, verbose=False, **opset)
        with open(path, "rb") as f:
            return f.read()


def main() -> None:
    import contextlib
    import io
    import logging
    import warnings

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__} torch.onnx.export({exporter()}), "
          f"onnxruntime {ort.__version__} ({OPT_LEVEL!r})", flush=True)
    sets = input_sets()
    args = [tuple(torch.from_numpy(np.array(s[n], copy=True)) for n in INPUTS) for s in sets]
    stage("import")
    if UNTIL in ("export", "decompositions"):
        run_in_torch(sets, args)
    try:
        model = Model({n: np.array(sets[0][n], copy=True) for n in PARAMS}).eval()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            model_bytes = export(model, args[0])
    except Exception as e:
        failed(e)
    stage("compile")
    try:
        sess = ort_session(model_bytes, OPT_LEVEL, DEVICE)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        names = [i.name for i in sess.get_inputs()]
        for xs in args:
            if len(names) != len(xs):
                raise RuntimeError(f"exported model has {len(names)} inputs, the graph has {len(xs)}")
            outs += sess.run(None, {n: a.numpy() for n, a in zip(names, xs, strict=True)})
    except Exception as e:
        failed(e)
    finish(outs)



def run_in_torch(sets: list[dict[str, Any]], args: list[tuple[Any, ...]]) -> None:
    """UNTIL export or decompositions: the exported program run in torch, judged."""
    import warnings

    print(f"[repro] the export stops after {UNTIL}: its program is run in torch", flush=True)
    try:
        model = Model({n: np.array(sets[0][n], copy=True) for n in PARAMS}).eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = exported_program(model, args[0]).module()
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        for xs in args:
            outs += [o.detach().numpy() for o in program(*xs)]
    except Exception as e:
        failed(e)
    finish(outs)


#: the exporter's steps, in order: (UNTIL, culprit, what a failure there means)
EXPORT_STEPS = (
    ("export", "torch.onnx: torch.export",
     "torch.export's program (strict=False), run in torch, fails the same way"),
    ("decompositions", "torch.onnx: decompositions",
     "after the exporter's decompositions (run_decompositions with the ONNX registry's "
     "table) the program fails the same way"),
    ("translation", "torch.onnx: ONNX translation",
     "the ONNX model as torchlib translates it (no opset conversion, no optimizer) fails the "
     "same way"),
    ("conversion", "torch.onnx: opset conversion",
     "with the opset conversion (onnxscript's version_converter) it fails the same way"),
)


def ablate(probe: Probe) -> tuple[str | None, str]:
    """The exporter's plan: the first of its steps (EXPORT_STEPS) after which the failure is
    there; a model that fails in ORT only when ORT optimizes it (OPT_LEVEL disabled passes)
    is ORT's; the opset conversion or onnxscript's optimizer at fault: the onnx_ir pass
    whose switching off alone makes it pass."""
    if not DYNAMO:
        return None, ("the TorchScript exporter (dynamo=False) has no steps this plan can stop "
                      "after")
    seen: list[str] = []
    for until, culprit, why in EXPORT_STEPS:
        if until == "conversion" and not OPTIMIZE:
            fares = SAME  # the failing run itself: optimize=False
        else:
            fares = probe(f"the export stopped after {until}", UNTIL=until)
        if fares != SAME:
            seen.append(f"after {until} it {fares}")
            continue
        if until in ("translation", "conversion") and EXPECT["stage"] != "import" \
                and OPT_LEVEL != "disabled":
            ort = probe(f"the export stopped after {until}, in ORT without graph "
                        "optimizations", UNTIL=until, OPT_LEVEL="disabled")
            if ort == PASSES:
                return (f"onnxruntime: graph optimizations (level {OPT_LEVEL})",
                        f"{'; '.join(seen)}; {why}, but passes in ORT with its graph "
                        "optimizations disabled")
            why += f"; ORT without graph optimizations {ort}"
        if until == "conversion":
            return step_passes(probe, until, culprit, "; ".join([*seen, why]))
        return culprit, "; ".join([*seen, why])
    return step_passes(probe, "optimizer", "torch.onnx: optimizer",
                       "; ".join([*seen, "only the optimized model fails the same way"]))


def step_passes(probe: Probe, step: str, culprit: str, why: str) -> tuple[str | None, str]:
    """The opset conversion or the optimizer fails: the onnx_ir passes it runs on this model
    (found by running that step here, in this process), switched off by bisection."""
    import contextlib
    import io
    import warnings

    names: list[str] = []
    try:
        sets = input_sets()
        args = tuple(torch.from_numpy(np.array(sets[0][n], copy=True)) for n in INPUTS)
        model = Model({n: np.array(sets[0][n], copy=True) for n in PARAMS}).eval()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            convert = switch_off_conversion()
            program = torch.onnx.export(model, args, dynamo=True, optimize=False,
                                        verbose=False, report=False)
            assert program is not None
            conversion_module().convert_version = convert
            target = OPSET if OPSET is not None else torch.onnx._constants.ONNX_DEFAULT_OPSET
            if step == "optimizer":
                program.model = convert(program.model, target)
            patch_passes([], names)
            if step == "optimizer":
                program.optimize()
            else:
                convert(program.model, target)
    except Exception as e:  # the step may fail here too: the passes it entered are candidates
        print(f"[localize] the {step} run here: {type(e).__name__}: {str(e)[:200]}",
              flush=True)
    if not names:
        return None, f"{why}; the {step} ran no onnx_ir pass that could be switched off"
    print(f"[localize] onnx_ir passes the {step} runs: {', '.join(dict.fromkeys(names))}",
          flush=True)
    found, bisected = one_at_fault(probe, names, lambda subset: (
        f"onnx_ir passes switched off: {', '.join(subset)}", {"SKIP_PASSES": subset}, {}))
    if found is None:
        return (culprit if step == "conversion" else None), f"{why}; {bisected}"
    return f"{culprit}: onnx_ir {found}", f"{why}; {bisected}"
