"""torch.while_loop: the backward of a loop whose body never runs (cond false at once) still
applies one step of the body's backward (dynsmith F38). Eager HOP, aot_eager and Inductor
alike: d/dx of while_loop(i < 0, x * 3) is 3, not 1; the forward is right."""
import torch

def f(n, x):
    return torch.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 3.0),
                            (torch.zeros((), dtype=torch.int64), x))[1]

def python_loop(n, x):                      # the reference
    for _ in range(int(n)):
        x = x * 3.0
    return x

for trips in [0, 1, 2]:
    n = torch.tensor(trips)
    row = []
    for name, fn in [("python", python_loop), ("eager-HOP", f),
                     ("aot_eager", torch.compile(f, backend="aot_eager", fullgraph=True)),
                     ("inductor", torch.compile(f, backend="inductor", fullgraph=True))]:
        x = torch.ones(2, requires_grad=True)
        y = fn(n, x)
        (gx,) = torch.autograd.grad(y.sum(), x)
        row.append(f"{name} y={y[0].item():g} dy/dx={gx[0].item():g}")
    print(f"trips={trips}:", ", ".join(row))
# trips=0: python y=1 dy/dx=1, eager-HOP y=1 dy/dx=3, aot_eager y=1 dy/dx=3, inductor y=1 dy/dx=3
# trips=1 and trips=2: all agree (3, 9)
