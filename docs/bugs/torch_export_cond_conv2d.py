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

    python docs/bugs/torch_export_cond_conv2d.py        # torch 2.13.0+cpu: strict=False fails
    python docs/bugs/torch_export_cond_conv2d.py --fix  # pytorch#189525's change applied: passes

The fault is pytorch#188151 (torch.cond under torch.compile(dynamic=True), 2.12+), fixed by
pytorch#189525 after the 2.13 branch cut: `_bound_stride` in `_merge_output`
(torch/_higher_order_ops/cond.py) keys the next stride as `stride * size`, but fake tensors
give contiguous strides as `stride * Max(1, size)`, so the lookup misses (the RuntimeError, or
the KeyError). `--fix` makes the same change in-process (also registers the `max(size, 1)` key
form). The symbolic sizes come from non-strict export itself (see F26: the HOP's inner
torch.compile runs with `assume_static_by_default=False`).
"""
import sys

import torch
import torch.nn.functional as F

if "--fix" in sys.argv[1:]:  # pytorch#189525's change to _bound_stride, applied in-process
    import inspect

    C = sys.modules["torch._higher_order_ops.cond"]
    src = inspect.getsource(C._merge_output)
    key = "            b_stride_expr[_maybe_expr(b_val * b_ex_size[i])] = nxt_merged_stride_expr\n"
    assert src.count(key) == 1, "torch's cond.py is not 2.13's"
    src = src.replace(key, key + "".join(
        f"            {s}_stride_expr[_maybe_expr({s}_val * torch.sym_max({s}_ex_size[i], 1))]"
        " = nxt_merged_stride_expr\n" for s in "ab"))
    exec(compile(src, C.__file__, "exec"), C.__dict__)
    print("with pytorch#189525's change")


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
