"""torch.compile (aot_eager and Inductor): an in-place write through an `expand` view of a bool
tensor fails to compile, "Subtraction, the `-` operator, with two bool tensors is not
supported": functionalization writes the view back into its base by subtraction. Eager runs
it; an int or float tensor compiles. pytorch#93386 (closed) shows the same failure with
`add_`; it still reproduces."""
import torch


def f(a, b, w):
    m = torch.gt(a, b)          # a bool tensor
    m.expand(()).copy_(w)       # written through an expand view (no repeated elements)
    return m.clone()


a, b, w = torch.tensor(1.0), torch.tensor(0.5), torch.tensor(False)
print("eager:", f(a, b, w).item())
for backend in ("aot_eager", "inductor"):
    torch._dynamo.reset()
    try:
        print(f"{backend}:", torch.compile(f, backend=backend, fullgraph=True)(a, b, w).item())
    except Exception as e:
        line = next(x for x in str(e).splitlines() if "Subtraction" in x or "Error" in x)
        print(f"{backend}: fails: {line.strip()}")
