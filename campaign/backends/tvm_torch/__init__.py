"""Apache TVM Relax through its torch frontend: `torch.export.export` of the test's torch module
(`ir.materialize.dynshape.torch_module`, control flow as higher-order ops: the `hop` dialect),
`tvm.relax.frontend.torch.from_exported_program`, then the same compile and Relax VM run as the
ONNX-importing `tvm` backend (`campaign.backends.tvm.RelaxBackend`).

This frontend takes what TVM's ONNX importer cannot: `torch.cond` becomes a Relax `If`, and the
functional LSTM/GRU/RNN kernels (`aten.lstm.input`, ...) have converters. It has its own gaps
(`TVM_TORCH_UNSUPPORTED`, `TVM_TORCH_LACKS`), each checked by hand.

Stages: import = `torch.export.export` (a failure there is torch.export's) and
`from_exported_program` (TVM's; it runs `ExportedProgram.run_decompositions()` first, its
default, then converts node by node; params, registered as buffers, become constants of the
module, so the compiler sees real weights to fold); compile and run as in `RelaxBackend`.
`main` takes the graph inputs positionally: torch.export keeps every user input as a
placeholder in forward's order, and the importer returns only the user outputs (an input's
in-place write is a mutation output it drops), so `main` has the graph's signature.
A dynamic-shape test (docs/dynshape.md) is exported once with a `torch.export.Dim` per symbol
(`export_dynamic_shapes`, as the exporter backend does), so one compiled module runs every set.

Registered: `tvm_torch` (llvm), `tvm_torch_cuda`. Options as `tvm`'s: `target`, `opt_level`,
`pipeline`, `mcpu`, and the program's form `scalars`, `params`, `inplace`
(campaign/backends/forms.py; the row's `dialect` is its label).
"""
from __future__ import annotations

import re
import warnings
from typing import Any, ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import (
    TVM_TRACKER,
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
from campaign.backends.tvm import TVM_LAYER_NORM_DTYPES, TVM_SPACE, RelaxBackend
from campaign.verdict import Stage

#: the ops of exported programs that TVM 0.27's torch frontend has no converter for (not in its
#: `ExportedProgramImporter.create_convert_map`), each met in a probe and checked there by hand,
#: with the GraphIR op whose torch form it is. The higher-order ops: only `cond` is converted.
#: The reductions over one axis: `amax`/`amin`/`prod.dim_int` are core ATen ops, which
#: `run_decompositions` keeps, and the frontend converts only `max.dim` and `prod.default`
TVM_TORCH_MISSING_CONVERTERS: dict[str, str] = {
    "while_loop": "loop",  # torch.while_loop
    "scan": "scan",  # torch._higher_order_ops.scan
    "amax.default": "reduce_max",  # x.amax(dim)
    "amin.default": "reduce_min",  # x.amin(dim)
    "prod.dim_int": "reduce_prod",  # x.prod(dim)
}
_MISSING = "|".join(re.escape(name) for name in TVM_TORCH_MISSING_CONVERTERS)

#: TVM 0.27's torch frontend (`from_exported_program`): the known gaps, each seen in a probe
#: (bench/tvm_torch_probe.py) and checked by hand. Each regex names the missing pieces, so a new
#: gap stays a crash and is seen.
TVM_TORCH_UNSUPPORTED = (
    # the importer checks the top-level graph's call targets up front
    # (`_check_unsupported_func_type`: an assert listing every name it has no converter for);
    # every name listed must be a known one
    KnownUnsupported(
        "TVM's torch frontend has no converter for this op", Stage.IMPORT, r"AssertionError",
        rf"^Unsupported function types \[(?:'(?:{_MISSING})', )*'(?:{_MISSING})'\]$"),
    # the same gap inside a torch.cond branch: the branches are converted without that check,
    # and the converter lookup (`self.convert_map[func_name]`) raises
    KnownUnsupported(
        "TVM's torch frontend has no converter for this op (inside a cond branch)",
        Stage.IMPORT, r"KeyError", rf"^'(?:{_MISSING})'$"),
    TVM_LAYER_NORM_DTYPES,
)

#: GraphIR ops this frontend cannot take in any form (their torch forms are the ops above, for
#: every attribute and dtype): their tests are not sent to it (capability routing,
#: `Backend.LACKS`). `if` (torch.cond -> Relax If) and the recurrent cells (lstm/gru/rnn,
#: converted and unrolled) it takes.
TVM_TORCH_LACKS = frozenset({*TVM_TORCH_MISSING_CONVERTERS.values(),
                             "custom"})  # a torch.library custom op: no converter either


#: its repro.py's script parts (`ReproBodies`): Relax from the exported torch program
TVM_TORCH_BODIES = ReproBodies(("campaign.backends.tvm.relax", f"{__name__}.repro"))

class TvmTorchBackend(RelaxBackend):
    """TVM Relax on one target, fed the `torch.export` of the test's module (`hop` dialect)."""

    INFO = BackendInfo("TVM Relax (torch frontend)", ("apache-tvm", "torch"), TVM_TRACKER)

    kind: ClassVar[str] = "tvm_torch"
    dialect: str = "hop"
    UNSUPPORTED = TVM_TORCH_UNSUPPORTED
    LACKS = TVM_TORCH_LACKS
    FRONTEND = "torch.export"
    CONFIG_SPACE: ClassVar[tuple[Option, ...]] = (*TVM_SPACE, *FORM_SPACE)

    def __init__(self, target: str = "llvm", opt_level: int = 3, pipeline: str = "fused",
                 mcpu: str | None = None, scalars: str = "tensor", params: str = "buffer",
                 inplace: str = "written"):
        super().__init__(target=target, opt_level=opt_level, pipeline=pipeline, mcpu=mcpu)
        #: how the torch program is written (`ir.materialize.form`, campaign/backends/forms.py)
        self.form = form_option(self.kind, scalars, params, inplace)

    PRELOAD: ClassVar[tuple[str, ...]] = ("torch", "torch.export", "tvm", "tvm.relax", "tvm.relax.frontend.torch")

    def prepare(self) -> None:
        super().prepare()
        import torch.export  # noqa: F401
        from tvm.relax.frontend.torch import from_exported_program  # noqa: F401

    @property
    def version(self) -> str:
        import torch

        return f"{super().version}-torch-{torch.__version__}"

    def repro_spec(self) -> ReproSpec:
        """The graph as torch code in this form, exported and imported by the torch frontend
        (campaign/backends/tvm_torch/repro.py)."""
        return ReproSpec("tvm_torch", self.relax_options(), dialect=self.dialect, form=self.form,
                         bodies=TVM_TORCH_BODIES)

    def _import(self, m: Materialized, result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        import torch

        graph = m.tc.graph
        dyn = m.tc.dynshape
        result.dialect = self.form.label(self.dialect)
        sets = [[np.asarray(x) for x in feeds.values()] for feeds in m.tc.feed_sets()]

        def export() -> Any:
            from ir.materialize.dynshape import export_dynamic_shapes, torch_module

            module = torch_module(graph, dyn, m.tc.params(), dialect=self.dialect,
                                  form=self.form).eval()
            # copies: a graph may write its inputs in place (docs/inplace.md)
            args = tuple(torch.from_numpy(np.array(x, copy=True)) for x in sets[0])
            extra: dict[str, Any] = ({} if dyn is None else
                                     {"dynamic_shapes": export_dynamic_shapes(graph, dyn)})
            return torch.export.export(module, args, **extra)

        def convert(program: Any) -> Any:
            from tvm.relax.frontend.torch import from_exported_program

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = from_exported_program(program)
            n_params = len(mod["main"].params)
            if n_params != len(graph.inputs):
                raise ExportedInputsMismatch(
                    f"the imported main takes {n_params} inputs, the graph has {len(graph.inputs)}")
            return mod

        program = self.stage(Stage.IMPORT, export, result, "compile_ms")
        mod = self.stage(Stage.IMPORT, lambda: convert(program), result, "compile_ms")
        return mod, sets


register("tvm_torch", TvmTorchBackend, target="llvm")
register("tvm_torch_cuda", TvmTorchBackend, target="cuda")
