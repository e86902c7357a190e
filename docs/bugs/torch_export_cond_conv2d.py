"""torch.export (non-strict, its default) of a `torch.cond` whose branch calls `conv2d` fails:
"RuntimeError when making fake tensor call". The cond's operands are traced with fresh symbolic
sizes (`(1, 1, s56, s94)`, weight `(1, 1, s67, s67)`) although no dynamic shape was asked for,
so the branches' outputs (`s56 - s67 + 3` against `s56`) and strides (`Max(1, ...)` products)
cannot be proven equal: "one of cond's output stride is not a simple accumulative
multiplication of sizes" here; with the conv in the false branch, `KeyError(Max(1, -s67 + s94
+ 3))`.
Eager, `torch.compile(fullgraph=True)`, strict export and `torch.onnx.export(dynamo=True)` all
run it. TVM's torch frontend (`from_exported_program`) takes the non-strict export's program.

Found by dynsmith's `cpu_dynamic` campaign (`tvm_torch` crash at import, reduced by triage
16 -> 3 instructions: cond(conv2d) then an in-place add); minimized by hand.

    python docs/bugs/torch_export_cond_conv2d.py      # torch 2.13.0+cpu: strict=False fails
"""
import torch
import torch.nn.functional as F


class M(torch.nn.Module):
    def forward(self, p, x, w):
        return torch.cond(p, lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: x * 2.0, (x, w))


args = (torch.tensor(True), torch.randn(1, 1, 4, 6), torch.randn(1, 1, 3, 3))
print("eager:", tuple(M()(*args).shape))
print("torch.compile(fullgraph=True):",
      tuple(torch.compile(M(), fullgraph=True, backend="eager")(*args).shape))
failed = False
for strict in (True, False):
    try:
        torch.export.export(M(), args, strict=strict)
        print(f"torch.export(strict={strict}): ok")
    except Exception as e:
        failed = True
        detail = str(e).split("got ", 1)[-1].splitlines()[0]
        print(f"torch.export(strict={strict}): {type(e).__name__}: {detail[:300]}")
print("REPRODUCED" if failed else "NOT REPRODUCED")
