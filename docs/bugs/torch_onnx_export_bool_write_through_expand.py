"""torch.onnx.export (torch 2.13, dynamo=True) fails on an in-place write to a bool tensor through
an identity `expand` (a 0-d bool tensor expanded to shape [], so no element repeats):
"Subtraction, the `-` operator, with two bool tensors is not supported". Eager runs it (the write
is well defined). Found by dynsmith's cpu_inplace campaign inside a `torch.cond` branch, reduced
by the triage to `view_expand[shape=[]]` + `masked_fill_` on b8; the cond is not needed.

    python docs/bugs/torch_onnx_export_bool_write_through_expand.py
"""
import torch


class WriteThroughExpand(torch.nn.Module):
    def forward(self, m):
        r = m.clone()
        r.expand([]).masked_fill_(m, 0.0)
        return r


m = torch.tensor(True)
print("eager:", WriteThroughExpand()(m))
try:
    torch.onnx.export(WriteThroughExpand(), (m,), dynamo=True, verbose=False)
    print("export: ok")
except Exception as e:  # noqa: BLE001 - the point is to show the error
    line = next((l for l in str(e).splitlines() if "Subtraction" in l), str(e).splitlines()[0])
    print("export FAILED:", line.strip()[:160])
