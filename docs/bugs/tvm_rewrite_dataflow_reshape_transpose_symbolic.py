"""TVM 0.27 Relax: RewriteDataflowReshape aborts on a transpose whose input has compound symbolic
dims (`H + 1`, `W + 1`) instead of deciding "not a reshape".

ONNX Pad(reflect) of x: [2, 3, H, W] on H and W gives [2, 3, H + 1, W + 1]; a Transpose
(perm [3, 0, 1, 2]) of it legalizes to its own PrimFunc, kept apart from fusion because both
reflect pads (ONNX frontend: `topi` mirror_pad via emit_te) are opaque. RewriteDataflowReshape
asks of every call_tir that binds a dataflow var whether its PrimFunc is a reshape
(`HasReshapePattern`, built on the iter-map detector); for this transpose the detector hits a
hard check in `IterMapRewriter` ("Check failed: (CanProveDivisible(info.padding_factor,
divisor)) is false: The padding factor ... is not divisible by H + T.int64(1) ...") and the
build stops. Static shapes compile, so does the model with RewriteDataflowReshape disabled, with
only one of H, W padded, or with a rank-3 input.

Found by dynsmith's `cpu_dynshape` campaign (bug folder tvm-crash-642d1780ce: Pad reflect,
Transpose [3,1,0,2], Pad edge, Add), localized to RewriteDataflowReshape by the repro's
`--localize` (disabling it alone makes the model compile and match).

    python docs/bugs/tvm_rewrite_dataflow_reshape_transpose_symbolic.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def model(H, W):
    pads = helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 0, 0, 0, 0, 1, 1])
    g = helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["a"], mode="reflect"),
         helper.make_node("Transpose", ["a"], ["t"], perm=[3, 0, 1, 2]),
         helper.make_node("Pad", ["t", "pads"], ["out"], mode="reflect")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, H, W])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None] * 4)],
        initializer=[pads])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


def run(m, disabled=()):
    target = tvm.target.Target("llvm")
    x = np.random.default_rng(0).standard_normal((2, 3, 3, 5)).astype(np.float32)
    try:
        with tvm.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
            ex = tvm.compile(from_onnx(m), target=target,
                             relax_pipeline=relax.get_default_pipeline(target))
        out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    except Exception as e:  # noqa: BLE001
        return f"FAILS: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    try:
        import onnxruntime as ort
        ref = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
        return f"ok: shape {out.shape}, max |tvm - onnxruntime| = {np.abs(out - ref).max()}"
    except ImportError:
        return f"ok: shape {out.shape}"


print("symbolic H, W     :", run(model("H", "W")))
print("static 3, 5       :", run(model(3, 5)))
print("RewriteDataflowReshape off:", run(model("H", "W"), ["RewriteDataflowReshape"]))
