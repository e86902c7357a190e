"""TVM 0.27 Relax `relax.transform.Gradient`: the gradient of a dilated `R.nn.conv2d` with
respect to its input has the wrong shape, or the pass fails (when the wrong output_padding below
reaches the stride). The weight gradient is right; dilation 1 is right.

`conv2d_grad` (python/tvm/relax/op/_op_gradient.py) computes the input gradient as a
`conv2d_transpose` of the output gradient and picks its `output_padding` as
`in - ((out - 1) * stride - pads + kernel)`, the size for dilation 1; the transpose of a
dilated conv is `(out - 1) * stride - pads + dilation * (kernel - 1) + 1` wide, so the padding
is `(dilation - 1) * (kernel - 1)` too large:

- x [1,1,7,7], w [1,1,2,2], stride 2, dilation 2: the adjoint returns x's gradient as
  [1,1,8,8] (an extra zero row and column; the 7x7 corner equals torch's), silently;
- the same with stride 1: "Conv2dTranspose expects the output padding less than the strides"
  while the pass runs;
- stride 2, dilation 2 after an `exp`: the wrong shape reaches exp's gradient, a multiply of
  [..,8,8] by [..,7,7] ("not broadcastable").

The unit test (tests/python/relax/test_op_gradient_numeric.py, test_conv2d) has dilation 1
only. Replacing `+ filter_h` / `+ filter_w` by `+ dilation_h * (filter_h - 1) + 1` (and _w)
in the two `out_h`/`out_w` lines makes all cases match torch. Found by dynsmith's gradient
tests (dynsmith issue 29, the `tvm` backend against eager autograd).

    python docs/bugs/tvm_gradient_conv2d_dilation.py
"""
import numpy as np
import torch

import tvm
from tvm import relax


def case(stride, dilation, exp_first=False):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 1, 7, 7), "float32"))
    w = relax.Var("w", relax.TensorType((1, 1, 2, 2), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            inp = bb.emit(relax.op.exp(x)) if exp_first else x
            y = bb.emit(relax.op.nn.conv2d(inp, w, strides=stride, dilation=dilation))
            loss = bb.emit_output(relax.op.sum(y))
        bb.emit_func_output(loss)
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((1, 1, 7, 7)).astype("float32")
    wn = rng.standard_normal((1, 1, 2, 2)).astype("float32")
    xt, wt = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
    inp_t = xt.exp() if exp_first else xt
    torch.nn.functional.conv2d(inp_t, wt, stride=stride, dilation=dilation).sum().backward()

    name = f"stride {stride}, dilation {dilation}" + (", after exp" if exp_first else "")
    try:
        mod = relax.transform.Gradient("main")(bb.get())
        vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
        _, (gx, gw) = vm["main_adjoint"](tvm.runtime.tensor(xn), tvm.runtime.tensor(wn))
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip().splitlines()[-1]
        print(f"{name}: {type(e).__name__}: ...{msg[-130:]}")
        return
    gx, gw = gx.numpy(), gw.numpy()
    same = gx.shape == xt.grad.shape and np.allclose(gx, xt.grad.numpy(), atol=1e-5)
    print(f"{name}: x grad {list(gx.shape)} (torch {list(xt.grad.shape)}), "
          f"{'matches' if same else 'WRONG'}; w grad matches: "
          f"{np.allclose(gw, wt.grad.numpy(), atol=1e-5)}")


case(2, 1)                  # dilation 1: right
case(2, 2)                  # x grad [1,1,8,8]: wrong shape, no error
case(1, 2)                  # ValueError: output padding less than the strides
case(2, 2, exp_first=True)  # the wrong shape meets exp's gradient: not broadcastable
