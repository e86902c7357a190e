"""torch 2.13 `torch.onnx.export(dynamo=True)`: a pure `torch.diagonal_scatter` (no in-place
code in the program) fails to export:

    ConversionError: Failed to decompose the FX graph for ONNX compatibility ...
    aot_autograd expected to have an entirely functional graph, but found %copy_to ...

The decomposition of `diagonal_scatter` writes through `diagonal()` with `prims.copy_to`, the
same failure as a write through `diagonal()` (docs/bugs/torch_onnx_export_inplace.py case 3):
so functionalizing the program first does not avoid it. Eager runs it.

Found by dynsmith's `inplace=functional` torch program form (the graph's writes rewritten to
pure scatters before export).
Run: python torch_onnx_export_diagonal_scatter.py  (prints REPRODUCED or NOT REPRODUCED)
"""
import contextlib
import io

import torch


class M(torch.nn.Module):
    def forward(self, x, y):
        return torch.diagonal_scatter(x, y * 2, 0, 0, 1)


x, y = torch.rand(4, 4), torch.rand(4)
M()(x, y)  # eager runs it
try:
    with contextlib.redirect_stdout(io.StringIO()):
        torch.onnx.export(M().eval(), (x, y), dynamo=True)
    print("NOT REPRODUCED")
except Exception as e:
    msg = str(e)
    print("REPRODUCED:" if "copy_to" in msg or "decompose" in msg else "DIFFERENT FAILURE:",
          type(e).__name__, msg.splitlines()[0][:200])
