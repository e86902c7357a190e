"""torch 2.13 `torch.export.export`: a `scan` whose combine function holds a `torch.cond` whose
branches give the carry the same size by different expressions (`c[0:5]` vs `~c`) is refused:
"Expected init and carry to have same metadata ... torch.Size([s67, 1]) vs torch.Size([u0, 1])".
Tracing the combine function makes the carry's size symbolic (s67); the slice's size
min(s67, 5) and the other branch's s67 differ symbolically, so the cond's result gets an
unbacked size u0, which scan rejects as a carried shape change. Eager runs the program
(the carry stays [5, 1]). Found by dynsmith's `tvm_torch` backend (import stage); the same
torch.export is the first step of the onnx_export backend.

    python docs/bugs/torch_export_scan_cond_unbacked.py
"""
import torch
from torch._higher_order_ops.scan import scan


class M(torch.nn.Module):
    def forward(self, c0, xs):
        def combine(c, x):
            c2 = torch.cond(x.sum() > 0, lambda c: c[0:5].clone(), lambda c: torch.logical_not(c),
                            (c,))
            return c2.clone(), x.clone()

        return scan(combine, c0, xs, dim=0)


args = (torch.ones(5, 1, dtype=torch.bool), torch.randn(3, 2))
print("eager: carry", tuple(M()(*args)[0].shape))
try:
    torch.export.export(M(), args)
    print("export: ok (fixed)")
except Exception as e:
    print(f"export FAILS: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
