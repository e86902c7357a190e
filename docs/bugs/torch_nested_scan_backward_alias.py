"""torch scan inside a scan, differentiated: torch.compile (aot_eager and Inductor) fails with
"scan might be aliasing the input or the output!" when the inner body saves an intermediate
for backward (leaky_relu, hardtanh, elu of a product); eager runs it (dynsmith F39; the same
duplicated saved intermediate as pytorch#195977, another trigger)."""
import torch
import torch.nn.functional as F
from torch._higher_order_ops.scan import scan

def inner(c, x):
    v = c * x
    return v.clone(), F.leaky_relu(v, 0.1).clone()

def outer(c, row):
    c2, _ = scan(inner, c, row)             # the inner scan runs over one row
    return c2.clone(), c2.clone()

def f(c, xs):
    return scan(outer, c, xs)

c0 = torch.tensor(0.5)
xs = torch.randn(3, 2, generator=torch.Generator().manual_seed(0))
for name in ["eager", "aot_eager", "inductor"]:
    fn = f if name == "eager" else torch.compile(f, backend=name, fullgraph=True)
    c = c0.clone().requires_grad_(True)
    try:
        cf, ys = fn(c, xs)
        print(name, "ok", torch.autograd.grad(cf + ys.sum(), c)[0].item())
    except Exception as e:
        lines = [l for l in str(e).splitlines() if l.strip()]
        print(name, type(e).__name__, lines[1] if len(lines) > 1 else lines[0])
# eager ok 1.80670...   (a Python double loop gives 1.8067021)
# aot_eager BackendCompilerFailed RuntimeError: scan might be aliasing the input or the output!
# inductor BackendCompilerFailed RuntimeError: scan might be aliasing the input or the output!
