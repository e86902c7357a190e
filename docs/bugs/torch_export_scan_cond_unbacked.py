"""torch 2.13 `torch.export.export` (non-strict, the default): a `scan` whose combine function
holds a `torch.cond` whose branches give the carry its size by different expressions (`c[0:5]`
vs `~c`) is refused: "Expected init and carry to have same metadata ... torch.Size([s67, 1]) vs
torch.Size([u0, 1])". Eager runs the program (the carry stays [5, 1]), and so do strict export
and torch.compile (static shapes).

Not a scan bug: non-strict export runs the HOP's inner torch.compile (`_hop_compile_and_call`,
torch/_higher_order_ops/utils.py) under `DEFAULT_EXPORT_DYNAMO_CONFIG`
(torch/export/_trace.py), whose `assume_static_by_default` is False, so dynamo gives the scan's
static operands fresh symbolic sizes (`create_symbol s67 = 5 for L['leaves_init'][0].size()[0]`
in run_flattened_scan). With the carry's size a symbol s, `c[0:5]` has size 5 and `~c` size s,
so the cond's result gets an unbacked size u0 and scan (rightly, for a symbolic s) refuses a
carry whose shape may change; `while_loop` refuses the same carry the same way, and
`torch.compile(dynamic=True)` fails alike. Strict export passes `assume_static_by_default=True`
to dynamo and works. Found by dynsmith's `tvm_torch` backend (import stage); the same
torch.export is the first step of the onnx_export backend.

    python docs/bugs/torch_export_scan_cond_unbacked.py            # non-strict fails, strict ok
    python docs/bugs/torch_export_scan_cond_unbacked.py --static   # export's HOP config static: ok
"""
import sys

import torch
from torch._higher_order_ops.scan import scan

if "--static" in sys.argv[1:]:  # what strict export tells dynamo, given to non-strict's HOPs
    import torch.export._trace

    torch.export._trace.DEFAULT_EXPORT_DYNAMO_CONFIG.assume_static_by_default = True
    print("non-strict export with DEFAULT_EXPORT_DYNAMO_CONFIG.assume_static_by_default = True")


class M(torch.nn.Module):
    def forward(self, c0, xs):
        def combine(c, x):
            c2 = torch.cond(x.sum() > 0, lambda c: c[0:5].clone(), lambda c: torch.logical_not(c),
                            (c,))
            return c2.clone(), x.clone()

        return scan(combine, c0, xs, dim=0)


args = (torch.ones(5, 1, dtype=torch.bool), torch.randn(3, 2))
print("eager: carry", tuple(M()(*args)[0].shape))
for strict in (False, True):
    try:
        ep = torch.export.export(M(), args, strict=strict)
        same = torch.equal(ep.module()(*args)[0], M()(*args)[0])
        print(f"export(strict={strict}): ok, carry {tuple(ep.module()(*args)[0].shape)}, "
              f"equal to eager: {same}")
    except Exception as e:
        print(f"export(strict={strict}) FAILS: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
