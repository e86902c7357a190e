"""torch.compile of a one-layer torch.lstm whose input does not require grad but whose weights
do (a frozen encoder upstream): aot_eager and Inductor fail, eager differentiates (dynsmith F33,
pytorch#185163)."""
import torch

def f(x, h0, w_ih, w_hh, b_ih, b_hh):
    # one-layer LSTM, torch.nn.LSTM's functional form
    return torch.lstm(x, (h0, h0), [w_ih, w_hh, b_ih, b_hh],
                      True, 1, 0.0, False, False, False)[0]

torch.manual_seed(0)
x = torch.randn(5, 2, 4)                       # data: does not require grad
h0 = torch.zeros(1, 2, 3)
ws = [torch.randn(12, 4, requires_grad=True), torch.randn(12, 3, requires_grad=True),
      torch.randn(12, requires_grad=True), torch.randn(12, requires_grad=True)]

ref = torch.autograd.grad(f(x, h0, *ws).sum(), ws)   # eager: fine
for backend in ["aot_eager", "inductor"]:
    torch._dynamo.reset()
    try:
        out = torch.compile(f, backend=backend, fullgraph=True)(x, h0, *ws)
        grads = torch.autograd.grad(out.sum(), ws)
        print(backend, "ok", all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, ref)))
    except Exception as e:
        print(backend, type(e).__name__, str(e).splitlines()[0][:120])
