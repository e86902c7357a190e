"""A torch.compiler.nested_compile_region called in a scan's combine_fn cannot be
differentiated: scan's autograd fails with "AttributeError: 'FunctorchFunctionalizeAPI' object
has no attribute 'mode'" (eager HOP and torch.compile alike).

scan's autograd builds its joint graph with create_hop_joint_graph
(torch/_higher_order_ops/partitioner.py), which functionalizes the traced joint with
torch.func.functionalize; the invoke_subgraph in it dispatches to invoke_subgraph's
py_functionalize_impl (torch/_higher_order_ops/invoke_subgraph.py), which reads
`ctx.mode._tokens` unconditionally: only PythonFunctionalizeAPI has a `mode`, functorch's
FunctorchFunctionalizeAPI (and CppFunctionalizeAPI) do not. scan's own functionalize rule
guards with `hasattr(ctx, "mode")`.

One line per case: region body, direction of the run (no grad / grad), backend.
The reference is the same recurrence as a Python loop.
    python torch_scan_region_backward_functionalize.py          # shows the bug
    python torch_scan_region_backward_functionalize.py --fix    # in-process patch: a functorch
        functionalize rule for invoke_subgraph without the token bookkeeping; every line ok
"""
import re
import sys
import warnings

import torch
from torch._higher_order_ops.scan import scan

warnings.filterwarnings("ignore")


def install_fix():
    from torch._C._functorch import TransformType as TT
    from torch._higher_order_ops.invoke_subgraph import invoke_subgraph
    from torch._higher_order_ops.utils import FunctionalizeCtxWrapper
    from torch._subclasses.functional_tensor import FunctorchFunctionalizeAPI

    def functorch_functionalize(interpreter, subgraph, identifier, *operands):
        ctx = FunctorchFunctionalizeAPI(interpreter)
        unwrapped = ctx.unwrap_tensors(operands)
        with ctx.redispatch_to_next():
            out = invoke_subgraph(FunctionalizeCtxWrapper(ctx, subgraph), identifier,
                                  *unwrapped)
        return ctx.wrap_tensors(out)

    invoke_subgraph.functorch_table[TT.Functionalize] = functorch_functionalize


@torch.compiler.nested_compile_region
def region_sin(x):
    return x.sin()


@torch.compiler.nested_compile_region
def region_id(x):
    return x.clone()  # `return x` is refused: "Encountered aliasing" (documented)


def run(region, init, xs):
    def combine(c, x):
        y = region(c * x)
        return c + y, y.clone()
    return scan(combine, init, xs)


def loop(region, init, xs):
    c, ys = init, []
    for x in xs:
        y = region.__wrapped__(c * x) if hasattr(region, "__wrapped__") else region(c * x)
        c = c + y
        ys.append(y)
    return c, torch.stack(ys)


def reason(e):
    m = re.search(r"got (\w+\(.*?\))\n", str(e))
    return f"{type(e).__name__}: {m.group(1) if m else str(e).splitlines()[0][:160]}"


def main():
    if "--fix" in sys.argv:
        install_fix()
    print(torch.__version__, "(--fix)" if "--fix" in sys.argv else "")
    for name, region in (("sin", region_sin), ("id", region_id)):
        for grad in (False, True):
            for backend in ("eager", "aot_eager", "inductor"):
                torch._dynamo.reset()
                torch.manual_seed(0)
                init = torch.tensor(0.5, requires_grad=grad)
                xs = torch.randn(3)
                f = run if backend == "eager" else torch.compile(run, backend=backend,
                                                                 fullgraph=True)
                label = f"{name:3} {'grad' if grad else 'nograd':6} {backend:9}"
                try:
                    c, ys = f(region, init, xs)
                    rc, rys = loop(region, init, xs)
                    if grad:
                        g, = torch.autograd.grad(c + ys.sum(), init)
                        rg, = torch.autograd.grad(rc + rys.sum(), init)
                        ok = torch.allclose(g, rg)
                        print(f"{label} {'ok' if ok else 'WRONG'} grad={g.item():.6f} "
                              f"loop={rg.item():.6f}")
                    else:
                        ok = torch.allclose(c, rc) and torch.allclose(ys, rys)
                        print(f"{label} {'ok' if ok else 'WRONG'}")
                except Exception as e:
                    print(f"{label} FAIL {reason(e)}")


if __name__ == "__main__":
    main()
