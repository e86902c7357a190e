"""torch.compile (Inductor, cpp_wrapper=True): a nested torch.while_loop whose inner trip
count is the outer loop's carried value returns the wrong carry."""
import torch
import torch._inductor.config as icfg


def f(x, n):
    def outer_cond(i, n, c):
        return i < n

    def outer_body(i, n, c):
        def inner_cond(j, m, d):
            return j < m

        def inner_body(j, m, d):
            return j + 1, m.clone(), d.clone()

        d = torch.while_loop(inner_cond, inner_body, (torch.zeros((), dtype=torch.int64), c.clone(), c.clone()))[2]
        return i + 1, n.clone(), d.clone()

    return torch.while_loop(outer_cond, outer_body, (torch.zeros((), dtype=torch.int64), n.clone(), x.clone()))[2]


x, n = torch.tensor(0), torch.tensor(1)
print("eager:", f(x, n).item())
for wrapper in (False, True):
    torch._dynamo.reset()
    with icfg.patch(cpp_wrapper=wrapper):
        print(f"inductor cpp_wrapper={wrapper}:", torch.compile(f, fullgraph=True)(x, n).item())
