"""torch.cond: the backward fails when a branch returns a non-float tensor beside a float one
(dynsmith F32). Eager HOP, aot_eager and Inductor alike: AssertionError: outs_to_grad length
(1) != tangents length (2)."""
import torch

def f(x):
    return torch.cond(x.sum() > 0,
                      lambda x: (x > 0, x.sin()),
                      lambda x: (x < 0, x.cos()),
                      (x,))

x = torch.randn(4, requires_grad=True)
mask, y = f(x)
print("fwd ok", mask.dtype, y.requires_grad, mask.requires_grad)
try:
    print(torch.autograd.grad(y.sum(), x))
except AssertionError as e:
    print("AssertionError:", e)
