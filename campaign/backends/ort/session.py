"""An ONNX Runtime session as the fuzzer makes one: dynsmith's ORT backends use these
functions (`campaign.backends.ort` imports them), and the repros of ORT and of the torch.onnx
exporter copy them, so both run the same session."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def ort_session_options(opt_level: str = "all", execution_mode: str = "sequential",
                        threads: int = 1) -> Any:
    """Session options for one test: quiet, the given optimization level, executor and
    intra-op threads (one inter-op thread, except the parallel executor's two)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 2 if execution_mode == "parallel" else 1
    so.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if execution_mode == "parallel"
                         else ort.ExecutionMode.ORT_SEQUENTIAL)
    so.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[opt_level]
    so.log_severity_level = 3
    return so


def ort_providers(device: str) -> list[str]:
    return ["CUDAExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]


def ort_session(model: str | bytes, opt_level: str = "all", device: str = "cpu",
                execution_mode: str = "sequential", threads: int = 1,
                disabled_optimizers: Sequence[str] = ()) -> Any:
    """An inference session of `model` (a path or the serialized model) with these options;
    `disabled_optimizers`: graph transformers switched off by name."""
    import onnxruntime as ort

    extra = {"disabled_optimizers": list(disabled_optimizers)} if disabled_optimizers else {}
    return ort.InferenceSession(model, ort_session_options(opt_level, execution_mode, threads),
                                providers=ort_providers(device), **extra)
