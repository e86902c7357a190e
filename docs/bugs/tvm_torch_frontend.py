"""TVM 0.27 Relax torch frontend (`from_exported_program`): three converter bugs on valid
programs, each found by dynsmith's `tvm_torch` backend (bench/tvm_torch_probe.py) and checked
here against torch eager.

1. `F.selu(x)` is wrong by its scale: torch's decomposition (run by `from_exported_program`)
   turns it into `aten.elu(x, alpha=1.6733, scale=1.0507, input_scale=1)`, and the frontend's
   elu converter (`BaseFXGraphImporter._elu`) reads only `alpha`, dropping `scale` and
   `input_scale`: every output is off by a factor 1.0507 (relative error 0.0483).
2. `torch.clamp(int tensor, max=k)` (one bound; the decomposition of a linear
   `F.interpolate` makes it for its indices) becomes a Relax `clip` with lower bound -inf,
   which cannot be legalized for an integer: `tvm.compile` fails with
   "Cannot convert infinity to BigInt".
3. The `matmul` / `mm` / `bmm` / `addmm` converters pass `out_dtype="float32"` whatever the
   operands: an int64 (or float64) matmul silently returns float32, and an int64 `F.linear`
   (addmm) fails to import ("Binary operators must have the same datatype": the int64 bias plus
   the float32 product).

    python docs/bugs/tvm_torch_frontend.py
"""
import warnings

import numpy as np
import torch

import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program

warnings.simplefilter("ignore")


def tvm_run(fn, *args):
    """torch.export of `fn`, imported by TVM's torch frontend, compiled for llvm and run."""

    class M(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    mod = from_exported_program(torch.export.export(M(), args))
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a.numpy()) for a in args])[0].numpy()


def case(name, fn, *args):
    want = fn(*args).numpy()
    try:
        got = tvm_run(fn, *args)
    except Exception as e:
        print(f"{name}: FAILS: {type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}")
        return
    if got.dtype != want.dtype:
        print(f"{name}: WRONG DTYPE: {got.dtype}, torch gives {want.dtype}")
    elif not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        print(f"{name}: WRONG VALUES: {got.tolist()}, torch gives {want.tolist()}")
    else:
        print(f"{name}: ok")


x = torch.tensor([-2.0, -0.5, 0.5, 2.0])
case("1. selu", torch.nn.functional.selu, x)
case("   elu (scale 1: right)", torch.nn.functional.elu, x)
i = torch.arange(6, dtype=torch.int64)
case("2. clamp(int64, max=4)", lambda t: torch.clamp(t, max=4), i)
case("   clamp(int64, 0, 4) (both bounds: right)", lambda t: torch.clamp(t, 0, 4), i)
case("   interpolate linear", lambda t: torch.nn.functional.interpolate(t, scale_factor=2.0,
                                                                          mode="linear"),
     torch.randn(1, 2, 3))
a = torch.arange(6, dtype=torch.int64).reshape(2, 3)
b = torch.arange(12, dtype=torch.int64).reshape(3, 4)
case("3. matmul int64", torch.matmul, a, b)
case("   matmul float64", torch.matmul, a.double(), b.double())
case("   bmm int32", torch.bmm, a[None].int(), b[None].int())
case("   linear int64 (addmm)", torch.nn.functional.linear, a, b.T.contiguous(),
     torch.ones(4, dtype=torch.int64))
