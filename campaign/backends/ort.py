"""ONNX Runtime on the CPU execution provider, one thread, optimizations all or disabled."""
from __future__ import annotations

from functools import partial

import numpy as np
import onnxruntime as ort

from campaign.artifacts import Materialized
from campaign.backends.base import Backend, BackendResult, register
from campaign.verdict import Stage

_LEVELS = {
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
}


class OrtBackend(Backend):
    def __init__(self, name: str = "ort", opt_level: str = "all"):
        self.name = name
        self.opt_level = opt_level

    def session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.graph_optimization_level = _LEVELS[self.opt_level]
        so.log_severity_level = 3
        return so

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        sess = self.stage(
            Stage.COMPILE,
            partial(ort.InferenceSession, m.onnx_bytes, self.session_options(),
                    providers=["CPUExecutionProvider"]),
            result, "compile_ms",
        )
        feeds = {v.name: m.tc.values[v.name] for v in m.tc.graph.inputs}
        return self.stage(Stage.RUN, partial(sess.run, None, feeds), result, "run_ms")


register("ort")(lambda: OrtBackend("ort", "all"))
register("ort_noopt")(lambda: OrtBackend("ort_noopt", "disabled"))
