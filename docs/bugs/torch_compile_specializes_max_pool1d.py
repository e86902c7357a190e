"""torch.compile (torch 2.13, Inductor, CPU) specializes the length of `F.max_pool1d`'s input:
every new length compiles again (and with `mark_dynamic` the first call raises
ConstraintViolationError: "your code specialized it to be a constant"). `F.max_pool2d` and
`F.avg_pool1d` keep the same dim dynamic. Found by dynsmith's dynamic-shape tests
(docs/dynshape.md): a `recompile` finding, maxpool1d over a symbolic length.

Also shown: `F.conv1d` specializes a dynamic *input-channel* dim (the length stays dynamic);
channel counts are rarely dynamic in real models, so this one may be by design.

    python docs/bugs/torch_compile_specializes_max_pool1d.py
"""
import torch
import torch.nn.functional as F


def check(name, fn, shapes, dim):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="inductor", fullgraph=True)
    xs = [torch.randn(*s) for s in shapes]
    torch._dynamo.mark_dynamic(xs[0], dim)
    with torch.no_grad():
        try:
            compiled(*xs)
            print(f"{name}: dynamic")
        except Exception as e:
            print(f"{name}: {type(e).__name__}: {str(e).splitlines()[1].strip()[:100]}")


check("max_pool1d(x[3, 8, L], 2, 2)", lambda x: F.max_pool1d(x, 2, 2), [(3, 8, 5)], 2)
check("max_pool2d(x[3, 8, L, 5], 2, 2)", lambda x: F.max_pool2d(x, 2, 2), [(3, 8, 5, 5)], 2)
check("avg_pool1d(x[3, 8, L], 2, 2)", lambda x: F.avg_pool1d(x, 2, 2), [(3, 8, 5)], 2)
check("conv1d(x[4, C, 6], w[4, C, 3]), C dynamic", F.conv1d, [(4, 7, 6), (4, 7, 3)], 1)
check("conv1d(x[4, 7, L], w[4, 7, 3]), L dynamic", F.conv1d, [(4, 7, 6), (4, 7, 3)], 2)
