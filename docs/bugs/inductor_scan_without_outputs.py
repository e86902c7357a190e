"""torch.compile (Inductor, fullgraph=True, CPU): a torch scan whose combine function has no
per-step outputs (it returns `(next_carry, ())`) fails to compile:
"AssertionError: <built-in function getitem> is not an OpOverload" in GraphLowering.call_function.
The same program runs in eager and compiles with backend="aot_eager"; with one per-step
output (`(next_carry, carry.clone())`) Inductor compiles it and agrees."""
import torch
from torch._higher_order_ops.scan import scan


def no_outputs(init, xs):
    return scan(lambda c, x: (c + x, ()), init, xs)[0]


def one_output(init, xs):
    return scan(lambda c, x: (c + x, c.clone()), init, xs)[0]


init, xs = torch.ones(3), torch.ones(4, 3)
for f in (no_outputs, one_output):
    print(f"{f.__name__} eager:", f(init, xs).tolist())
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        try:
            out = torch.compile(f, fullgraph=True, backend=backend)(init, xs)
            print(f"{f.__name__} {backend}:", out.tolist())
        except Exception as e:
            print(f"{f.__name__} {backend}: {type(e).__name__}: {str(e).splitlines()[0]}")
