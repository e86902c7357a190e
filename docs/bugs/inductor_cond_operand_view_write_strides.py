"""Inductor: a `torch.cond` operand written in place through a permuted view just before the
cond fails to compile-and-run with "AssertionError: expected size 2==2, stride 1==9 at dim=1;
expected size 9==9, stride 2==1 at dim=2 ... Error in op: input" (dynsmith F55).

    y = x * w                    # (1, 2, 9), contiguous in eager
    y.permute(0, 2, 1).relu_()   # written in place through a permuted view
    torch.cond(p, lambda b: (b.clone(),), lambda b: (b.clone(),), (y,))

Inductor computes the functionalized `y` (`permute(relu(permute(y)))`) into a buffer in the
view's layout, (1, 9, 2) contiguous, and hands the cond its reinterpretation as (1, 2, 9) with
strides (18, 1, 2). Each branch subgraph was compiled for the operand's traced strides,
(18, 9, 1), and checks them on entry (`assert_size_stride(false_graph_0_arg0_1, (1, 2, 9),
(18, 9, 1), 'input')`): the cond lowering does not make its operands match the strides its
subgraphs expect. Eager, and the `eager`, `aot_eager` and `aot_eager_decomp_partition`
backends, run and agree; without the cond (the branch inlined), or with the write made on `y`
itself, or with a view read but not written, Inductor runs and agrees too.

Passing `y.contiguous()` does not help: in the traced graph `y` is contiguous already, so the
call is a no-op; the layout Inductor chose for the buffer is what differs from the graph's.

One line per case, predicate and backend: `<case> p=<p> <backend> ok`, `WRONG` or `FAIL <error>`.

    python inductor_cond_operand_view_write_strides.py
"""
import warnings

import torch

warnings.filterwarnings("ignore")


def branches(p, y):
    out, = torch.cond(p, lambda b: (b.clone(),), lambda b: (b.clone(),), (y,))
    return out


def view_write(p, x, w):
    y = x * w
    y.permute(0, 2, 1).relu_()
    return branches(p, y)


def direct_write(p, x, w):
    y = x * w
    y.relu_()
    return branches(p, y)


def view_read(p, x, w):
    y = x * w
    _ = y.permute(0, 2, 1).relu()
    return branches(p, y)


def no_cond(p, x, w):
    y = x * w
    y.permute(0, 2, 1).relu_()
    return y.clone()


CASES = {"view_write": view_write, "direct_write": direct_write, "view_read": view_read,
         "no_cond": no_cond}
BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")


def one_line(e):
    msg = " ".join(str(e).split("\n")[0].split())
    return f"{type(e).__name__}: {msg}"[:200]


if __name__ == "__main__":
    print(f"torch {torch.__version__}")
    torch.manual_seed(0)
    x, w = torch.randn(1, 2, 9), torch.randn(1, 2, 1)
    for name, fn in CASES.items():
        for p in (torch.tensor(False), torch.tensor(True)):
            expect = fn(p, x, w)
            for backend in BACKENDS:
                torch._dynamo.reset()
                try:
                    got = torch.compile(fn, backend=backend, fullgraph=True)(p, x, w)
                    res = "ok" if torch.equal(got, expect) else "WRONG"
                except Exception as e:
                    res = "FAIL " + one_line(e)
                print(f"{name:12s} p={bool(p)!s:5s} {backend:26s} {res}")
