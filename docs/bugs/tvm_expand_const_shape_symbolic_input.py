"""TVM 0.27 Relax ONNX importer: `Expand` with a constant target shape crashes on an input with
a symbolic dim (`AttributeError: 'Var' object has no attribute 'value'`).

ONNX Expand broadcasts both ways: Expand(x: [L, 1], shape=[1, 2]) is [L, 2]. The importer's
constant-shape path reads `dim.value` of every input dim, which a symbolic dim (a tir.Var from
the `dim_param`) does not have. With a static input ([3, 1]) the same model imports and runs.
Found by dynsmith's dynamic-shape tests (docs/dynshape.md).

    python docs/bugs/tvm_expand_const_shape_symbolic_input.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


def model(dim):
    g = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim, 2])],
        initializer=[numpy_helper.from_array(np.array([1, 2], np.int64), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(m, full_check=True)
    return m


for dim in (3, "L"):
    try:
        mod = from_onnx(model(dim))
        ex = tvm.compile(mod, target="llvm")
        vm = relax.VirtualMachine(ex, tvm.cpu())
        x = np.arange(3, dtype=np.float32).reshape(3, 1)
        print(f"x: [{dim}, 1] ->", vm["main"](tvm.runtime.tensor(x)).numpy().tolist())
    except Exception as e:  # the symbolic case
        print(f"x: [{dim}, 1] -> {type(e).__name__}: {e}")
