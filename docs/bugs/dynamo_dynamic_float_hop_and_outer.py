"""Dynamo: a dynamic Python float used both inside a torch.cond branch (or a torch.while_loop
body) and outside it fails to trace (dynsmith F44), with any backend:
  - first used inside the branch: "InternalTorchDynamoError: RuntimeError: Argument 'item' of
    Node 'mul' does not belong to this Graph" (graph lint): `VariableBuilder.wrap_symfloat`
    makes the float's graph input in the root tracer but its `.item()` with
    `tx.output.create_proxy`, i.e. in the HOP's subtracer, and the outer use then reads a node
    of the subgraph;
  - first used outside: "TorchRuntimeError: RuntimeError when making fake tensor call": the
    outer SymFloat is lifted into the branch as a free variable, and the HOP's
    `validate_subgraph_args_types` (torch/_higher_order_ops/utils.py) allows Tensor, int and
    SymInt operands only.
The float is dynamic with dynamic=True, or by default once a second call passes another value.
Static floats (dynamic=False, or specialize_float=True) work; so does a float used only
inside the branch under backend="eager"/"aot_eager" (with Inductor that is F40)."""
import torch

Z = lambda: torch.zeros((), dtype=torch.int64)  # noqa: E731


def cond_first_in_branch(p, x, s):
    z = torch.cond(p, lambda x: x * s, lambda x: x.clone(), (x,))
    return z, x * s


def cond_first_outside(p, x, s):
    y = x * s
    return torch.cond(p, lambda x: x * s, lambda x: x.clone(), (x,)), y


def while_first_in_body(p, x, s):
    z = torch.while_loop(lambda i, x: i < 1, lambda i, x: (i + 1, x * s), (Z(), x.clone()))[1]
    return z, x * s


def while_first_outside(p, x, s):
    y = x * s
    return torch.while_loop(lambda i, x: i < 1, lambda i, x: (i + 1, x * s), (Z(), x.clone()))[1], y


p, x = torch.tensor(True), torch.tensor([1.0, 2.0])
for f in (cond_first_in_branch, cond_first_outside, while_first_in_body, while_first_outside):
    print(f.__name__, "eager:", [t.tolist() for t in f(p, x, 0.5)])
    for how, backend, kw in [("dynamic=False", "eager", dict(dynamic=False)),
                             ("dynamic=True", "eager", dict(dynamic=True)),
                             ("dynamic=True", "aot_eager", dict(dynamic=True)),
                             ("dynamic=True", "inductor", dict(dynamic=True)),
                             ("default, 2nd float", "eager", {}),
                             ("dynamic=True, specialize_float", "eager", dict(dynamic=True))]:
        torch._dynamo.reset()
        try:
            with torch._dynamo.config.patch(specialize_float="specialize" in how):
                g = torch.compile(f, backend=backend, fullgraph=True, **kw)
                out = g(p, x, 0.5)
                if "2nd" in how:
                    out = g(p, x, 0.25)
            print(f"  {backend} {how}: ok {[t.tolist() for t in out]}")
        except Exception as e:
            print(f"  {backend} {how}: {type(e).__name__}: {str(e).splitlines()[0][:90]}")
# cond_first_in_branch eager: [[0.5, 1.0], [0.5, 1.0]]
#   eager dynamic=False: ok [[0.5, 1.0], [0.5, 1.0]]
#   eager dynamic=True: InternalTorchDynamoError: RuntimeError: Argument 'item' of Node 'mul' does not belong to this Gr
#   aot_eager dynamic=True: InternalTorchDynamoError: (the same)
#   inductor dynamic=True: InternalTorchDynamoError: (the same)
#   eager default, 2nd float: InternalTorchDynamoError: (the same)
#   eager dynamic=True, specialize_float: ok [[0.5, 1.0], [0.5, 1.0]]
# cond_first_outside: TorchRuntimeError: RuntimeError when making fake tensor call in the same four cases
# while_first_in_body / while_first_outside: the same two errors
