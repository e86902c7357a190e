"""TVM 0.27 Relax `relax.transform.Gradient`: the gradient functions of `R.concat` and of
`R.mean` / `R.variance` need static sizes along the axis they work on; with a symbolic one the
pass fails with a Python TypeError from the gradient function (a documented gap, not a bug:
python/tvm/relax/op/_op_gradient.py opens with "TODO(yixin, chaofan): handle symbolic shape for
most of the gradients", and its `_get_shape_prod` says "Requires static shape").

- `concat_grad` splits the output gradient at the inputs' sizes along the axis, and
  `relax.op.split` takes only integer indices: "Mismatched type on argument #1 when calling:
  `relax.op.split(...)`. Expected `Variant<ir.IntImm, Array<ir.IntImm>>` but got `ffi.Array`"
  (split's docstring does say `List[PrimExprLike]`);
- `mean_grad` / `variance_grad` divide by `_get_shape_prod`, which calls `int()` on each size:
  "int() argument must be ... a real number, not 'Var'".

x typed (2, L); the same ops along the static axis 0 differentiate and match numpy. Found by
dynsmith's gradient tests (dynsmith issue 29, the `tvm` backend against eager autograd).

    python docs/bugs/tvm_gradient_symbolic_concat_mean.py
"""
import numpy as np

import tvm
from tvm import relax, tirx

L = tirx.Var("L", "int64")


def case(name, body, expected):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, L), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            z = bb.emit_output(relax.op.sum(bb.emit(body(x))))
        bb.emit_func_output(z)
    try:
        mod = relax.transform.Gradient("main")(bb.get())
        vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
        g = vm["main_adjoint"](tvm.runtime.tensor(np.ones((2, 3), "float32")))[1][0].numpy()
        print(f"{name}: ok, matches numpy: {np.allclose(g, expected)}")
    except Exception as e:  # noqa: BLE001
        print(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:110]}")


case("concat, static axis 0", lambda x: relax.op.concat([x, x], axis=0), np.full((2, 3), 2.0))
case("concat, symbolic axis 1", lambda x: relax.op.concat([x, x], axis=1), np.full((2, 3), 2.0))
case("mean, static axis 0", lambda x: relax.op.mean(x, axis=[0]), np.full((2, 3), 0.5))
case("mean, symbolic axis 1", lambda x: relax.op.mean(x, axis=[1]), np.full((2, 3), 1 / 3))
