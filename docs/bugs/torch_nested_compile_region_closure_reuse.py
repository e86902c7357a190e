"""torch.compile: two `torch.compiler.nested_compile_region` functions made by one factory (the
same code object, other closure cells) are one region to Dynamo: the second call reuses the
subgraph traced for the first and silently returns the first function's result (dynsmith F60).

    def make(op):
        @torch.compiler.nested_compile_region
        def region(x):
            return op(x)
        return region
    r_sin, r_cos = make(torch.sin), make(torch.cos)
    torch.compile(lambda x: (r_sin(x), r_cos(x)))(x)     # (sin(x), sin(x))

Dynamo's invoke_subgraph reuse cache (torch/_dynamo/variables/invoke_subgraph.py) is keyed on
`get_fn_code(fn_var)`, the function's `__code__` (pytorch#179145: `fn.__code__` instead of
`id(fn)`), and its reuse condition re-checks the call's inputs and the guards on the sources
the first trace read, with the argument sources remapped; the function object is no argument,
so its closure cells (or `__defaults__`) are read through the first function's sources, whose
guards still pass. Any closure value: a function, a float, a tensor, a bool branched on.
Eagerly the mark does nothing, and the `eager`, `aot_eager` and `inductor` backends all reuse
wrongly. The same inside a higher-order op run eagerly (`torch.while_loop` compiles its body).

One line per case and backend: `<case> <backend> ok`, or `WRONG <got> expected <eager>`.
`--fix` gives each function a code object of its own (its name differs), which makes every
case ok: a workaround, and the proof that the shared code object is the key at fault.

    python torch_nested_compile_region_closure_reuse.py [--fix]
"""
import sys
import types
import warnings

import torch

warnings.filterwarnings("ignore")
FIX = "--fix" in sys.argv
ncr = torch.compiler.nested_compile_region
_count = 0


def mark(fn):
    """nested_compile_region(fn); with --fix on a copy of fn with a code object of its own."""
    global _count
    if FIX:
        _count += 1
        name = f"{fn.__name__}_{_count}"
        fn = types.FunctionType(fn.__code__.replace(co_name=name), fn.__globals__, name,
                                fn.__defaults__, fn.__closure__)
    return ncr(fn)


def make_op(op):                       # a closure over a function
    def region(x):
        return op(x)
    return mark(region)


def make_scale(c):                     # over a float
    def region(x):
        return x * c
    return mark(region)


def make_shift(t):                     # over a tensor
    def region(x):
        return x + t
    return mark(region)


def make_flag(flag):                   # over a bool the body branches on
    def region(x):
        return x.sin() if flag else x.cos()
    return mark(region)


def make_default(op):                  # no closure: a default argument
    def region(x, op=op):
        return op(x)
    return mark(region)


r_sin, r_cos = make_op(torch.sin), make_op(torch.cos)
r_id, r_log = make_op(torch.clone), make_op(torch.log)
s2, s3 = make_scale(2.0), make_scale(3.0)
t1, t10 = make_shift(torch.ones(3)), make_shift(torch.full((3,), 10.0))
f_sin, f_cos = make_flag(True), make_flag(False)
d_sin, d_cos = make_default(torch.sin), make_default(torch.cos)

CASES = {
    "closure_fn": lambda x: torch.stack([r_sin(x), r_cos(x)]),
    "chain": lambda x: r_log(r_id(x)),          # the fuzzer's shape: log(identity(x))
    "closure_float": lambda x: torch.stack([s2(x), s3(x)]),
    "closure_tensor": lambda x: torch.stack([t1(x), t10(x)]),
    "closure_bool": lambda x: torch.stack([f_sin(x), f_cos(x)]),
    "default_arg": lambda x: torch.stack([d_sin(x), d_cos(x)]),
}


def in_while_loop(x):                  # no torch.compile: while_loop compiles its body
    return torch.while_loop(lambda i, y: i < 1, lambda i, y: (i + 1, r_log(r_id(y))),
                            (torch.zeros((), dtype=torch.int64), x))[1]


def check(case, backend, got, want):
    if torch.allclose(got, want):
        print(f"{case:15s} {backend:10s} ok")
    else:
        r = lambda t: [round(v, 4) for v in t.flatten()[-3:].tolist()]  # the second call's
        print(f"{case:15s} {backend:10s} WRONG {r(got)} expected {r(want)}")


x = torch.tensor([0.5, 1.0, 2.0])
print(f"torch {torch.__version__}{' --fix' if FIX else ''}")
for case, fn in CASES.items():
    want = fn(x)                       # eager: the marks do nothing
    for backend in ["eager", "aot_eager", "inductor"]:
        torch._dynamo.reset()
        try:
            got = torch.compile(fn, backend=backend, fullgraph=True)(x)
        except Exception as e:
            print(f"{case:15s} {backend:10s} FAIL {type(e).__name__}: {str(e).splitlines()[0][:100]}")
            continue
        check(case, backend, got, want)
torch._dynamo.reset()
check("while_loop", "eager-HOP", in_while_loop(x), torch.log(x))
# torch 2.13.0+cpu, 2.14.1+cu130 and 2.15.0+cu132 (on the CPU):
#   every case on every backend WRONG: the second function returns the first's result
#   closure_fn      eager      WRONG [0.4794, 0.8415, 0.9093] expected [0.8776, 0.5403, -0.4161]
#   chain           eager      WRONG [0.5, 1.0, 2.0] expected [-0.6931, 0.0, 0.6931]
#   closure_float   eager      WRONG [1.0, 2.0, 4.0] expected [1.5, 3.0, 6.0]
#   closure_tensor  eager      WRONG [1.5, 2.0, 3.0] expected [10.5, 11.0, 12.0]
#   (closure_bool, default_arg as closure_fn; aot_eager and inductor the same)
#   while_loop      eager-HOP  WRONG [0.5, 1.0, 2.0] expected [-0.6931, 0.0, 0.6931]
# --fix: every line ok
