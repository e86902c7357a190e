"""TVM 0.27 Relax `relax.transform.Gradient`: any function with `R.triu` on the gradient path
fails with "InternalError: Check failed: (partials.size() == call->args.size()) is false:
partials number != inputs number".

Since `R.triu(x, k)` takes the diagonal offset `k` as a second argument (a PrimValue; apache/tvm
PR #15783 moved it there from an attribute), the call has two args, but `triu_grad`
(python/tvm/relax/op/_op_gradient.py) still returns one partial, `[triu(y_grad, k)]`; the pass
(src/relax/transform/gradient.cc, `BackwardBindingGenerator::VisitBinding_`) checks one partial
per argument. The op's numeric unit test (tests/python/relax/test_op_gradient_numeric.py,
test_triu) calls the gradient function directly, not through the pass, so it does not see this.
Returning `[triu(y_grad, k), no_grad(k)]` (as reshape_grad does for its shape) makes the
gradient match numpy (run with `patched`; checked by hand for k = 0, 1, -1 too). Found by
dynsmith's gradient tests (dynsmith issue 29, the `tvm` backend against eager autograd).

    python docs/bugs/tvm_gradient_triu_offset_arg.py            # the bug
    python docs/bugs/tvm_gradient_triu_offset_arg.py patched    # with the one-line fix
"""
import sys

import numpy as np

import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            y = R.triu(x, 0)
            z = R.sum(y)
            R.output(z)
        return z


if sys.argv[1:] == ["patched"]:
    from tvm.relax.op import triu
    from tvm.relax.op.grad import no_grad

    def triu_grad(orig_var, orig_call, output_grad, ctx):
        k = orig_call.args[1]
        return [triu(output_grad, k), no_grad(k)]

    tvm.ir.register_op_attr("relax.triu", "FPrimalGradient", triu_grad, level=20)

try:
    mod = relax.transform.Gradient("main")(Module)
except Exception as e:  # noqa: BLE001
    print(f"bug reproduced: {type(e).__name__}: {str(e).strip().splitlines()[-1]}")
    sys.exit(0)
vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
x = np.random.default_rng(0).standard_normal((3, 3)).astype("float32")
_, (gx,) = vm["main_adjoint"](tvm.runtime.tensor(x))
print("gradient:", gx.numpy().tolist(),
      "matches numpy:", np.allclose(gx.numpy(), np.triu(np.ones((3, 3)))))
