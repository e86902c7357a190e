"""The same torch.compiler.nested_compile_region called in a control-flow body and in a
control-flow op nested in that body fails to compile: "AttributeError: 'Module' object has no
attribute 'while_loop_body_graph_0.repeated_subgraph0'" (aot_eager and Inductor alike; Dynamo
alone, backend="eager", compiles it; the C++ wrapper is not needed).

When AOT autograd re-traces the outer body (make_fx), the inner body is traced first and its
invoke_subgraph registers the region's graph module in the inner body's GraphModule as
`repeated_subgraph0` (invoke_subgraph's ProxyTorchDispatchMode rule,
torch/_higher_order_ops/invoke_subgraph.py: `_unwrap_proxy` registers it only when no module of
`tracer.root.named_modules()` is it). Then the outer body's call finds it registered, but nested:
the tracer's `create_arg` (torch/fx/_symbolic_trace.py) names it by its dotted path
`while_loop_body_graph_0.repeated_subgraph0`, and PythonKeyTracer.create_node
(torch/fx/experimental/proxy_tensor.py) does `getattr(self.root, target)` on that dotted name.

One line per case (where the region is called) and backend; the reference is eager.
    python aot_region_nested_hop_subgraph_attr.py          # shows the bug
    python aot_region_nested_hop_subgraph_attr.py --fix    # in-process patch: a graph module
        found only under a nested path is registered again at the root; every line ok
"""
import re
import sys
import warnings

import torch
from torch._higher_order_ops.scan import scan

warnings.filterwarnings("ignore")


def install_fix():
    from torch.fx.experimental.proxy_tensor import PythonKeyTracer

    orig = PythonKeyTracer.create_arg

    def create_arg(self, a):
        if isinstance(a, torch.fx.GraphModule) and a is not self.root \
                and not any(m is a for _, m in self.root.named_children()) \
                and any(m is a for _, m in self.root.named_modules()):
            name = self.get_fresh_qualname("repeated_subgraph")
            self.root.register_module(name, a)
            return self.create_node("get_attr", name, (), {})
        return orig(self, a)

    PythonKeyTracer.create_arg = create_arg


@torch.compiler.nested_compile_region
def region(x):
    return torch.log(x)


def zero():
    return torch.zeros((), dtype=torch.int64)


def while_in_while(n, x):  # the fuzzer's shape
    def inner(i, y):
        return i + 1, region(y)

    def outer(i, y):
        _, y2 = torch.while_loop(lambda i, y: i < n, inner, (zero(), y))
        return i + 1, region(y2)

    return torch.while_loop(lambda i, y: i < n, outer, (zero(), x))[1]


def cond_in_while(n, x):
    def outer(i, y):
        y2 = torch.cond(i < 5, lambda y: region(y) + 1, lambda y: y.clone(), (y,))
        return i + 1, region(y2)

    return torch.while_loop(lambda i, y: i < n, outer, (zero(), x))[1]


def cond_in_cond(n, x):
    def then(y):
        return region(torch.cond(n > 0, lambda y: region(y) + 1, lambda y: y.clone(), (y,)))

    return torch.cond(n > 0, then, lambda y: y.clone(), (x,))


def scan_in_while(n, x):
    def outer(i, y):
        _, ys = scan(lambda c, r: (c.clone(), region(r)), y[0].clone(), y)
        return i + 1, region(ys + 3)

    return torch.while_loop(lambda i, y: i < n, outer, (zero(), x))[1]


def while_then_outside(n, x):  # control: the region in a body and at the top level
    y = region(x)
    return torch.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, region(y)), (zero(), y))[1]


CASES = (while_in_while, cond_in_while, cond_in_cond, scan_in_while, while_then_outside)


def main():
    if "--fix" in sys.argv:
        install_fix()
    print(torch.__version__, "(--fix)" if "--fix" in sys.argv else "")
    n = torch.tensor(1)
    for case in CASES:
        for backend in ("eager", "aot_eager", "inductor"):
            torch._dynamo.reset()
            x = torch.rand(2, 3, dtype=torch.float64) + 3
            label = f"{case.__name__:18} {backend:9}"
            try:
                out = torch.compile(case, backend=backend, fullgraph=True)(n, x)
                ref = case(n, x)
                print(f"{label} {'ok' if torch.allclose(out, ref) else 'WRONG'}")
            except Exception as e:
                m = re.search(r"AttributeError: .*", str(e))
                print(f"{label} FAIL {type(e).__name__}: "
                      f"{m.group(0) if m else str(e).splitlines()[0][:160]}")


if __name__ == "__main__":
    main()
