"""torch.compile (Inductor, CPU): a conv2d result passed as an operand of torch.cond. Inductor's
layout optimization makes the conv's output channels-last, but the branch subgraphs keep the
eager (contiguous) strides for their input: with the Python wrapper the compiled program fails
at run time ("AssertionError: expected size 8==8, stride 1==6 at dim=1; ..."), with the C++
wrapper it returns wrong values (no error). Eager and layout_optimization=False agree."""
import torch
import torch._inductor.config as icfg
import torch.nn.functional as F


def f(x, p, w):
    c = F.conv2d(x, w, padding=1)  # [1, 8, 2, 3]

    def then(b):
        return (F.max_pool2d(b, (2, 2), stride=(2, 2)),)

    def else_(b):
        return (F.max_pool2d(b, (1, 3), stride=(2, 1)),)

    return torch.cond(p, then, else_, (c,))[0]


torch.manual_seed(0)
x, w, p = torch.randn(1, 3, 1, 1), torch.randn(8, 3, 2, 1), torch.tensor(True)
ref = f(x, p, w)
for layout_opt in (True, False):
    for cpp_wrapper in (False, True):
        torch._dynamo.reset()
        what = f"layout_optimization={layout_opt} cpp_wrapper={cpp_wrapper}"
        try:
            with icfg.patch(layout_optimization=layout_opt, cpp_wrapper=cpp_wrapper):
                out = torch.compile(f, fullgraph=True)(x, p, w)
            print(f"{what}: max abs error vs eager {float((out - ref).abs().max()):.3g}")
        except Exception as e:
            print(f"{what}: {type(e).__name__}: {str(e).splitlines()[0]}")
