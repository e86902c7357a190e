"""The torch.onnx exporter as a compiler: `torch.onnx.export(module, args, dynamo=True)` of the
test's torch module, then ONNX Runtime on the exported model.

Stages: import = the export (a failure there is the exporter's), compile = the ORT session on
the exported model (an exported model ORT rejects is the exporter's bug or ORT's), run = ORT.
The exported model takes the graph inputs positionally (params are initializers).

Registered: `onnx_export`. Options: `optimize` (the exporter's onnxscript optimizer, default
true), `opt_level` (ORT's, default `all`), `device` (`cpu` | `cuda`, the ORT provider),
`dialect` of the torch module's control flow (`hop`: `torch.cond`, which torch.export captures
and the exporter turns into ONNX If; `python`: plain `if`, which torch.export specializes).
Needs the `onnxscript` package (the exporter imports it).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import warnings
from typing import Any, ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import (
    Backend,
    BackendInfo,
    BackendResult,
    ExportedInputsMismatch,
    KnownUnsupported,
    ReproBodies,
    ReproSpec,
    register,
)
from campaign.backends.configs import Option
from campaign.backends.forms import FORM_SPACE, form_option
from campaign.backends.ort import ORT_UNSUPPORTED, ort_cuda_unavailable, ort_session, ort_session_options
from campaign.verdict import Stage

#: its repro.py's script parts (`ReproBodies`): the export, then an ORT session
EXPORT_BODIES = ReproBodies(("campaign.backends.ort.session", f"{__name__}.repro"))

class TracedControlFlow(RuntimeError):
    """The TorchScript exporter (`dynamo=False`) traces one path through data-dependent control
    flow (documented): a graph with if/loop/scan is not exported that way."""


ONNX_EXPORT_UNSUPPORTED = (
    KnownUnsupported("the torch.onnx exporter has no translation for this op", Stage.IMPORT,
                     r"DispatchError|UnsupportedOperatorError", None),
    KnownUnsupported("the TorchScript exporter traces one path of data-dependent control flow",
                     Stage.IMPORT, r"TracedControlFlow", None),
    *ORT_UNSUPPORTED,
)

#: the exporter's configuration space (docs/configs.md)
ONNX_EXPORT_SPACE = (
    Option("opset", (None, 20, 21, 23), "a newer ONNX opset than the exporter's own (18): "
           "the onnxscript version converter and the newer ops' translations"),
    Option("optimize", (True, False), "the model as translated, without the onnxscript "
           "optimizer (constant folding, inlining, dead-code removal)"),
    Option("dynamo", (True, False), "the TorchScript exporter (torch.jit tracing), for graphs "
           "without control flow", applies=lambda g: not any(i.blocks for i in g.insts)),
    *FORM_SPACE,
)


class OnnxExportBackend(Backend):
    """torch.onnx.export(dynamo=True), run on ONNX Runtime."""

    INFO = BackendInfo("torch.onnx.export", ("torch", "onnxscript", "onnx-ir", "onnxruntime"))

    UNSUPPORTED = ONNX_EXPORT_UNSUPPORTED
    #: a custom op (`torch.library.custom_op`) has no ONNX translation unless its author
    #: registers one: its tests go to the torch backends and ORT (capability routing)
    LACKS = frozenset({"custom"})
    CONFIG_SPACE = ONNX_EXPORT_SPACE
    #: torch.export and the exporter's translation and rewriting (ORT, which runs the model,
    #: has next to no Python)
    FRONTEND = "torch.export"
    COVERAGE_PACKAGES = ("torch/export", "torch/onnx/_internal", "onnxscript", "onnx_ir")
    dialect: str  # always set (the torch module's dialect)

    def __init__(self, optimize: bool = True, opt_level: str = "all", device: str = "cpu",
                 dialect: str = "hop", opset: int | None = None, dynamo: bool = True,
                 scalars: str = "tensor", params: str = "buffer", inplace: str = "written"):
        if device not in ("cpu", "cuda"):
            raise ValueError(f"onnx_export: device must be cpu or cuda, got {device!r}")
        if dialect not in ("hop", "python"):
            raise ValueError(f"onnx_export: dialect must be hop or python, got {dialect!r}")
        self.dialect = dialect
        #: how the torch program is written (`ir.materialize.form`, campaign/backends/forms.py)
        self.form = form_option("onnx_export", scalars, params, inplace)
        self.name = "onnx_export"
        self.optimize = bool(optimize)
        self.opt_level = opt_level
        self.target = device
        ort_session_options(opt_level)  # validates opt_level early
        if opset is not None and not 18 <= int(opset) <= 23:
            raise ValueError(f"onnx_export: opset must be 18..23, got {opset!r}")
        #: the exported model's opset (None: the exporter's own)
        self.opset = None if opset is None else int(opset)
        #: torch.export + onnxscript (True) or the TorchScript exporter (False)
        self.dynamo = bool(dynamo)

    @property
    def version(self) -> str:
        import onnxruntime
        import torch

        return f"torch-{torch.__version__}-onnxruntime-{onnxruntime.__version__}"

    def repro_spec(self) -> ReproSpec:
        """The graph as torch code in this form, exported with these options and run by ORT
        (campaign/backends/onnx_export/repro.py)."""
        return ReproSpec("onnx_export", {"dynamo": self.dynamo, "optimize": self.optimize,
                                         "opset": self.opset, "opt_level": self.opt_level,
                                         "device": self.target},
                         dialect=self.dialect, form=self.form,
                         bodies=EXPORT_BODIES)

    PRELOAD: ClassVar[tuple[str, ...]] = ("torch", "torch.onnx", "onnxruntime", "onnxscript")

    def prepare(self) -> None:
        import onnxruntime  # noqa: F401
        import torch.onnx  # noqa: F401

        try:
            import onnxscript  # noqa: F401
            from torch.onnx._internal.exporter import _core  # noqa: F401
        except ImportError:  # reported per test by `unavailable`
            pass

    def child_init(self, work_dir: str) -> None:
        # the exporter logs and warns a lot per export; the sandbox's stderr file keeps it anyway
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore")

    def unavailable(self) -> str | None:
        try:
            import onnxscript  # noqa: F401
        except ImportError:
            return "onnx_export needs the onnxscript package (pip install onnxscript)"
        return ort_cuda_unavailable() if self.is_gpu else None

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        import torch

        graph = m.tc.graph
        result.dialect = self.form.label(self.dialect)
        sets = [tuple(torch.from_numpy(np.asarray(x)) for x in feeds.values())
                for feeds in m.tc.feed_sets()]
        args = sets[0]  # the example inputs of the export

        dyn = m.tc.dynshape  # dynamic shapes: one export with a `Dim` per symbol

        def export() -> bytes:
            from ir.materialize.dynshape import export_dynamic_shapes, torch_module

            if not self.dynamo and (dyn is not None or any(i.blocks for i in graph.insts)):
                raise TracedControlFlow("dynamo=False: the TorchScript exporter would trace one "
                                        "path of this graph's control flow (or fix its shapes)")
            module = torch_module(graph, dyn, m.tc.params(), dialect=self.dialect,
                                  form=self.form).eval()
            extra: dict[str, Any] = ({} if dyn is None else
                                     {"dynamic_shapes": export_dynamic_shapes(graph, dyn)})
            if self.opset is not None:
                extra["opset_version"] = self.opset
            # copies: a graph may write its inputs in place (docs/inplace.md)
            inputs = tuple(a.clone() for a in args)
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                if not self.dynamo:
                    with tempfile.TemporaryDirectory() as d:
                        path = os.path.join(d, "model.onnx")
                        torch.onnx.export(module, inputs, path, dynamo=False, verbose=False,
                                          **extra)
                        with open(path, "rb") as f:
                            return f.read()
                program = torch.onnx.export(module, inputs, dynamo=True, optimize=self.optimize,
                                            verbose=False, report=False, **extra)
            assert program is not None  # dynamo=True returns the program
            return program.model_proto.SerializeToString()

        model_bytes = self.stage(Stage.IMPORT, export, result, "compile_ms")
        sess = self.stage(
            Stage.COMPILE,
            lambda: ort_session(model_bytes, self.opt_level, self.target),
            result, "compile_ms")

        def run(xs):
            names = [i.name for i in sess.get_inputs()]
            if len(names) != len(xs):
                raise ExportedInputsMismatch(
                    f"exported model has {len(names)} inputs, the graph has {len(xs)}")
            return sess.run(None, {n: a.numpy() for n, a in zip(names, xs, strict=True)})

        return self.run_sets(sets, run, result)


register("onnx_export", OnnxExportBackend)
