"""ONNX Runtime 1.32 (CPU EP) segfaults creating a session at ORT_ENABLE_ALL for a float16
Transpose(perm=[1,0,2]) -> MatMul -> GRU (LSTM and RNN too). Found by dynsmith (cpu_ort campaign
over the rnn family). Not with float32, not at ORT_ENABLE_EXTENDED or below, not without the
Transpose.

    python docs/bugs/ort_f16_rnn_transpose_segfault.py   # prints the exit code per variant
"""
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

RUN = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, sys.argv[2])
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


def model(dtype=T.FLOAT16, op="GRU", transpose=True, hidden=3, inp=4, k=9) -> onnx.ModelProto:
    npdt = {T.FLOAT16: np.float16, T.FLOAT: np.float32}[dtype]
    gates = {"GRU": 3, "LSTM": 4, "RNN": 1}[op]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, s).astype(npdt), n) for n, s in
             (("W", (1, gates * hidden, inp)), ("R", (1, gates * hidden, hidden)),
              ("B", (1, 2 * gates * hidden)))]
    nodes, a = [], "A"
    if transpose:
        nodes.append(helper.make_node("Transpose", ["A"], ["At"], perm=[1, 0, 2]))
        a = "At"
    nodes.append(helper.make_node("MatMul", [a, "M"], ["X"]))
    nodes.append(helper.make_node(op, ["X", "W", "R", "B"], ["Y", "Yh"], hidden_size=hidden,
                                  direction="reverse"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("A", dtype, [1, 1, k]),
                                       helper.make_tensor_value_info("M", dtype, [k, inp])],
                          [helper.make_tensor_value_info("Yh", dtype, [1, 1, hidden])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


if __name__ == "__main__":
    import tempfile

    for kw in ({}, {"op": "LSTM"}, {"op": "RNN"}, {"dtype": T.FLOAT}, {"transpose": False}):
        for level in ("ORT_ENABLE_ALL", "ORT_ENABLE_EXTENDED"):
            with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
                onnx.save(model(**kw), f.name)
                rc = subprocess.run([sys.executable, "-c", RUN, f.name, level]).returncode
            print(kw or "f16 GRU", level, "exit", rc, "(SIGSEGV)" if rc == -11 else "")
