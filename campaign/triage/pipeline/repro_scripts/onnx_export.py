"""torch.onnx.export of the graph's module (stage import), then ONNX Runtime on the exported
model (compile: the session, run: every input set), as `OnnxExportBackend` does."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnxruntime as ort
import torch

from campaign.triage.pipeline.repro_scripts.model import Model
from campaign.triage.pipeline.repro_scripts.ort_session import ort_session
from campaign.triage.pipeline.repro_scripts.prelude import INPUTS, PARAMS, failed, finish, input_sets, stage

# ---- per-test values
#: the exporter (dynamo=True: torch.export, with or without onnxscript's optimizer; False:
#: TorchScript), the opset (None: the exporter's default), ORT's graph optimizations and device
DYNAMO = True
OPTIMIZE = True
OPSET: int | None = None
OPT_LEVEL = "all"
DEVICE = "cpu"
# ---- end of per-test values


def exporter() -> str:
    """How the model is exported, as words."""
    note = f"dynamo=True, optimize={OPTIMIZE}" if DYNAMO else "dynamo=False"
    return note + (f", opset_version={OPSET}" if OPSET is not None else "")


def export(model: Any, args: tuple[Any, ...]) -> bytes:
    """The ONNX model of `model` called on `args`, serialized."""
    opset: dict[str, Any] = {"opset_version": OPSET} if OPSET is not None else {}
    if DYNAMO:
        program = torch.onnx.export(model, args, dynamo=True, optimize=OPTIMIZE,
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
