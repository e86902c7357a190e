"""torch 2.13: writes through views that torch.compile's functionalization (AOTAutograd)
gets wrong, while eager is right. `aot_eager` already fails, so the bugs are in
functionalization, not in Inductor's code generation. Found by dynsmith (in-place writes
through views; docs/inplace.md).

  1. `unfold` with gaps between the windows (step > size): the write-back zeroes every element
     no window covers instead of keeping it (as unfold_backward would) - wrong values. With
     step == size it is right.
  2. `unfold` with a single window whose size exceeds the step (shape [1, n], strides (1, 1)):
     refused with "functionalization encountered a tensor being mutated that has internal
     overlap", though no element repeats (eager runs it).
  3. any write through `expand()` of a bool tensor (even to the same shape) fails: the
     expand's inverse subtracts bools ("Subtraction, the `-` operator, with two bool tensors
     is not supported").

    python docs/bugs/torch_functionalize_views.py   # eager vs aot_eager vs inductor per case
"""
import torch


def unfold_gaps(x):
    y = x * 1
    y.unfold(1, 1, 2).relu_()  # windows at column 0; column 1 is a gap
    return y


def unfold_single_window(x):
    y = x * 1
    y.unfold(0, 3, 1).add_(1)  # one window of 3: no element repeats
    return y


def expand_bool(x, v):
    m = x > 0
    m.expand(4, 4).index_put_((torch.tensor([1]), torch.tensor([2])), v)
    return m


CASES = [
    (unfold_gaps, (torch.tensor([[-1.0, -2.0], [-3.0, -4.0], [5.0, -6.0]]),)),
    (unfold_single_window, (torch.zeros(3),)),
    (expand_bool, (torch.randn(4, 4), torch.tensor(True))),
]

for fn, args in CASES:
    eager = fn(*[a.clone() for a in args])
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        try:
            out = torch.compile(fn, backend=backend, fullgraph=True)(*[a.clone() for a in args])
            verdict = "ok" if torch.equal(out, eager) else f"WRONG: {out.tolist()} (eager {eager.tolist()})"
        except Exception as e:  # noqa: BLE001
            lines = [ln for ln in str(e).splitlines() if "Error" in ln]
            verdict = "FAILS: " + (lines[0] if lines else type(e).__name__)[:150]
        print(f"{fn.__name__:22} {backend:9} {verdict}")
