"""torch 2.13 torch.compile (Inductor, CPU): a `torch.while_loop` with a Python int carried (its
docstring's own Example 2: `while_loop(cond_fn, body_fn, (0, x))`) fails to compile:

    InductorError: AssertionError: A subgraph argument other than striding has been modified;
    FakeTensorUpdater cannot update this argument!

Eager, `backend="eager"` and `backend="aot_eager"` run it; the same loop with the counter as a
0-d int64 tensor compiles. Possibly pytorch#166525 ("scalar carries in Inductor while_loop"),
whose fix (pytorch#185063) is not in this release or does not cover it.

Found by dynsmith's `scalars=number` torch program form (the loop counter as a Python int).
Run: python torch_while_loop_int_carry_inductor.py  (prints REPRODUCED or NOT REPRODUCED)
"""
import torch


def f(x):
    return torch.while_loop(lambda i, a: i < 3,
                            lambda i, a: (i + 1, (a * 2).clone()),
                            (0, x.clone()))[1]


x = torch.ones(3)
want = f(x)
try:
    got = torch.compile(f, backend="inductor", fullgraph=True)(x)
    print("NOT REPRODUCED", torch.equal(got, want))
except Exception as e:
    print("REPRODUCED:", type(e).__name__, str(e).splitlines()[0])
