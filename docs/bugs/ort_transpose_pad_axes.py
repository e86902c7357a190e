"""ONNX Runtime 1.32 (CPU): the transpose optimizer ignores Pad's `axes` input (opset 18+).

When it moves a Transpose through a Pad (`Transpose -> Pad -> Transpose`, at optimization level
basic and above), it permutes the `pads` input with a Gather as if `pads` held 2 * rank entries,
one begin and one end per dimension in order. With `axes`, `pads` holds 2 * len(axes) entries
in the order of `axes`:
  1. `axes` naming fewer dims than the rank: the Gather's indices run past `pads`, and the
     session fails at run time: "Gather ... indices element out of data bounds, idx=2 must be
     within the inclusive range [-2,1]" (the mode does not matter: constant, reflect, edge);
  2. `axes` naming every dim, not in order ([2, 0, 1]): no error, the pads land on the wrong
     dims and the output has the wrong shape and values.
With ORT_DISABLE_ALL both are right (checked against np.pad here). Found by dynsmith's cpu_ort
campaign (crash findings: loop -> slice -> transpose -> pad_constant, the transposes moved
through the Pad); the triage's `Transpose -> Pad(reflect) -> Transpose` bucket is the same bug.

    python docs/bugs/ort_transpose_pad_axes.py     # exits 1 while the bug is present
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

PERM = [1, 0, 2]


def model(pads, axes, mode):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=PERM),
             helper.make_node("Pad", ["t", "pads", "", "axes"], ["p"], mode=mode),
             helper.make_node("Transpose", ["p"], ["y"], perm=PERM)]
    init = [helper.make_tensor("pads", TensorProto.INT64, [len(pads)], pads),
            helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None, None])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


def expected(x, pads, axes, mode):
    t = x.transpose(PERM)
    width = [(0, 0)] * t.ndim
    n = len(axes)
    for k, a in enumerate(axes):
        width[a % t.ndim] = (pads[k], pads[n + k])
    return np.pad(t, width, mode={"constant": "constant", "reflect": "reflect"}[mode]).transpose(PERM)


def run(m, x, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 4
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


x = np.arange(48, dtype=np.float32).reshape(2, 8, 3)
bad = 0
for name, pads, axes, mode in [("1. axes=[-1], constant", [3, 0], [-1], "constant"),
                               ("1. axes=[-1], reflect", [1, 1], [-1], "reflect"),
                               ("2. axes=[2, 0, 1]", [1, 0, 0, 0, 2, 0], [2, 0, 1], "constant")]:
    want = expected(x, pads, axes, mode)
    m = model(pads, axes, mode)
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC):
        try:
            got = run(m, x, level)
            ok = got.shape == want.shape and np.array_equal(got, want)
            what = f"shape {got.shape}" + ("" if ok else f", expected {want.shape} (values differ)")
        except Exception as e:  # noqa: BLE001
            ok, what = False, f"{type(e).__name__}: {str(e).split('Status Message: ')[-1].strip()}"
        bad += not ok
        print(f"{name:24} {level.name:17} {'ok ' if ok else 'BUG'} {what}")
sys.exit(1 if bad else 0)
