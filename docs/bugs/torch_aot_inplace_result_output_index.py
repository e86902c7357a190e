"""AOT autograd (torch.compile training graphs, keep_inference_input_mutations=True: aot_eager,
Inductor): when a function returns the result of an in-place op on an input whose mutation is
kept in the graph (`v = b.mul_(2)`, b not requiring grad) and also mutates an input whose
mutation is replayed at runtime (`a.mul_(y)`, y requiring grad), a *different* output is
replaced by b (dynsmith F41). Output 0 below should be y * 3 = 1.5; it is b (2.0).

At fault: torch/_functorch/_aot_autograd/graph_capture_wrappers.py, create_functionalized_fn:
`flat_outs[i] = fw_args[info.base_idx]` indexes the traced function's flat outputs with the
user-output index i, but they start with the mutated inputs returned at runtime
(`meta.num_mutated_inp_runtime_indices` of them). The offset index fixes it (checked by
monkeypatch, aot_eager and Inductor)."""
import torch


def f(a, b, y):
    v = b.mul_(2.0)   # in-place on an input that does not require grad: its result returned
    a.mul_(y)         # in-place on another input, with data that requires grad
    return y * 3, v


def run(fn):
    a, b = torch.ones(()), torch.ones(())
    y = torch.tensor(0.5, requires_grad=True)
    out = fn(a, b, y)
    return [o.detach().tolist() for o in out], a.tolist()


print("eager                        ", run(f))
for backend in ["eager", "aot_eager", "inductor", "aot_eager_decomp_partition"]:
    torch._dynamo.reset()
    print(f"{backend:29s}", run(torch.compile(f, backend=backend, fullgraph=True)))
# torch 2.13.0+cpu:
# eager                         ([1.5, 2.0], 0.5)
# eager                         ([1.5, 2.0], 0.5)
# aot_eager                     ([2.0, 2.0], 0.5)     <- output 0 is b
# inductor                      ([2.0, 2.0], 0.5)     <- output 0 is b
# aot_eager_decomp_partition    ([1.5, 2.0], 0.5)     (keep_inference_input_mutations off)
#
# Returning `v` first (`return v, y * 3`) writes b's value into `a` instead (a == 2.0, not 0.5):
# the replaced flat output is then a's new value, which the runtime epilogue copies into a.
