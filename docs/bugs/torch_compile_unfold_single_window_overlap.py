"""torch.compile (torch 2.13; aot_eager and Inductor alike, and torch.onnx.export) refuses an
in-place write to an `unfold` view with a single window, `x.unfold(0, 7, 2)` of a length-7 `x`
(shape [1, 7], strides (2, 1)), saying the tensor "has internal overlap". It has none: torch's own
`torch._debug_has_internal_overlap` answers 0 (MemOverlap::No), eager runs it, and windows that
do not overlap (`unfold(0, 3, 3)`) compile. Found by dynsmith's cpu_inplace campaign (an
onnx_export crash, `sub_` through `view_unfold[dim=0, size=7, step=2]`).

    python docs/bugs/torch_compile_unfold_single_window_overlap.py
"""
import torch


def write_through_unfold(size: int, step: int):
    def f(x, y):
        v = x.unfold(0, size, step)
        v.sub_(y)
        return v
    return f


for n, size, step in [(7, 7, 2), (6, 3, 3)]:
    x = torch.randn(n)
    f = write_through_unfold(size, step)
    y = torch.randn(*x.unfold(0, size, step).shape)
    overlap = torch._debug_has_internal_overlap(x.unfold(0, size, step))
    eager = f(x.clone(), y)
    try:
        got = torch.compile(f, backend="aot_eager", fullgraph=True)(x.clone(), y)
        verdict = "compiles, equal to eager: %s" % torch.equal(got, eager)
    except Exception as e:  # noqa: BLE001 - the point is to show the error
        line = next((l for l in str(e).splitlines() if "overlap" in l), str(e).splitlines()[0])
        verdict = "REFUSED: " + line.strip()[:140]
    print(f"unfold({size}, {step}) of [{n}] -> {list(eager.shape)}, "
          f"has_internal_overlap={overlap}: {verdict}")
