"""TVM 0.27 Relax: FuseTIR fails to match a symbolic shape written `7 + L` against `L + 7`
(Concat(static, symbolic) -> Clip -> ReduceMin does not compile).

ONNX `Concat(y: [7], x: [L])` gives a tensor of shape `7 + L`. The Relax concat legalizes to a
PrimFunc whose output buffer is `L + 7`; the ONNX Clip converter emits `topi.maximum/minimum`
with `bb.emit_te`, whose PrimFuncs take a buffer of shape `T.int64(7) + L` (plus `L` as an extra
symbolic argument). FuseOps puts maximum, minimum and the reduction in one group, and FuseTIR's
`SymbolicMatcher` matches the parameter shape `7 + L` against the argument shape `L + 7` term
by term (7 against L) and raises "InternalError: Parameter expression T.int64(7) expected an
integer argument with value 7, but was provided with the argument L". Without the ReduceMin
(Concat -> Clip only) FuseTIR fails on the same mismatch another way ("Inconsistent buffers
T_concat and A mapped to the same relax var"). Static shapes compile; so does the model with
`AnnotateTIROpPattern` (hence no fusion) or `FuseOps` disabled; Concat(x, y) (shape `L + 7`
everywhere) compiles too.

Found by dynsmith's `cpu_dynshape` campaign (bug folder tvm-crash-e777b5cb8a: Gather, Concat
of [3], [L], [7], Clip, ReduceMin), localized to AnnotateTIROpPattern by the repro's
`--localize`; the crash itself is in FuseTIR.

    python docs/bugs/tvm_fusetir_concat_clip_symbolic.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def model(L, with_reduce=True):
    nodes = [helper.make_node("Concat", ["y", "x"], ["c"], axis=0),
             helper.make_node("Clip", ["c", "lo", "hi"], ["k"])]
    if with_reduce:
        nodes.append(helper.make_node("ReduceMin", ["k", "axes"], ["out"], keepdims=0))
    else:
        nodes[-1].output[0] = "out"
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [L]),
         helper.make_tensor_value_info("y", TensorProto.INT32, [7])],
        [helper.make_tensor_value_info("out", TensorProto.INT32, [] if with_reduce else [None])],
        initializer=[helper.make_tensor("lo", TensorProto.INT32, [], [-3]),
                     helper.make_tensor("hi", TensorProto.INT32, [], [0]),
                     helper.make_tensor("axes", TensorProto.INT64, [1], [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


def run(m, disabled=()):
    target = tvm.target.Target("llvm")
    x, y = np.arange(-4, 4, dtype=np.int32), np.arange(-5, 2, dtype=np.int32)
    try:
        with tvm.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
            ex = tvm.compile(from_onnx(m), target=target,
                             relax_pipeline=relax.get_default_pipeline(target))
        out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x),
                                                          tvm.runtime.tensor(y)).numpy()
    except Exception as e:  # noqa: BLE001
        return f"FAILS: {type(e).__name__}: {str(e).splitlines()[0]}"
    try:
        import onnxruntime as ort
        ref = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x, "y": y})[0]
        return f"ok: {out.tolist()} (onnxruntime: {ref.tolist()})"
    except ImportError:
        return f"ok: {out.tolist()}"


print("symbolic L          :", run(model("L")))
print("symbolic, no Reduce :", run(model("L", with_reduce=False)))
print("static L=8          :", run(model(8)))
print("AnnotateTIROpPattern off:", run(model("L"), ["AnnotateTIROpPattern"]))
print("FuseOps off         :", run(model("L"), ["FuseOps"]))
