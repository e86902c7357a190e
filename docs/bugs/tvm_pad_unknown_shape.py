"""TVM 0.27 Relax ONNX importer: `Pad` of a tensor whose shape the importer could not infer
fails with `AssertionError: emit_te now only supports Tensor that has ShapeExpr shape`.

x: [W] (a `dim_param`), Slice(x, 0:2) has shape [min(2, W)]; Sub with y: [2] broadcasts
min(2, W) against 2, which the importer types as `R.Tensor(ndim=1)` (no shape); the Pad
converter lowers through `bb.emit_te(topi.nn.pad, ...)`, which asserts on a tensor without a
ShapeExpr. With a static x ([5]) the model imports and runs. Found by dynsmith's dynamic-shape
tests (docs/dynshape.md): slice -> sub -> topk -> pad_constant over a symbolic W.

    python docs/bugs/tvm_pad_unknown_shape.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def model(dim):
    c = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["v"]),
             helper.make_node("Sub", ["v", "y"], ["d"]),
             helper.make_node("Pad", ["d", "pads"], ["z"], mode="constant")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim]),
                                       helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
                          initializer=[c("s", [0]), c("e", [2]), c("a", [0]), c("pads", [1, 0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


for dim in (5, "W"):
    try:
        vm = relax.VirtualMachine(tvm.compile(from_onnx(model(dim)), target="llvm"), tvm.cpu())
        out = vm["main"](tvm.runtime.tensor(np.arange(5, dtype=np.float32)),
                         tvm.runtime.tensor(np.ones(2, np.float32)))
        print(f"x: [{dim}] ->", out.numpy().tolist())
    except AssertionError as e:
        print(f"x: [{dim}] -> AssertionError: {e}")
