"""TVM 0.27 Relax `relax.transform.Gradient`: a function with symbolic shapes fails with
`KeyError: 'key is not in Map'` (from C++, no other message) when an op on the gradient path
takes a shape argument holding a symbolic variable: `R.reshape(x, R.shape([1, L]))`,
`R.broadcast_to(x, R.shape([2, L]))`, `R.zeros(R.shape([L]))`, or `R.reshape(x, [1, -1])`
(normalized to `[1, L]`). The same function with a static L differentiates, and so do
symbolic-shape functions without such an argument (`R.sum(R.exp(x))`); no gradient function is
reached (the error comes before the first one, `sum`'s, is called).

Where (src/relax/transform/gradient.cc; the installed build has no symbols, so this is read
from the apache/tvm source and checked against the build's behaviour and a gdb backtrace of the
throw): in 0.27 Relax and TIR variables are one `Var` (apache/tvm PR #20004 unified them), so
the symbolic `L` is a `VarNode` too. `CheckpointCollector::VisitBinding` marks a binding as
checkpointed only if every `VarNode` its value's `PostOrderVisit` reaches is checkpointed; that
walk reaches `L` (inside `R.shape([1, L])`, and inside the type of any symbolic-shape var it
meets), which is neither a param nor a binding, so those bindings are not checkpointed. The
backward pass then recomputes each such binding it needs (`CheckpointGenerator::UpdateBinding`),
and `CheckpointGenerator::VisitVar`, reached for `L` when it visits the `R.shape([1, L])` argument,
looks `L` up with `binding_map_[var]`: KeyError. For `R.sum(R.exp(x))` the recomputation is
harmless but visible: the adjoint recomputes `lv_cp = R.exp(x)` instead of reusing `lv` (with
static shapes it does not). A fix would have both places skip symbolic (PrimType) vars (not
tried: it needs a C++ rebuild). Found by dynsmith's gradient tests (dynsmith issue 29, the `tvm`
backend against eager autograd, dynamic-shape models).

    python docs/bugs/tvm_gradient_symbolic_shape_arg.py
"""
import numpy as np

import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class Reshape:
    @R.function
    def main(x: R.Tensor(("L",), "float32")) -> R.Tensor((), "float32"):
        L = T.int64()
        with R.dataflow():
            y = R.reshape(x, R.shape([1, L]))
            z = R.sum(y)
            R.output(z)
        return z


@I.ir_module
class ReshapeStatic:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            y = R.reshape(x, R.shape([1, 4]))
            z = R.sum(y)
            R.output(z)
        return z


@I.ir_module
class Exp:
    @R.function
    def main(x: R.Tensor(("L",), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            y = R.exp(x)
            z = R.sum(y)
            R.output(z)
        return z


def grad(mod, x):
    out = relax.transform.Gradient("main")(mod)
    vm = relax.VirtualMachine(tvm.compile(out, target="llvm"), tvm.cpu())
    return out, vm["main_adjoint"](tvm.runtime.tensor(x))[1][0].numpy()


x = np.arange(4, dtype="float32")
_, g = grad(ReshapeStatic, x)
print("static L = 4, reshape:", g.tolist())                      # [1, 1, 1, 1]
mod, g = grad(Exp, x)
print("symbolic L, exp:", g.tolist(), "matches numpy:", np.allclose(g, np.exp(x)))
print("  recomputes exp in the adjoint (lv_cp):", "_cp" in mod["main_adjoint"].script())
try:
    grad(Reshape, x)
    print("symbolic L, reshape: fixed")
except Exception as e:  # noqa: BLE001
    print(f"symbolic L, reshape: bug reproduced: {type(e).__name__}: {e}")
