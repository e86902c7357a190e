"""Two torch.compiler.nested_compile_region functions made by one factory (one `def`, so one
code object, different closures) share one compiled body: the second call reuses the first's
subgraph, and the result is silently wrong (or, when the bodies' output shapes differ, a
later op fails, e.g. torch.cond's "When merging two branches' output in torch.cond, expected
same dim but got 1 and 0").

Dynamo's subgraph-reuse cache (torch/_dynamo/variables/invoke_subgraph.py) is keyed on
`get_fn_code(fn_var)`, the function's `__code__` (pytorch#179145, "Use fn.__code__ instead of
id(fn) for nested_compile_region reuse cache"). The reuse condition then re-evaluates the first
trace's guards with the *argument* sources replaced; the closure cells the body read are
reached through the first function's own source, which is not replaced, so their guards are
checked against the first function again and pass.

One line per case and backend; the reference is eager (the mark does nothing there).
    python dynamo_region_reuse_closure.py          # shows the bug
    python dynamo_region_reuse_closure.py --fix    # in-process patch: the reuse key of a
        function with a closure is the function object, not its code; every line ok
"""
import re
import sys
import warnings

import torch

warnings.filterwarnings("ignore")


def install_fix():
    import torch._dynamo.variables.invoke_subgraph as isg

    orig = isg.get_fn_code

    def get_fn_code(fn_var):
        code = orig(fn_var)
        fn = fn_var.get_function() if hasattr(fn_var, "get_function") else None
        if code is not None and getattr(fn, "__closure__", None):
            return (code, id(fn))  # a closure's body depends on its cells
        return code

    isg.get_fn_code = get_fn_code


def make(op):
    def region(x):
        return op(x)
    return torch.compiler.nested_compile_region(region)


def make_scale(k):
    def region(x):
        return x * k
    return torch.compiler.nested_compile_region(region)


sin_r, cos_r = make(torch.sin), make(torch.cos)
two_r, three_r = make_scale(2.0), make_scale(3.0)
sum_r = make(lambda x: x.sum(0))


def sin_cos(x):
    return sin_r(x) + 10 * cos_r(x)


def scales(x):
    return two_r(x) + 10 * three_r(x)


def sum_then_cond(x):  # the fuzzer's shape: the reused body has another output shape
    s = sum_r(x)
    return torch.cond(s > 0, lambda y: y.cos(), lambda y: sin_r(y), (x,))


CASES = (sin_cos, scales, sum_then_cond)


def main():
    if "--fix" in sys.argv:
        install_fix()
    print(torch.__version__, "(--fix)" if "--fix" in sys.argv else "")
    for case in CASES:
        for backend in ("eager", "aot_eager", "inductor"):
            torch._dynamo.reset()
            x = -torch.arange(1.0, 4.0)
            label = f"{case.__name__:13} {backend:9}"
            try:
                out = torch.compile(case, backend=backend, fullgraph=True)(x)
                ref = case(x)
                ok = out.shape == ref.shape and torch.allclose(out, ref)
                print(f"{label} {'ok' if ok else 'WRONG'} {out.tolist()} eager {ref.tolist()}")
            except Exception as e:
                m = re.search(r"got (\w+\(.*?\))\n", str(e))
                print(f"{label} FAIL {type(e).__name__}: "
                      f"{m.group(1) if m else str(e).splitlines()[0][:160]}")


if __name__ == "__main__":
    main()
