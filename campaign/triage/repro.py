"""Bug folders and standalone reproducers.

`write_bug_folder(dest, ...)` writes, for one bucket:
  - `graph.gir` (the reduced graph), `original.gir` (the finding's graph);
  - `model.onnx` (the reduced graph's ONNX model, params as initializers);
  - `inputs.npz` (every input and param of input set 0; `inputs_set<k>.npz`: graph inputs of
    further sets), `expected.npz` (the torch eager reference, `out<i>` over the sets in order),
    `truth.npz` (the float64 shadow, for mismatches), `actual.npz` (what the backend gave);
  - `info.json` (bucket key, the failing row, the reduction's log);
  - `repro.py`: imports only numpy and the backend's own library (onnxruntime; tvm (+ onnx to
    read the model); torch for Inductor; torch + onnxruntime for the torch.onnx exporter; torch
    + tvm for TVM's torch frontend) and
    prints the failure. Torch backends get the graph as plain torch code
    (`campaign.triage.torchgen`); ONNX backends load `model.onnx`.

`repro.py` prints `REPRODUCED: ...` and exits 1 when the failure happens, `NOT REPRODUCED`
(exit 0) when the backend now agrees with the reference, `DIFFERENT FAILURE: ...` (exit 2) for
another error; a signal kills it (the last `[repro] <stage>` line says where).
`check_repro(folder, verdict, error_class)` runs it in a fresh process where importing dynsmith
fails, and says whether it reproduced the verdict.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from campaign.testcase import npz_bytes

#: how a repro is judged: "reproduced", "not reproduced", "different failure", "error",
#: "timeout" (reproduces a timeout verdict), "none" (no repro for this backend)
REPRO_OK = "reproduced"


def backend_kind(spec: str) -> tuple[str, dict[str, Any]]:
    """(kind, options) of a backend spec: kind is ort, tvm, tvm_torch, inductor, onnx_export
    or other."""
    from campaign.backends import make_backend
    from campaign.backends.inductor import InductorBackend
    from campaign.backends.onnx_export import OnnxExportBackend
    from campaign.backends.ort import OrtBackend
    from campaign.backends.tvm import TvmBackend
    from campaign.backends.tvm_torch import TvmTorchBackend

    try:
        b = make_backend(spec)
    except Exception:
        return "other", {}
    if isinstance(b, OrtBackend):
        return "ort", {"opt_level": b.opt_level, "device": b.target,
                       "disabled_optimizers": list(b.disabled_optimizers),
                       "execution_mode": b.execution_mode, "threads": b.threads}
    if isinstance(b, TvmBackend):
        return "tvm", {"target": b.tvm_target, "opt_level": b.opt_level, "pipeline": b.pipeline,
                       "mcpu": b.mcpu}
    if isinstance(b, TvmTorchBackend):
        return "tvm_torch", {"target": b.tvm_target, "opt_level": b.opt_level,
                             "pipeline": b.pipeline, "mcpu": b.mcpu, "dialect": b.dialect,
                             "form": b.form}
    if isinstance(b, InductorBackend):
        return "inductor", {"device": b.target, "fullgraph": b.fullgraph, "dynamic": b.dynamic,
                            "dialect": b.dialect, "cpp_wrapper": b.cpp_wrapper,
                            "mode": b.mode, "flags": dict(b.flags), "form": b.form,
                            "compiler": b.compiler, "training_flags": dict(b.training_flags)}
    if isinstance(b, OnnxExportBackend):
        return "onnx_export", {"optimize": b.optimize, "opt_level": b.opt_level,
                               "device": b.target, "dialect": b.dialect, "opset": b.opset,
                               "dynamo": b.dynamo, "form": b.form}
    return "other", {}


_PRELUDE = '''
import faulthandler
import os
import re
import sys

import numpy as np

faulthandler.enable()
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECT = {expect}
#: (rtol, atol) per graph output (then per gradient, for a gradient test):
#: |actual - expected| <= atol + rtol * |expected|
TOLERANCES = {tolerances}
#: what each result of an input set is
LABELS = {labels}
#: a gradient test (outputs, then the leaves' gradients: train_step)
GRADIENTS = {gradients}
INPUTS = {inputs}
PARAMS = {params}
STAGE = None
#: exception types that only wrap the real error (their first line is generic)
WRAPPERS = ("BackendCompilerFailed", "InternalTorchDynamoError", "TorchExportError",
            "ConversionError")


def load(name):
    with np.load(os.path.join(HERE, name), allow_pickle=False) as z:
        return {{k: z[k] for k in z.files}}


def input_sets():
    """Every input set: set 0 holds inputs and params, later sets new graph inputs."""
    base = load("inputs.npz")
    sets, k = [base], 1
    while os.path.exists(os.path.join(HERE, f"inputs_set{{k}}.npz")):
        sets.append({{**base, **load(f"inputs_set{{k}}.npz")}})
        k += 1
    return sets


def stage(name):
    global STAGE
    STAGE = name
    print(f"[repro] {{name}}", flush=True)


def watchdog():
    """A timeout reproduces when there is still no result EXPECT["timeout_s"] seconds after
    main() started: the limit the hang was confirmed at plus a cold start."""
    if EXPECT["verdict"] != "timeout":
        return
    import threading

    wait = EXPECT["timeout_s"]
    print(f"[repro] expecting a timeout: reproduced if there is no result within {{wait:g}} s "
          f"({{EXPECT['timeout_note']}})", flush=True)

    def expire():
        print(f"REPRODUCED: timeout: no result within {{wait:g}} s (during {{STAGE}})",
              flush=True)
        faulthandler.dump_traceback(all_threads=True)  # where it hangs
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(wait, expire)
    timer.daemon = True
    timer.start()
    # should native code never release the GIL, faulthandler's own thread ends the process
    # (exit 1, "Timeout (...)!" and the stacks on stderr)
    faulthandler.dump_traceback_later(wait + {grace}, exit=True)


def root(e):
    for _ in range(8):
        if type(e).__name__ not in WRAPPERS:
            break
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if not isinstance(inner, BaseException):
            break
        e = inner
    return e


def done(code, text):
    print(text, flush=True)
    sys.exit(code)


def failed(e):
    e = root(e)
    first = (str(e).strip().splitlines() or [""])[0]
    what = f"{{type(e).__name__}} during {{STAGE}}: {{first}}"
    if (EXPECT["verdict"] == "crash" and type(e).__name__ == EXPECT["error_class"]
            and STAGE == EXPECT["stage"]):
        done(1, f"REPRODUCED: crash: {{what}}")
    done(2, f"DIFFERENT FAILURE: {{what}} (expected {{EXPECT['verdict']}} "
            f"{{EXPECT['error_class']}} during {{EXPECT['stage']}})")


def judge(outs):
    """Why the outputs are wrong (off the reference and, where known, off the float64 truth
    too), or None."""
    expected = load("expected.npz")
    truth = load("truth.npz") if os.path.exists(os.path.join(HERE, "truth.npz")) else {{}}
    if len(outs) != len(expected):
        return f"{{len(outs)}} outputs, expected {{len(expected)}}"
    for i, a in enumerate(outs):
        a, e = np.asarray(a), expected[f"out{{i}}"]
        if a.shape != e.shape or a.dtype != e.dtype:
            return (f"{{LABELS[i % len(LABELS)]}}: {{a.dtype}}{{list(a.shape)}}, "
                    f"expected {{e.dtype}}{{list(e.shape)}}")
        rtol, atol = TOLERANCES[i % len(TOLERANCES)]
        af, ef = a.astype(np.float64), e.astype(np.float64)
        bad = ~(np.abs(af - ef) <= atol + rtol * np.abs(ef))
        if f"out{{i}}" in truth:
            t = truth[f"out{{i}}"].astype(np.float64)
            bad &= ~(np.abs(af - t) <= atol + rtol * np.abs(t))
        if bad.any():
            err = np.abs(af - ef)[bad]
            where = [tuple(int(k) for k in ix) for ix in np.argwhere(bad)[:4]]
            shown = "; ".join(f"at {{ix}} got {{float(af[ix]):.9g}}, expected {{float(ef[ix]):.9g}}"
                             for ix in where)
            return (f"{{LABELS[i % len(LABELS)]}} (input set {{i // len(TOLERANCES)}}): "
                    f"{{int(bad.sum())}}/{{a.size}} "
                    f"elements differ, max abs err {{float(np.nanmax(err)) if err.size else 0:.3g}}; "
                    f"{{shown}}")
    return None


def finish(outs):
    problem = judge(outs)
    if problem is None:
        done(0, "NOT REPRODUCED: every output matches the reference")
    if EXPECT["verdict"] == "mismatch":
        done(1, f"REPRODUCED: mismatch: {{problem}}")
    done(2, f"DIFFERENT FAILURE: mismatch: {{problem}} (expected {{EXPECT['verdict']}})")
'''

#: a gradient test's training step (dynsmith docs/training.md), for the torch repros
_TRAIN = '''
#: the gradient test: L = sum over float outputs of <out_i, c_i>, differentiated with respect
#: to LEAVES (graph inputs and params); cotangents.npz holds each c_i ("s<k>/<output>" for
#: input set k). A result is the outputs, then the gradient of every leaf.
LEAVES = {leaves}
OUTPUTS = {outputs}


def train_step(fn, model, xs, k):
    """The outputs of fn(*xs), then the gradient of every leaf of L (zeros where none flows)."""
    import torch

    cts = {{name.partition("/")[2]: c for name, c in load("cotangents.npz").items()
           if name.startswith(f"s{{k}}/")}}
    xs = [x.detach().requires_grad_(True) if n in LEAVES else x for n, x in zip(INPUTS, xs)]
    with torch.enable_grad():
        outs = list(fn(*xs))
        named = dict(zip(INPUTS, xs))
        leaves = [named[n] if n in named else getattr(model, f"p_{{n}}") for n in LEAVES]
        terms = [(o * torch.from_numpy(cts[n]).to(o)).sum() for o, n in zip(outs, OUTPUTS)
                 if n in cts and o.requires_grad]
        if terms:
            grads = torch.autograd.grad(torch.stack(terms).sum(), leaves, allow_unused=True,
                                        materialize_grads=True)
        else:
            grads = [torch.zeros_like(x) for x in leaves]
    return [o.detach() for o in outs] + [g.detach() for g in grads]
'''

_ORT = '''
import onnxruntime as ort


def session(model, opt_level, device):
    so = ort.SessionOptions()
    so.intra_op_num_threads = {threads}
    so.inter_op_num_threads = {inter_op_threads}
{execution_mode_line}    so.log_severity_level = 3
    so.graph_optimization_level = {{
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }}[opt_level]
    providers = ["CUDAExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    return ort.InferenceSession(model, so, providers=providers{session_kwargs})


def main():
    print(f"onnxruntime {{ort.__version__}}, graph optimizations {opt_level!r}{config_note}",
          flush=True)
    sets = input_sets()
    stage("compile")
    try:
        sess = session(os.path.join(HERE, "model.onnx"), {opt_level!r}, {device!r})
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        for s in sets:
            outs += sess.run(None, {{n: s[n] for n in INPUTS}})
    except Exception as e:
        failed(e)
    finish(outs)
'''

#: compile and run of a Relax module, as `campaign.backends.tvm.RelaxBackend` does: shared by the
#: repros of every TVM backend (each imports its own way)
_TVM_RUN = '''
import tvm
from tvm import relax

#: the target: its name, or the llvm target of one CPU (`mcpu`)
TARGET = {target_spec!r}


def compile_and_run(mod, sets):
    """Compile `mod` (stage compile), run its main on every input set (stage run); the
    outputs of every set, in order."""
    stage("compile")
    try:
        target = tvm.target.Target(TARGET)
        pipeline = relax.get_default_pipeline(target) if {pipeline!r} == "fused" else "default"
        with tvm.transform.PassContext(opt_level={opt_level}):
            ex = tvm.compile(mod, target=target, relax_pipeline=pipeline)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        dev = tvm.cuda(0) if {target!r} == "cuda" else tvm.cpu(0)
        vm = relax.VirtualMachine(ex, dev)
        for s in sets:
            out = vm["main"](*[tvm.runtime.tensor(np.asarray(s[n]), dev) for n in INPUTS])
            outs += [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]
    except Exception as e:
        failed(e)
    return outs
'''

_TVM = '''
import onnx
from tvm.relax.frontend.onnx import from_onnx


def main():
    print(f"tvm {{tvm.__version__}}, target {{TARGET!r}}, opt_level {opt_level}, "
          f"pipeline {pipeline!r}", flush=True)
    sets = input_sets()
    stage("import")
    try:
        mod = from_onnx(onnx.load(os.path.join(HERE, "model.onnx")))
    except Exception as e:
        failed(e)
    finish(compile_and_run(mod, sets))
'''

_TVM_TORCH = '''
from tvm.relax.frontend.torch import from_exported_program


def main():
    import warnings

    torch.set_num_threads(1)
    print(f"torch {{torch.__version__}} torch.export.export, tvm {{tvm.__version__}} "
          f"from_exported_program, target {{TARGET!r}}, opt_level {opt_level}, "
          f"pipeline {pipeline!r}", flush=True)
    sets = input_sets()
    stage("import")
    try:
        model = Model({{n: np.array(sets[0][n], copy=True) for n in PARAMS}}).eval()
        args = tuple(torch.from_numpy(np.array(sets[0][n], copy=True)) for n in INPUTS)
        program = torch.export.export(model, args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = from_exported_program(program)
    except Exception as e:
        failed(e)
    finish(compile_and_run(mod, sets))
'''

_INDUCTOR = '''
def main():
    import torch._inductor.config as icfg

    torch.set_num_threads(1)
    icfg.compile_threads = 1
    icfg.fx_graph_cache = False
    icfg.cpp_wrapper = {cpp_wrapper}
{config_block}    print(f"torch {{torch.__version__}}: torch.compile(backend='{compiler}', fullgraph={fullgraph}, "
          f"dynamic={dynamic}), cpp_wrapper={cpp_wrapper}, on {device}", flush=True)
    sets = input_sets()
    stage("import")
    try:
        params = {{n: np.array(sets[0][n], copy=True) for n in PARAMS}}
        model = Model(params).to({device!r}).eval()
        compiled = torch.compile(model, backend={backend_expr}, fullgraph={fullgraph}, dynamic={dynamic})
        args = [[torch.from_numpy(np.array(s[n], copy=True)).to({device!r}) for n in INPUTS]
                for s in sets]
    except Exception as e:
        failed(e)

    def call(k, xs):
        if GRADIENTS:  # forward, then the compiled backward
            return train_step(compiled, model, [x.clone() for x in xs], k)
        with torch.no_grad():
            return compiled(*xs)

    outs = []
{training_block}    stage("compile")
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
'''

#: a transform test on Inductor (or the stage before it): torch.compile of the transformed
#: program (repro_parts/transform.py), on the CPU, as `InductorBackend._evaluate_transform`
_INDUCTOR_TRANSFORM = '''
def main():
    import torch._inductor.config as icfg

    torch.set_num_threads(1)
    icfg.compile_threads = 1
    icfg.fx_graph_cache = False
    icfg.cpp_wrapper = {cpp_wrapper}
{config_block}    print(f"torch {{torch.__version__}}: torch.compile(<transformed program>, backend='{compiler}', "
          f"fullgraph={fullgraph}, dynamic={dynamic}), cpp_wrapper={cpp_wrapper}, on cpu", flush=True)
    sets = input_sets()
    stage("import")
    try:
        model = Model({{n: np.array(sets[0][n], copy=True) for n in PARAMS}}).eval()
        program, args, what = transform_program(model, sets, INPUTS, OUTPUTS, HERE)
        print(f"[repro] the program: {{what}}", flush=True)
        compiled = torch.compile(program, backend={backend_expr}, fullgraph={fullgraph},
                                 dynamic={dynamic})
    except Exception as e:
        failed(e)
{training_block}    stage("compile")
    try:
        compiled(*args)
    except Exception as e:
        failed(e)
    stage("run")
    try:
        outs = [o.detach().cpu().numpy() for o in compiled(*args)]
    except Exception as e:
        failed(e)
    finish(outs)
'''

_ONNX_EXPORT = '''
import onnxruntime as ort


def main():
    import contextlib
    import io
    import logging
    import warnings

    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    print(f"torch {{torch.__version__}} torch.onnx.export({export_note}), "
          f"onnxruntime {{ort.__version__}} ({opt_level!r})", flush=True)
    sets = input_sets()
    args = [tuple(torch.from_numpy(np.array(s[n], copy=True)) for n in INPUTS) for s in sets]
    stage("import")
    try:
        model = Model({{n: np.array(sets[0][n], copy=True) for n in PARAMS}}).eval()
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
{export_block}
    except Exception as e:
        failed(e)
    stage("compile")
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        so.graph_optimization_level = {{
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }}[{opt_level!r}]
        providers = ["CUDAExecutionProvider"] if {device!r} == "cuda" else ["CPUExecutionProvider"]
        sess = ort.InferenceSession(model_bytes, so, providers=providers)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        names = [i.name for i in sess.get_inputs()]
        for xs in args:
            if len(names) != len(xs):
                raise RuntimeError(f"exported model has {{len(names)}} inputs, the graph has {{len(xs)}}")
            outs += sess.run(None, {{n: a.numpy() for n, a in zip(names, xs)}})
    except Exception as e:
        failed(e)
    finish(outs)
'''

_MAIN = '''

if __name__ == "__main__":
    watchdog()
    main()
'''

#: seconds faulthandler's watchdog waits beyond a timeout repro's own (when the GIL is held)
WATCHDOG_GRACE_S = 10


def repro_source(kind: str, opts: dict[str, Any], graph, expect: dict[str, Any],
                 tolerances: list[tuple[float, float]], header: str, seed: int = 0,
                 grad=None, transform=None) -> str:
    """The text of `repro.py` for a backend kind (see `backend_kind`); `grad`: a gradient
    test's `GradSpec` (its leaves; the cotangents go in the folder), which a backend that
    trains differentiates; `transform`: a transform test's `TransformSpec` (transform.json and
    transform.npz go in the folder), whose program Inductor compiles."""
    from campaign.triage.torchgen import torch_source
    from ir.materialize.form import DEFAULT_FORM

    transforms = transform is not None and kind == "inductor"
    trains = grad is not None and kind == "inductor" and not transforms
    labels = (transform.labels(graph) if transforms else grad.labels(graph) if trains else
              [f"output {i}" for i in range(len(graph.outputs))])
    prelude = _PRELUDE.format(expect=_pyrepr(expect), tolerances=_pyrepr(tolerances),
                              inputs=_pyrepr([v.name for v in graph.inputs]),
                              params=_pyrepr([p.name for p in graph.params]),
                              labels=_pyrepr(labels), gradients=trains,
                              grace=WATCHDOG_GRACE_S)
    if trains:
        prelude += _TRAIN.format(leaves=_pyrepr(list(grad.leaves)),
                                 outputs=_pyrepr(list(graph.outputs)))
    if transforms:
        prelude += f"OUTPUTS = {_pyrepr(list(graph.outputs))}\n\n" + part_source("ir.materialize.torch_func")
    if kind == "ort":
        body = _ORT.format(**{**opts, **_ort_config(opts)})
    elif kind == "tvm":
        opts = {**opts, **_tvm_config(opts)}
        body = _TVM_RUN.format(**opts) + _TVM.format(**opts)
    elif kind in ("inductor", "onnx_export", "tvm_torch"):
        dialect = opts["dialect"]
        if dialect == "mixed":
            import random

            dialect = "python" if random.Random(f"dialect/{seed}").random() < 0.5 else "hop"
        fullgraph = opts.get("fullgraph", True)
        if kind == "inductor" and opts["dialect"] == "mixed" and dialect == "python":
            fullgraph = False
        if transforms and dialect not in transform.dialects:
            raise ValueError(f"{transform.name}: torch eager runs this test only in the "
                             f"{' or '.join(transform.dialects)} dialect, not {dialect}")
        leaf_params = (transform.param_leaves(graph) if transforms else
                       grad.param_leaves(graph) if trains else frozenset())
        src = torch_source(graph, dialect, opts.get("form", DEFAULT_FORM), leaf_params)
        src = "\n".join(line for line in src.splitlines() if line != "import torch")
        body = "\nimport torch\n" + src + "\n"
        if kind == "tvm_torch":
            opts = {**opts, **_tvm_config(opts)}
            body += _TVM_RUN.format(**opts) + _TVM_TORCH.format(**opts)
        else:
            template, config = ((_INDUCTOR_TRANSFORM if transforms else _INDUCTOR, _inductor_config(opts))
                                if kind == "inductor" else (_ONNX_EXPORT, _export_config(opts)))
            body += template.format(**{**opts, "fullgraph": fullgraph, **config})
    else:
        raise ValueError(f"no standalone reproducer for backend kind {kind!r}")
    return f'"""{header}"""\n' + prelude + body + _MAIN


def part_source(module: str) -> str:
    """The text of module `module` (dotted name), to be copied into a repro script: a plain
    Python file that ruff and mypy check and that imports only numpy, torch and the standard
    library (`ir.materialize.torch_func`); without its `from __future__` line, which must
    open a file."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"repro part {module!r}: no such module")
    text = Path(spec.origin).read_text()
    return "\n".join(line for line in text.splitlines()
                     if line != "from __future__ import annotations") + "\n"


def _pyrepr(v: Any) -> str:
    return repr(v)


# ---- the configuration's options, as code: a default option writes nothing -----------------

def _ort_config(opts: dict[str, Any]) -> dict[str, str]:
    """The `_ORT` fields of ORT's options (`OrtBackend`, `ort_session_options`): intra-op
    threads, the parallel executor (two inter-op threads), disabled optimizers."""
    parallel = opts.get("execution_mode") == "parallel"
    off = list(opts.get("disabled_optimizers") or [])
    threads = int(opts.get("threads") or 1)
    note = "".join([f", disabled_optimizers {off}" if off else "",
                    ", the parallel executor" if parallel else "",
                    f", {threads} intra-op threads" if threads != 1 else ""])
    return {"threads": str(threads), "inter_op_threads": "2" if parallel else "1",
            "execution_mode_line": ("    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL\n"
                                    if parallel else ""),
            "session_kwargs": f", disabled_optimizers={off!r}" if off else "",
            "config_note": note}


def _tvm_config(opts: dict[str, Any]) -> dict[str, Any]:
    """The `_TVM` target: the target's name, or with `mcpu` the llvm target of that CPU."""
    mcpu = opts.get("mcpu")
    return {"target_spec": opts["target"] if mcpu is None else
            {"kind": opts["target"], "mcpu": mcpu}}


_INDUCTOR_PATCHES = """    # the failing configuration's torch._inductor.config options, for these compiles only, as
    # the fuzzer set them: compile_fx(config_patches=...){mode_note}
    from torch._inductor.compile_fx import compile_fx

    patches = {flags!r}
{mode_line}
    def inductor_with_config(gm, example_inputs):
        return compile_fx(gm, example_inputs, config_patches=patches)

    print(f"torch._inductor.config patches: {{patches}}", flush=True)
"""


_TRAINING_PATCHES = """    # the failing configuration's AOT autograd options (torch._functorch.config), as the
    # fuzzer set them for its compiles
    import torch._functorch.config as fcfg

    for key, value in {flags!r}.items():
        setattr(fcfg, key, value)
    print("torch._functorch.config:", {flags!r}, flush=True)
"""


def _inductor_config(opts: dict[str, Any]) -> dict[str, str]:
    """The `_INDUCTOR` fields of Inductor's options: `torch._inductor.config` flags and `mode`
    (what `list_mode_options` sets: torch.compile takes no mode beside a backend function) as
    compile_fx's `config_patches`, as `InductorBackend._config_patches` does; the stage before
    Inductor it ran (`compiler`: `aot_eager`) and AOT autograd's options."""
    training = dict(opts.get("training_flags") or {})
    out = {"training_block": _TRAINING_PATCHES.format(flags=training) if training else ""}
    compiler = opts.get("compiler", "inductor")
    if compiler != "inductor":
        return {**out, "config_block": "", "backend_expr": repr(compiler)}
    flags, mode = dict(opts.get("flags") or {}), opts.get("mode")
    if not flags and mode is None:
        return {**out, "config_block": "", "backend_expr": '"inductor"'}
    mode_line = ("    from torch._inductor import list_mode_options\n\n"
                 f"    patches.update(list_mode_options({mode!r}))\n" if mode is not None else "")
    block = _INDUCTOR_PATCHES.format(
        flags=flags, mode_line=mode_line,
        mode_note=f",\n    # with what mode={mode!r} sets" if mode is not None else "")
    return {**out, "config_block": block, "backend_expr": "inductor_with_config"}


def _export_config(opts: dict[str, Any]) -> dict[str, str]:
    """The `_ONNX_EXPORT` export call: `dynamo=True` (with `optimize`) or the TorchScript
    exporter (`dynamo=False`, to a file), each with `opset_version` when one is set."""
    opset = opts.get("opset")
    opset_kw = f", opset_version={opset}" if opset is not None else ""
    if opts.get("dynamo", True):
        block = ("            program = torch.onnx.export(model, args[0], dynamo=True, "
                 f"optimize={opts['optimize']},\n"
                 f"                                        verbose=False, report=False{opset_kw})\n"
                 "        model_bytes = program.model_proto.SerializeToString()")
        note = f"dynamo=True, optimize={opts['optimize']}"
    else:
        block = ("            import tempfile\n\n"
                 "            with tempfile.TemporaryDirectory() as d:\n"
                 "                path = os.path.join(d, 'model.onnx')\n"
                 "                torch.onnx.export(model, args[0], path, dynamo=False, "
                 f"verbose=False{opset_kw})\n"
                 "                with open(path, 'rb') as f:\n"
                 "                    model_bytes = f.read()")
        note = "dynamo=False"
    if opset is not None:
        note += f", opset_version={opset}"
    return {"export_block": block, "export_note": note}


def _tolerances(graph, grad=None, transform=None) -> list[tuple[float, float]]:
    """Per output (then per leaf's gradient, for a gradient test `grad`), or per result of a
    transform test (`transform`): (rtol, atol)."""
    from ir.analysis.precision import gradient_tolerances, output_tolerances

    if transform is not None:
        from campaign.worker import transform_tolerances

        return [(t.rtol, t.atol) for t in transform_tolerances(graph, transform)[0]]
    tols = output_tolerances(graph)
    if grad is not None:
        tols += gradient_tolerances(graph, grad.leaves)
    return [(t.rtol, t.atol) for t in tols]


def _truth(tc) -> dict[str, np.ndarray] | None:
    """The float64 shadow of every output (float ones cast to their graph dtype), or None."""
    from campaign.artifacts import Materialized
    from campaign.reference import run_shadow

    try:
        outs = run_shadow(Materialized(tc))
    except Exception:
        return None
    return {f"out{i}": o for i, o in enumerate(outs)}


def write_bug_folder(dest: Path, spec: str, bucket_id: str, key_fields: dict[str, Any],
                     red, seed: int, timeout_s: float | None = None,
                     cold_start_s: float = 0.0) -> dict[str, Any]:
    """Write the folder of one bucket from a `campaign.triage.reduction.Reduction` (reduced or
    not); returns what was written (`repro`: whether a repro.py exists, `codegen` errors,
    `timeout_s`: a timeout repro's wait).

    A timeout's repro.py waits `timeout_s` (the limit the campaign confirmed it at) plus
    `cold_start_s` for a result, and reproduces when there is none by then."""
    from campaign.artifacts import Materialized
    from campaign.testcase import TestCase
    from ir.core.text import print_graph

    dest = Path(dest)
    tmp = dest.with_name(f".tmp-{dest.name}")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    g = red.graph
    tc = red.tc or TestCase(red.case.test_id, seed, g, red.values, [{"seed": seed}],
                            red.extra_sets, grad=red.case.grad, transform=red.case.transform)
    files = dict(red.files)
    if tc.transform is not None:  # the transform and its cotangents (docs/training.md)
        files.update(tc.transform.files())
    elif tc.grad is not None:  # the leaves and cotangents
        files.update(tc.grad.files())
    files["graph.gir"] = print_graph(g).encode()
    files["original.gir"] = print_graph(red.case.graph).encode()
    files["inputs.npz"] = npz_bytes({v.name: red.values[v.name] for v in (*g.inputs, *g.params)})
    for k in list(files):
        if k.startswith("inputs_set"):
            del files[k]
    for k, extra in enumerate(tc.extra_inputs, 1):
        files[f"inputs_set{k}.npz"] = npz_bytes({v.name: extra[v.name] for v in g.inputs})
    if g == red.case.graph:  # not reduced: the finding's own artifacts fill the gaps
        for name in ("model.onnx", "expected.npz", "actual.npz"):
            path = Path(red.case.folder) / name
            if name not in files and path.is_file():
                files[name] = path.read_bytes()
    if "model.onnx" not in files:
        try:
            files["model.onnx"] = Materialized(tc).onnx_bytes
        except Exception:
            pass
    if "expected.npz" not in files:
        from campaign.reference import run_reference

        ref = run_reference(Materialized(tc))
        if ref.outputs is not None:
            files["expected.npz"] = npz_bytes({f"out{i}": o for i, o in enumerate(ref.outputs)})
    row = red.row or {}
    # the bucket's verdict: what its repro must reproduce (a re-run that no longer failed the
    # same way left its own row)
    verdict = key_fields.get("verdict") or row.get("verdict")
    if verdict == "mismatch":
        truth = _truth(tc)
        if truth is not None:
            files["truth.npz"] = npz_bytes(truth)
    info = {"bucket": bucket_id, "backend": spec, **key_fields,
            "row": {k: row.get(k) for k in ("verdict", "stage", "error_class", "error_sig",
                                             "error_msg", "mismatch_output",
                                             "mismatch_input_set", "max_abs_err",
                                             "max_rel_err", "dialect", "timeout_confirmed",
                                             "timeout_limit_s", "confirm_limit_s",
                                             "confirm_s")},
            "spec": spec, "original_config": red.case.config,
            "finding": str(red.case.folder), "test_id": red.case.test_id, "seed": seed,
            "status": red.status, "note": red.note, "reduction": red.summary,
            "original_insts": red.original_insts, "reduced_insts": red.reduced_insts}
    files["info.json"] = (json.dumps(info, indent=2, default=str) + "\n").encode()
    kind, opts = backend_kind(spec)
    written: dict[str, Any] = {"repro": False, "kind": kind}
    if verdict == "timeout":
        limit = float(timeout_s if timeout_s is not None else 60.0)
        written["timeout_s"] = limit + cold_start_s
        info["repro_wait_s"] = {"confirmed_limit_s": limit, "cold_start_s": cold_start_s}
        files["info.json"] = (json.dumps(info, indent=2, default=str) + "\n").encode()
    if kind != "other":
        # the failing row's details, or the finding's when the row failed otherwise (or none)
        src = row if row.get("verdict") == verdict else red.case.info
        expect = {"verdict": verdict, "stage": src.get("stage") or key_fields.get("stage"),
                  "error_class": src.get("error_class"),
                  "error_sig": src.get("error_sig") or key_fields.get("error_sig")}
        if verdict == "timeout":
            expect["timeout_s"] = written["timeout_s"]
            expect["timeout_note"] = (f"the limit it was confirmed at, {limit:g} s, "
                                      f"+ {cold_start_s:g} s for a cold start")
        header = _header(bucket_id, spec, expect, row, print_graph(g))
        try:
            trains = tc.grad is not None and kind == "inductor"
            transform = tc.transform if kind == "inductor" else None
            files["repro.py"] = repro_source(kind, opts, g, expect,
                                             _tolerances(g, tc.grad if trains else None, transform),
                                             header, seed, tc.grad if trains else None,
                                             transform).encode()
            written["repro"] = True
        except Exception as e:
            written["codegen_error"] = f"{type(e).__name__}: {e}"
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    if dest.exists():
        import shutil

        shutil.rmtree(dest)
    os.rename(tmp, dest)
    return written


def _header(bucket_id: str, spec: str, expect: dict, row: dict, graph_text: str) -> str:
    msg = (row.get("error_msg") or "").strip().splitlines()
    first = msg[0][:300] if msg else ""
    text = (f"Reproducer for dynsmith bucket {bucket_id}: backend {spec!r}, "
            f"{expect['verdict']} during {expect['stage']}.\n\n"
            f"    {expect.get('error_sig') or ''}\n    {first}\n\n"
            "Standalone: numpy and the backend's own library only (no dynsmith). Run\n"
            "    python repro.py\n"
            "It prints REPRODUCED and exits 1 when the failure happens, NOT REPRODUCED (exit 0)\n"
            "when it does not, DIFFERENT FAILURE (exit 2) for another error; a signal kills it\n"
            "(the last '[repro] <stage>' line says where). The data is in inputs*.npz, the\n"
            "reference outputs in expected.npz. "
            + ("A timeout reproduces when there is still no result after\n"
               f"{expect['timeout_s']:g} s (the limit it was confirmed at + a cold start).\n"
               if expect["verdict"] == "timeout" else "")
            + "The graph (GraphIR, graph.gir):\n\n"
            + textwrap.indent(graph_text.rstrip(), "    ") + "\n")
    return text.replace("\\", "\\\\").replace('"""', "\'\'\'")


_BLOCK_DYNSMITH = (
    "import sys, runpy\n"
    "class _NoDynsmith:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('ir', 'campaign', 'mutators'):\n"
    "            raise ImportError('repro.py must not import dynsmith: ' + name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, _NoDynsmith())\n"
    "sys.path = [p for p in sys.path if p not in ('', '.')]\n"
    "sys.argv = ['repro.py']\n"
    "runpy.run_path('repro.py', run_name='__main__')\n"
)


def check_repro(folder: Path, verdict: str, error_class: str | None = None,
                timeout_s: float = 300.0) -> tuple[str, str]:
    """Run `folder/repro.py` in a fresh Python where importing dynsmith fails; returns
    (outcome, last output lines). outcome: "reproduced", "not reproduced", "different
    failure", "error" (anything else), "none" (no repro.py). A timeout reproduces when its
    repro.py's watchdog says so (still no result after its wait), or when it is still running
    after `timeout_s`. Whatever the repro started (compiler subprocesses) is killed with it."""
    import tempfile

    folder = Path(folder)
    if not (folder / "repro.py").is_file():
        return "none", ""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # files, not pipes: a subprocess the repro left behind must not keep us reading
    with tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        proc = subprocess.Popen([sys.executable, "-c", _BLOCK_DYNSMITH], cwd=folder, env=env,
                                stdout=fout, stderr=ferr, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
            expired = False
        except subprocess.TimeoutExpired:
            expired = True
        finally:
            _kill_group(proc.pid)
            proc.wait()
        fout.seek(0)
        ferr.seek(0)
        stdout = fout.read().decode("utf-8", "replace")
        stderr = ferr.read().decode("utf-8", "replace")
    out = "\n".join(t for t in (_tail(stdout, 8), _tail(stderr)) if t)
    code = proc.returncode
    if expired:
        return ("reproduced" if verdict == "timeout" else "error"), out
    if verdict == "timeout" and code == 1 and (
            "REPRODUCED: timeout" in stdout or re.search(r"^Timeout \(", stderr, re.M)):
        return "reproduced", out
    if code < 0:
        name = _signame(-code)
        if verdict == "signal" and (error_class in (None, name)):
            return "reproduced", out
        return "different failure", f"killed by {name}\n{out}"
    if verdict == "crash" and error_class == "ProcessExit" and code not in (0, 1, 2):
        return "reproduced", out
    if code == 1 and "REPRODUCED" in stdout:
        return "reproduced", out
    if code == 0 and "NOT REPRODUCED" in stdout:
        return "not reproduced", out
    if code == 2:
        return "different failure", out
    return "error", out


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"SIG{n}"


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
