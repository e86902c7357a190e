"""torch.compile (Inductor, cpp_wrapper=True): a torch scan whose combine function returns
its carry unchanged both as the next carry and as the output generates C++ that does not
compile ("redeclaration of 'AtenTensorOpaque* bufN_handle'")."""
import torch
import torch._inductor.config as icfg
from torch._higher_order_ops.scan import scan


def f(init, xs):
    def combine(carry, x):
        return carry.clone(), carry.clone()

    return scan(combine, init, xs, dim=0, reverse=True)[1]


init, xs = torch.tensor(3), torch.tensor([7])
print("eager:", f(init, xs).tolist())
for wrapper in (False, True):
    torch._dynamo.reset()
    with icfg.patch(cpp_wrapper=wrapper):
        try:
            print(f"inductor cpp_wrapper={wrapper}:", torch.compile(f, fullgraph=True)(init, xs).tolist())
        except Exception as e:
            msg = str(e)
            err = next((ln for ln in msg.splitlines() if "error:" in ln), msg.splitlines()[0])
            print(f"inductor cpp_wrapper={wrapper}: {type(e).__name__}: {err.split('error:')[-1].strip()}")
