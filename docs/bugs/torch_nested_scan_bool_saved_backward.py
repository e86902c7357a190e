"""torch scan inside a scan, differentiated, when the inner body's backward needs a bool mask
(amax/max with keepdim, clamp, where): "AssertionError: outs_to_grad length (2) != tangents
length (3)" (dynsmith F52; F51 and F39 are the other nested-scan bugs).

The inner scan's autograd partitions its joint and the min-cut partitioner saves the bool mask
(`eq(v, amax(v))`, `ge`/`le` for clamp, `gt` for where) as a forward intermediate, so the inner
scan's forward graph returns a bool tensor beside the float carry and output. When the outer
scan's autograd traces its own joint, it differentiates that inner scan again:
`create_hop_joint_graph` (torch/_higher_order_ops/partitioner.py) makes one example tangent per
forward output (`zeros_like`, the bool one included), `create_bw_fn`'s joint
(torch/_higher_order_ops/utils.py) hands them all to `create_joint`, whose mask
(`prepare_fw_with_masks_all_requires_grad`) marks only the outputs that require grad (the float
ones), and `create_joint` asserts. A one-level scan whose body *returns* a bool next to its
float carry fails the same way (`single bool`); F32 is the same assertion in torch.cond's
backward.

torch 2.13.0 and 2.14.1: eager (the HOP run without torch.compile, which Dynamo-traces the
combine functions itself) and aot_eager fail alike, in Dynamo's fake-tensor run of the outer
scan ("TorchRuntimeError: RuntimeError when making fake tensor call"). sin and the identity
(no mask saved) and the one-level amax pass.

    python torch_nested_scan_bool_saved_backward.py          # one line per case
    python torch_nested_scan_bool_saved_backward.py --fix    # create_bw_fn's joint gets
                                                             # tangents for float outputs only
"""
import sys
import warnings

import torch
from torch._higher_order_ops.scan import scan

warnings.filterwarnings("ignore", message="Error detected in")

ACTS = {
    "amax": lambda v: v.amax(0, keepdim=True),     # the fuzzer's reduce_max[keepdim]
    "clamp": lambda v: v.clamp(-1.0, 1.0),
    "where": lambda v: torch.where(v > 0, v, 0.1 * v),
    "sin": torch.sin,
    "id": lambda v: v,
}

if "--fix" in sys.argv:
    # the joint of create_bw_fn takes tangents only for the outputs its mask marks (the
    # floating ones): drop the others (bool, int) before calling it. Fixes F32 (cond) too.
    import torch._higher_order_ops.cond  # noqa: F401  (the modules, not the functions)
    import torch._higher_order_ops.partitioner  # noqa: F401

    _mods = [sys.modules[f"torch._higher_order_ops.{m}"] for m in ("utils", "partitioner", "cond")]
    _orig = _mods[0].create_bw_fn

    def _create_bw_fn(fn, args, return_fw_outputs=False):
        n, inner = len(args), _orig(fn, args, return_fw_outputs)

        def flat_fn(*a):
            return inner(*a[:n], *[t for t in a[n:] if not isinstance(t, torch.Tensor)
                                   or t.dtype.is_floating_point or t.dtype.is_complex])
        return flat_fn

    for _m in _mods:
        _m.create_bw_fn = _create_bw_fn


def step(act, h, x):
    v = act(h * x)
    return v, v                                   # one value as carry and as output


def make(name, nested):
    act = ACTS.get(name)

    def inner(c, x):
        v, y = step(act, c, x)
        return v.clone(), y.clone()

    def outer(c, row):
        c2, _ = scan(inner, c, row)              # the inner scan runs over one row
        return c2.clone(), c2.clone()

    def single_bool(c, x):                       # a bool per-step output next to the carry
        v = c * x
        return v.clone(), v > 0

    if name == "bool":
        return lambda c, xs: scan(single_bool, c, xs)
    return lambda c, xs: scan(outer if nested else inner, c, xs)


def loop_grad(name, nested, c0, xs):
    """d(cf.sum() + ys.sum())/dc of the same program as a Python loop."""
    act = ACTS.get(name, lambda v: v)
    c = c0.clone().requires_grad_(True)
    h, ys = c, []
    for row in xs:
        if nested:
            for x in row:
                h, _ = step(act, h, x)
            ys.append(h)
        elif name == "bool":
            h = h * row
        else:
            h, y = step(act, h, row)
            ys.append(y)
    loss = h.sum() + (torch.stack(ys).sum() if ys else 0)
    return torch.autograd.grad(loss, c)[0].item()


def run(name, nested, backend):
    torch._dynamo.reset()
    c0 = torch.tensor([0.5])
    xs = torch.randn(3, 2, generator=torch.Generator().manual_seed(0))
    if not nested:
        xs = xs[:, :1].contiguous()
    f = make(name, nested)
    fn = f if backend == "eager" else torch.compile(f, backend=backend, fullgraph=True)
    c = c0.clone().requires_grad_(True)
    label = f"{'nested' if nested else 'single'} {name:<5} {backend:<9}"
    try:
        cf, ys = fn(c, xs)
        loss = cf.sum() + (ys.sum() if ys.dtype.is_floating_point else 0)
        g = torch.autograd.grad(loss, c)[0].item()
    except Exception as e:
        text = str(e)
        lines = [ln.strip() for ln in text.splitlines() if "Error" in ln] or [text]
        msg = lines[-1]
        if "outs_to_grad length" in text:        # (also inside Dynamo's wrapper)
            start = text.index("outs_to_grad length")
            msg = "AssertionError: " + text[start:text.index(")", text.index("tangents", start)) + 1]
        print(f"{label} FAIL {type(e).__name__}: {msg[:160]}", flush=True)
        return
    ref = loop_grad(name, nested, c0, xs)
    verdict = "ok" if abs(g - ref) <= 1e-5 * max(1.0, abs(ref)) else "WRONG"
    print(f"{label} {verdict} grad={g:.6f} loop={ref:.6f}", flush=True)


CASES = ([f"nested:{a}:{b}" for a in ["amax", "clamp", "where", "sin", "id"]
          for b in ["eager", "aot_eager"]]
         + ["single:amax:eager", "single:amax:aot_eager", "single:bool:eager"])

if __name__ == "__main__":
    cases = CASES
    if "--case" in sys.argv:                     # e.g. --case nested:amax:aot_eager
        cases = [sys.argv[sys.argv.index("--case") + 1]]
    print(f"torch {torch.__version__}" + (" --fix" if "--fix" in sys.argv else ""), flush=True)
    for case in cases:
        level, name, backend = case.split(":")
        run(name, level == "nested", backend)
