"""torch.compile of forward-mode AD (torch.func.jacfwd, torch.func.jvp) through a norm with a
weight or bias: "RuntimeError: InferenceMode::is_enabled() && self.is_inference() INTERNAL ASSERT
FAILED ... native::_fw_primal" (dynsmith F54, known upstream: pytorch#139756).

Eager works, and so does jacrev; under torch.compile it fails with every backend (eager,
aot_eager, inductor), in Dynamo's fake-tensor run of the norm, on 2.13.0 and 2.14.1 (2.14.1
wraps it as "Unsupported: Observed exception"). Forward AD of instance_norm, layer_norm,
group_norm and training batch_norm makes "efficient" ZeroTensor tangents; the ZeroTensor
kernels of view/_reshape_alias/as_strided run those tensors' view ops past FakeTensorMode.

Cases (one line each: `<norm> <transform> <backend> ok ...` or `... FAIL <error>`):

    python torch_compile_jacfwd_norm_fw_primal.py                      # one line per case
    python torch_compile_jacfwd_norm_fw_primal.py --zero-fallthrough   # the ZeroTensor kernels
                                                                       # of view, _reshape_alias,
                                                                       # as_strided fall through
"""
import logging
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
# FakeTensorMode logs each failed meta run with its traceback: the line per case says it
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)

if "--zero-fallthrough" in sys.argv:
    # what pytorch PR #186160 does by removing these registrations
    _lib = torch.library.Library("aten", "IMPL")
    for _op in ("view", "_reshape_alias", "as_strided"):
        _lib.impl(_op, torch.library.fallthrough_kernel, "ZeroTensor")

torch.manual_seed(0)
X = torch.randn(1, 1, 2)
X4 = torch.randn(2, 2, 3)
B = torch.randn(1)

NORMS = {
    "instance_norm": lambda w: F.instance_norm(X, weight=w, bias=B),
    "layer_norm": lambda w: F.layer_norm(X, (2,), weight=w.expand(2), bias=B.expand(2)),
    "group_norm": lambda w: F.group_norm(X4, 1, weight=w.expand(2), bias=B.expand(2)),
    "batch_norm": lambda w: F.batch_norm(X4, None, None, weight=w.expand(2),
                                         bias=B.expand(2), training=True),
}

TRANSFORMS = {
    "jacfwd": lambda g: (lambda w: torch.func.jacfwd(g)(w)),
    "jvp": lambda g: (lambda w: torch.func.jvp(g, (w,), (torch.ones_like(w),))[1]),
    "jacrev": lambda g: (lambda w: torch.func.jacrev(g)(w)),
}

CASES = [(n, "jacfwd", b) for n in NORMS for b in ("eager", "aot_eager", "inductor")]
CASES += [("instance_norm", "jvp", "eager"), ("instance_norm", "jacrev", "eager"),
          ("instance_norm", "jacrev", "inductor")]


def one_line(e):
    text = " ".join(str(e).split())
    at = text.find("INTERNAL ASSERT FAILED")
    if at >= 0:
        # the assert, and the kernel it names
        kernel = "native::_fw_primal" if "native::_fw_primal" in text else ""
        head = " ".join(str(e).split("\n")[0].split())[:40]
        return f"{type(e).__name__}: {head} ... InferenceMode::is_enabled() && " \
               f"self.is_inference() INTERNAL ASSERT FAILED ... {kernel}"
    return f"{type(e).__name__}: {text}"[:300]


def main():
    print(f"torch {torch.__version__}")
    w = torch.randn(1)
    for norm, transform, backend in CASES:
        f = TRANSFORMS[transform](NORMS[norm])
        ref = f(w)
        torch._dynamo.reset()
        try:
            got = torch.compile(f, backend=backend, fullgraph=True)(w)
        except Exception as e:                              # noqa: BLE001
            print(f"{norm:13} {transform:6} {backend:9} FAIL {one_line(e)}", flush=True)
            continue
        same = torch.allclose(got, ref, atol=1e-5)
        print(f"{norm:13} {transform:6} {backend:9} {'ok' if same else 'WRONG'}", flush=True)


if __name__ == "__main__":
    main()
