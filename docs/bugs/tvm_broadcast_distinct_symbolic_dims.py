"""TVM 0.27 Relax: an elementwise op between tensors whose dims are distinct symbolic variables
fails to build with an internal error instead of compiling (with a runtime shape check) or a
diagnostic.

ONNX `Mul(x: [B], y: [L])` is valid (B and L are `dim_param`s; at run time they must be equal
or one of them 1). The importer types the result `R.Tensor(ndim=1)`; legalization skips the op
(its output shape is unknown) and VM codegen fails: "CodeGenVM cannot emit this Relax operator
directly ... Offending call: R.multiply(x, y)". The same after Pad(x) (shape B + 1). Found by
dynsmith's dynamic-shape tests (docs/dynshape.md), in graphs where a concat or a broadcast tied
two symbols (`B == W + 3`).

    python docs/bugs/tvm_broadcast_distinct_symbolic_dims.py
"""
import numpy as np
import onnx
from onnx import TensorProto, helper

import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

g = helper.make_graph([helper.make_node("Mul", ["x", "y"], ["z"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B"]),
                       helper.make_tensor_value_info("y", TensorProto.FLOAT, ["L"])],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, [None])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
onnx.checker.check_model(m, full_check=True)
target = tvm.target.Target("llvm")
try:
    ex = tvm.compile(from_onnx(m), target=target, relax_pipeline=relax.get_default_pipeline(target))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(np.ones(4, np.float32)),
                     tvm.runtime.tensor(np.full(4, 2, np.float32)))
    print("fixed:", out.numpy())
except Exception as e:
    print(f"bug reproduced: {type(e).__name__}: {str(e).splitlines()[0]}")
