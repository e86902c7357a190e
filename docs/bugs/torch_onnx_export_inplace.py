"""torch 2.13 `torch.onnx.export(..., dynamo=True)` on in-place writes: three bugs, each checked
against eager on ONNX Runtime 1.32. Found by dynsmith (in-place writes and views;
docs/inplace.md).

  1. `y.copy_(s)` with a source that broadcasts (s: [5] or a 0-d tensor, y: [7,5]) exports as
     Identity(s): the model's output has s's shape, not y's.
  2. a write through `unfold` with gaps (step > size) exports a ScatterND whose indices are
     int32: ONNX Runtime rejects the model ("Type 'tensor(int32)' of input parameter ... of
     operator (ScatterND) ... is invalid"; ScatterND indices must be int64). step == size exports
     fine. (Under torch.compile the same program is wrong too: torch_functionalize_views.py.)
  3. a write through `diagonal()` fails to export: "aot_autograd expected to have an entirely
     functional graph, but found %copy_to" (torch.export + run_decompositions alone succeed).

    python docs/bugs/torch_onnx_export_inplace.py
"""
import contextlib
import io
import warnings

import numpy as np
import onnxruntime as ort
import torch

warnings.simplefilter("ignore")


class CopyBroadcast(torch.nn.Module):
    def forward(self, x, s):
        y = x + x
        y.copy_(s)
        return (y,)


class UnfoldGaps(torch.nn.Module):
    def forward(self, x):
        y = x * 1
        y.unfold(0, 1, 2).sigmoid_()
        return (y,)


class Diagonal(torch.nn.Module):
    def forward(self, x):
        y = x * 1
        y.diagonal().mul_(2.0)
        return (y,)


def check(module, *args):
    name = type(module).__name__
    (want,) = module(*[a.clone() for a in args])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            program = torch.onnx.export(module, tuple(a.clone() for a in args), dynamo=True,
                                        report=False)
        sess = ort.InferenceSession(program.model_proto.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        (got,) = sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)})
    except Exception as e:  # noqa: BLE001
        print(f"{name:14} FAILS: {type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}")
        return
    if got.shape != tuple(want.shape):
        print(f"{name:14} WRONG: output shape {got.shape}, eager {tuple(want.shape)}")
    elif not np.allclose(got, want.numpy(), rtol=1e-5, atol=1e-6):
        print(f"{name:14} WRONG: values differ")
    else:
        print(f"{name:14} ok (fixed)")


check(CopyBroadcast(), torch.randn(7, 5), torch.randn(5))
check(UnfoldGaps(), torch.randn(7, 5))
check(Diagonal(), torch.randn(3, 3))
