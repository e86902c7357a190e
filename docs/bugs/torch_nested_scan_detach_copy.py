"""torch scan inside a scan, differentiated, when the inner body's activation saves its *result*
for backward (relu, exp, tanh of a product): "RuntimeError: derivative for aten::detach_copy is
not implemented" (dynsmith F51; F39 is the other nested-scan bug, "scan might be aliasing").

The outer scan's autograd (`scan_autograd`, `create_hop_joint_graph`) differentiates the traced
inner scan's forward graph. Tracing the inner joint with make_fx records the `detach` that
autograd's saved-variable unpacking dispatches for the saved relu/exp/tanh result, and
`torch.func.functionalize(..., remove="mutations_and_views")` turns it into `detach_copy`,
which has no derivative formula. sin saves its input: no detach, no error.

torch 2.13.0: eager (the HOP run without torch.compile, which Dynamo-traces the combine
functions itself), aot_eager and Inductor all fail, in Dynamo's fake-tensor run of the outer
scan. torch 2.14.1: eager passes (make_fx now rewrites detach to alias when the caller passes
no decomposition table, pytorch#186845 for pytorch#175477), aot_eager still fails (AOTAutograd
passes its own table), Inductor gets further and fails otherwise ("AssertionError:
outs_to_grad length (2) != tangents length (3)", the assertion of F32, also met in F39; its
table decomposes detach).

    python torch_nested_scan_detach_copy.py                  # one line per case
    python torch_nested_scan_detach_copy.py --detach-alias   # make_fx rewrites detach to alias
                                                             # in every post-dispatch trace
"""
import sys
import warnings

import torch
from torch._higher_order_ops.scan import scan

# autograd's anomaly-mode warning ("Error detected in torch::autograd::NotImplemented") that
# comes with each failure: the line per case says it
warnings.filterwarnings("ignore", message="Error detected in")

ACTS = {"relu": torch.relu, "exp": torch.exp, "tanh": torch.tanh, "sin": torch.sin}

if "--detach-alias" in sys.argv:
    # the 2.14 default (detach -> nop_decomposition, i.e. alias) also for make_fx callers that
    # pass a decomposition table (AOTAutograd): eager and aot_eager then pass on 2.13 and 2.14
    from torch.fx.experimental import proxy_tensor as _pt

    _init = _pt._MakefxTracer.__init__

    def _init_alias(self, decomposition_table, *args, **kwargs):
        _init(self, decomposition_table, *args, **kwargs)
        if not self.pre_dispatch:
            self.decomposition_table[torch.ops.aten.detach.default] = (
                torch._decomp.decompositions.nop_decomposition)

    _pt._MakefxTracer.__init__ = _init_alias


def make(act, nested):
    def inner(c, x):
        v = c * x
        return v.clone(), act(v).clone()

    def outer(c, row):
        c2, _ = scan(inner, c, row)             # the inner scan runs over one row
        return c2.clone(), c2.clone()

    def single(c, x):                            # the inner body alone, one level
        v = c * x
        return v.clone(), act(v).clone()

    return (lambda c, xs: scan(outer, c, xs)) if nested else (lambda c, xs: scan(single, c, xs))


def loop_grad(act, nested, c0, xs):
    """d(cf + ys.sum())/dc of the same program as a Python loop."""
    c = c0.clone().requires_grad_(True)
    h, ys = c, []
    for row in xs:
        if nested:
            for x in row:
                h = h * x
            ys.append(h)
        else:
            ys.append(act(h * row))
            h = h * row
    loss = h.sum() + torch.stack(ys).sum()
    return torch.autograd.grad(loss, c)[0].item()


def run(name, act, nested, backend):
    torch._dynamo.reset()
    c0 = torch.tensor(0.5)
    xs = torch.randn(3, 2, generator=torch.Generator().manual_seed(0))
    if not nested:
        xs = xs[:, 0].contiguous()
    f = make(act, nested)
    fn = f if backend == "eager" else torch.compile(f, backend=backend, fullgraph=True)
    c = c0.clone().requires_grad_(True)
    label = f"{'nested' if nested else 'single'} {name:<4} {backend:<9}"
    try:
        cf, ys = fn(c, xs)
        g = torch.autograd.grad(cf.sum() + ys.sum(), c)[0].item()
    except Exception as e:
        text = str(e)
        lines = [ln.strip() for ln in text.splitlines() if "Error: " in ln] or [text]
        msg = lines[-1]
        if "derivative for aten::detach_copy is not implemented" in text:  # (also in a wrapper)
            msg = "RuntimeError: derivative for aten::detach_copy is not implemented"
        print(f"{label} FAIL {type(e).__name__}: {msg[:160]}", flush=True)
        return
    ref = loop_grad(act, nested, c0, xs)
    verdict = "ok" if abs(g - ref) <= 1e-5 * max(1.0, abs(ref)) else "WRONG"
    print(f"{label} {verdict} grad={g:.6f} loop={ref:.6f}", flush=True)


CASES = ([f"nested:{a}:{b}" for a in ["relu", "exp", "tanh", "sin"] for b in ["eager", "aot_eager"]]
         + ["nested:relu:inductor", "single:relu:eager", "single:relu:aot_eager"])

if __name__ == "__main__":
    cases = CASES
    if "--case" in sys.argv:                     # e.g. --case nested:relu:aot_eager
        cases = [sys.argv[sys.argv.index("--case") + 1]]
    print(f"torch {torch.__version__}"
          + (" --detach-alias" if "--detach-alias" in sys.argv else ""), flush=True)
    for case in cases:
        level, name, backend = case.split(":")
        run(name, ACTS[name], level == "nested", backend)
# torch 2.13.0+cpu:
#   nested relu eager     FAIL TorchRuntimeError: RuntimeError: derivative for aten::detach_copy ...
#   nested relu aot_eager FAIL TorchRuntimeError: RuntimeError: derivative for aten::detach_copy ...
#   nested sin  eager     ok grad=1.806702 loop=1.806702
# torch 2.14.1:
#   nested relu eager     ok grad=1.806702 loop=1.806702
#   nested relu aot_eager FAIL BackendCompilerFailed: RuntimeError: derivative for aten::detach_copy ...
#   nested relu inductor  FAIL BackendCompilerFailed: AssertionError: outs_to_grad length (2) != ...
# --detach-alias, 2.13.0 and 2.14.1: every eager and aot_eager line ok (Inductor: outs_to_grad)
