"""TVM 0.27 Relax's ONNX importer mistranslates BatchNormalization (and LayerNormalization)
inside an `If` branch: the branch yields the Relax op's whole tuple (output, mean, var) instead of
its first element, so the If's result has a TupleType and whatever consumes it fails
("Operator relax.nn.relu ... TypeError", "Arguments to binary operators must be either R.Tensor
or R.Prim", "'TupleType' object has no attribute 'shape'", "'Array' object has no attribute
'numpy'"). ONNX Runtime runs the model. Found by dynsmith's cpu_dynamic campaign: five buckets,
each reduced by the triage to an If with a batch_norm / layer_norm branch (1-5 instructions).

    python docs/bugs/tvm_if_branch_batchnorm_tuple.py
"""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

F = TensorProto.FLOAT
then_g = helper.make_graph(
    [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"])],
    "then", [], [helper.make_tensor_value_info("bn", F, [1, 1])])
else_g = helper.make_graph(
    [helper.make_node("Identity", ["x"], ["id"])],
    "else", [], [helper.make_tensor_value_info("id", F, [1, 1])])
graph = helper.make_graph(
    [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
     helper.make_node("Relu", ["y"], ["out"])],
    "main",
    [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
     helper.make_tensor_value_info("x", F, [1, 1])]
    + [helper.make_tensor_value_info(n, F, [1]) for n in "sbmv"],
    [helper.make_tensor_value_info("out", F, [1, 1])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model, full_check=True)

feed = {"c": np.array(True), "x": np.array([[-2.0]], np.float32),
        "s": np.ones(1, np.float32), "b": np.zeros(1, np.float32),
        "m": np.zeros(1, np.float32), "v": np.ones(1, np.float32)}
print("onnxruntime:", ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"]).run(None, feed)[0])
try:
    from tvm.relax.frontend.onnx import from_onnx
    mod = from_onnx(model, keep_params_in_input=False)
    print("tvm import: ok")
except Exception as e:  # noqa: BLE001 - the point is to show the error
    print("tvm import FAILED:", type(e).__name__, str(e).splitlines()[0][:160])
