"""TVM Relax (ONNX importer, llvm target): an ONNX `If` whose branches hold a `TopK` (the branch
returns its values) imports and compiles, then the Relax VM crashes with SIGSEGV when run
(`p` false, the else branch; with `p` true it runs). onnxruntime runs the model; the same TopK
outside an If runs in TVM.

    python tvm_if_topk_segfault.py             # If: segfaults, exit -11 (139 from a shell)
    python tvm_if_topk_segfault.py plain       # no If: runs
    python tvm_if_topk_segfault.py nopass      # If, built with disabled_pass=["StaticPlanBlockMemory"]: runs

The fault is `relax.transform.StaticPlanBlockMemory`, apache/tvm#20191 (open): it plans the
branch-local allocation of TopK's unused indices output into one storage that only the then
branch allocates (`storage = R.memory.alloc_storage(...)` in the then branch; in the else branch
`storage: R.Any` is declared and used by `R.memory.alloc_tensor(storage, ...)` with no
allocation), so the else branch's `alloc_tensor` reads an undefined storage
(`StorageObj::AllocTensor` in the crash's stack). Found by dynsmith's `cpu_dynamic` campaign."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tvm
from onnx import TensorProto, helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

K = helper.make_tensor("k", TensorProto.INT64, [1], [1])


def topk_nodes(x, out):
    return [helper.make_node("Constant", [], [out + "_k"], value=K),
            helper.make_node("TopK", [x, out + "_k"], [out, out + "_i"], axis=0)]


def branch(name, out):
    return helper.make_graph(topk_nodes("x", out), name, [],
                             [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1])])


x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
p = helper.make_tensor_value_info("p", TensorProto.BOOL, [])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
if "plain" in sys.argv[1:]:
    nodes = topk_nodes("x", "y")
else:
    nodes = [helper.make_node("If", ["p"], ["y"], then_branch=branch("then", "t"),
                              else_branch=branch("else", "e"))]
model = helper.make_model(helper.make_graph(nodes, "g", [p, x], [y]),
                          opset_imports=[helper.make_opsetid("", 18)])
onnx.checker.check_model(model, full_check=True)
feeds = {"p": np.array(False), "x": np.array([-0.3], np.float32)}
print("onnxruntime:", ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0])
disabled = ["StaticPlanBlockMemory"] if "nopass" in sys.argv[1:] else []
with tvm.transform.PassContext(disabled_pass=disabled):
    vm = relax.VirtualMachine(tvm.compile(from_onnx(model), target="llvm"), tvm.cpu())
print(f"tvm {tvm.__version__} (disabled_pass={disabled}): compiled, running", flush=True)
out = vm["main"](*[tvm.runtime.tensor(feeds[n]) for n in ("p", "x")])
print("tvm:", out.numpy())
