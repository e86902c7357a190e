"""ONNX Runtime: the CPU execution provider (or CUDA, where onnxruntime-gpu has it), one thread,
graph optimizations all or disabled — so ORT optimized vs ORT unoptimized is an oracle too.

Registered: `ort` (cpu, all), `ort_noopt` (cpu, disabled), `ort_cuda`, `ort_cuda_noopt`.
Options: `opt_level` (`all` | `extended` | `basic` | `disabled`), `device` (`cpu` | `cuda`),
`disabled_optimizers` (comma-separated transformer names), `execution_mode` (`sequential` |
`parallel`), `threads` (intra-op); the configuration space `ORT_SPACE` draws them per test.
"""
from __future__ import annotations

from functools import partial
from typing import ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import (
    ORT_TRACKER,
    Backend,
    BackendInfo,
    BackendResult,
    KnownUnsupported,
    ReproBodies,
    ReproSpec,
    input_feed_sets,
    register,
)
from campaign.backends.configs import Option

# the session as the repros make it too (one function: their part ort_session.py)
from campaign.backends.ort.session import (  # noqa: F401 (re-exported)
    ort_providers,
    ort_session,
    ort_session_options,
)
from campaign.verdict import Stage

_LEVELS = ("all", "extended", "basic", "disabled")


#: graph transformers worth switching off one by one (`disabled_optimizers`): each hides the
#: rewrite it does and leaves its input to the later rewrites and kernels
ORT_OPTIMIZERS = ("ConstantFolding", "TransposeOptimizer", "CommonSubexpressionElimination",
                  "ConstantSharing", "MatMulAddFusion", "GemmActivationFusion",
                  "ConvActivationFusion", "ConvAddFusion", "ConvBNFusion", "ConvMulFusion",
                  "LayerNormFusion", "SimplifiedLayerNormFusion", "GeluFusion",
                  "ReshapeFusion", "NchwcTransformer", "MatMulScaleFusion")

#: ORT's configuration space (docs/configs.md)
ORT_SPACE = (
    Option("opt_level", ("all", "extended", "basic", "disabled"), "each graph optimization "
           "level: the rewrites of the levels below it, without the ones above"),
    Option("disabled_optimizers", (None, *ORT_OPTIMIZERS, "ConstantFolding,TransposeOptimizer",
                                   "ConvBNFusion,ConvActivationFusion,ConvAddFusion"),
           "the optimization level without these rewrites (comma-separated)"),
    Option("execution_mode", ("sequential", "parallel"), "the parallel executor (inter-op "
           "scheduling of independent nodes)"),
    Option("threads", (1, 2), "intra-op threads: the kernels' parallel paths"),
)


def ort_cuda_unavailable() -> str | None:
    """Why ORT cannot run on CUDA here, or None."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return (f"onnxruntime {ort.__version__} has no CUDAExecutionProvider "
                "(install onnxruntime-gpu on a machine with a GPU)")
    return None


#: ORT's CPU EP lacks kernels for some (op, dtype) pairs: a gap, not a bug
ORT_UNSUPPORTED = (
    KnownUnsupported("ORT has no kernel for this op and dtype", Stage.COMPILE, None,
                     r"NOT_IMPLEMENTED : Could not find an implementation for"),
)


#: its repro.py's script parts (`ReproBodies`): an ORT session of model.onnx
ORT_BODIES = ReproBodies((f"{__name__}.session", f"{__name__}.repro"),
                         dynshape=(f"{__name__}.session", f"{__name__}.repro"))

class OrtBackend(Backend):
    """ONNX Runtime on one execution provider at one optimization level."""

    INFO = BackendInfo("ONNX Runtime", ("onnxruntime",), ORT_TRACKER)

    UNSUPPORTED = ORT_UNSUPPORTED
    CONFIG_SPACE = ORT_SPACE

    def __init__(self, opt_level: str = "all", device: str = "cpu",
                 disabled_optimizers: str | None = None, execution_mode: str = "sequential",
                 threads: int = 1):
        if opt_level not in _LEVELS:
            raise ValueError(f"ort: opt_level must be one of {', '.join(_LEVELS)}, "
                             f"got {opt_level!r}")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"ort: device must be cpu or cuda, got {device!r}")
        if execution_mode not in ("sequential", "parallel"):
            raise ValueError(f"ort: execution_mode must be sequential or parallel, got "
                             f"{execution_mode!r}")
        if int(threads) < 1:
            raise ValueError(f"ort: threads must be at least 1, got {threads!r}")
        self.name = "ort"
        self.opt_level = opt_level
        self.target = device
        #: graph transformers switched off by name (ORT's `disabled_optimizers`)
        self.disabled_optimizers = [o for o in (disabled_optimizers or "").split(",") if o]
        self.execution_mode = execution_mode
        self.threads = int(threads)

    PRELOAD: ClassVar[tuple[str, ...]] = ("onnxruntime", "onnx")

    def prepare(self) -> None:
        import onnxruntime  # noqa: F401

    @property
    def version(self) -> str:
        import onnxruntime

        return f"onnxruntime-{onnxruntime.__version__}"

    def unavailable(self) -> str | None:
        return ort_cuda_unavailable() if self.is_gpu else None

    def repro_spec(self) -> ReproSpec:
        """`model.onnx` in a session with this backend's options (campaign/backends/ort/repro.py)."""
        return ReproSpec("ort", {"opt_level": self.opt_level, "device": self.target,
                                 "disabled_optimizers": list(self.disabled_optimizers),
                                 "execution_mode": self.execution_mode, "threads": self.threads},
                         bodies=ORT_BODIES)

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        sess = self.stage(
            Stage.COMPILE,
            partial(ort_session, m.onnx_bytes, self.opt_level, self.target, self.execution_mode,
                    self.threads, self.disabled_optimizers),
            result, "compile_ms",
        )
        return self.run_sets(input_feed_sets(m), partial(sess.run, None), result)


register("ort", OrtBackend, opt_level="all")
register("ort_noopt", OrtBackend, opt_level="disabled")
register("ort_cuda", OrtBackend, opt_level="all", device="cuda")
register("ort_cuda_noopt", OrtBackend, opt_level="disabled", device="cuda")
