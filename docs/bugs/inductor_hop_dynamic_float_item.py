"""Inductor with dynamic floats: a Python float used inside a torch.cond branch (or a
torch.while_loop body) fails to lower: "LoweringException: KeyError: 'unbacked_bindings'
target: aten._local_scalar_dense.default" (dynsmith F40). Dynamo passes the float as a 0-d
float64 tensor and .item()s it inside the subgraph; the tensorify pass that removes such
item() calls does not look into subgraphs, and Inductor's item() lowering expects an unbacked
symbol. aot_eager runs it; so does the same code without the cond."""
import torch

def f(x, scale):
    return torch.cond(x.sum() > 0, lambda x: x * scale, lambda x: x.clone(), (x,))

x = torch.tensor([3.0, -5.0, 4.0])
print("eager", f(x, 0.5).tolist())
print("aot_eager", torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)(x, 0.5).tolist())
for how, kw in [("dynamic=True", dict(dynamic=True)), ("default, 2nd float", {})]:
    torch._dynamo.reset()
    fn = torch.compile(f, backend="inductor", fullgraph=True, **kw)
    try:
        fn(x, 0.5)
        print("inductor", how, "ok", fn(x, 0.25).tolist())   # the 2nd value makes it dynamic
    except Exception as e:
        print("inductor", how, type(e).__name__, str(e).splitlines()[0])
# eager [1.5, -2.5, 2.0]; aot_eager the same
# inductor dynamic=True InductorError LoweringException: KeyError: 'unbacked_bindings'
# inductor default, 2nd float InductorError LoweringException: KeyError: 'unbacked_bindings'
