"""torch.compile (torch 2.13, Inductor): a reshape of a contiguous tensor with dynamic dims
recompiles when a divisibility relation between the sizes changes, though any reshape of a
contiguous tensor is a view and one generic kernel serves every shape.

`x.reshape(W, 5 * H)` of x: [1, 5, H, W] (H, W dynamic): `_reshape_view_helper_core_alg`
guards on `(5 % W) != 0`, so the shape (H=6, W=5) compiles again after (3, 4), (5, 4), (4, 8)
ran on the first graph; that recompile specializes W = 5, so with `mark_dynamic` the valid
program raises ConstraintViolationError at the fourth shape. Found by dynsmith's dynamic-shape tests (docs/dynshape.md; in the
campaign: `(15 + 5*H) % (2 + W) != 0` from a reshape to (W + 2, 5*H + 15)).

    TORCH_LOGS=recompiles python docs/bugs/torch_reshape_divisibility_recompile.py
"""
import torch
from torch._inductor.compile_fx import compile_fx

compiled = []


def counting(gm, example_inputs):
    compiled.append(gm)
    return compile_fx(gm, example_inputs)


class M(torch.nn.Module):
    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        return x.reshape(w, 5 * h).sin()


def run(mark):
    torch._dynamo.reset()
    compiled.clear()
    m = torch.compile(M(), backend=counting, fullgraph=True)
    with torch.no_grad():
        for h, w in ((3, 4), (5, 4), (4, 8), (6, 5)):
            x = torch.randn(1, 5, h, w)
            mark(x, 2)
            mark(x, 3)
            try:
                m(x)
            except Exception as e:  # mark_dynamic: the recompile specializes W = 5
                print(f"H={h} W={w}: {type(e).__name__}: {str(e).splitlines()[1].strip()}")
                return
            print(f"H={h} W={w}: graphs compiled so far: {len(compiled)}")


run(torch._dynamo.maybe_mark_dynamic)  # 1, 1, 1, 2: the generic shape (6, 5) compiles again
run(torch._dynamo.mark_dynamic)  # ... and under mark_dynamic it raises instead
