"""torch.compile (torch 2.13, Inductor, CPU): a reshape of a computed [B, 5] tensor to [5, B]
(B a dynamic batch dim) guards on the *order* of B and 5, so a generic batch size on the
other side of 5 compiles again (B = 4 then B = 8: `2 <= x.size()[0] <= 4` fails). The guard
is useless: the reindexing it decides is abandoned anyway.

Why: Inductor lowers `view` of a computed buffer with `View.dynamic_reshape_indexer`
(torch/_inductor/ir.py). It first tries the optimistic `_dynamic_reshape_indexer`, whose
`compare_sizes(a, b)` asks `sizevars.guard_or_false(Eq(a, b))`, then `Lt(a, b)`, then
`Gt(a, b)`. On a *backed* symbol `guard_or_false` is an ordinary guard: `Lt(B, 5)` is
evaluated on the hint (B = 4: true) and recorded as the guard `B < 5`. For [B, 5] -> [5, B]
the optimistic algorithm then fails (it merges B with 5 and `check_equals(5*B, 5)` raises
AssertionError, or for B > 5 splits and `check_equals(B, 5*B)` fails), and
`dynamic_reshape_indexer` falls back to reindexing through the flat size, a path that is the
same for every B. The guards of the failed attempt stay in the ShapeEnv, so the graph only
serves B in [2, 4] (or [6, oo) when the first B is 8). compare_sizes and its
guard_or_false calls came in with unbacked-symbol support; torch's older code compared
`size_hint`s there (no guard) and guarded only with guard_equals on the path it took.

Not needed: the conv2d of the campaign graph (it only narrowed the range to 3 <= B <= 4),
the reshape's leading 1s. Needed: an op before the reshape (a view of a graph *input* is a
ReinterpretView and takes another path: no recompile). `backend="aot_eager"` does not
recompile; `mark_dynamic` (strict) recompiles the same way and raises nothing (a range guard,
not a specialization). `--fix` runs the optimistic attempt on size hints without guarding and
installs its guards only if the attempt succeeds: then one graph serves every B (B = 5 and
multiples of 5 still compile again: `_reshape_view_helper`'s `Ne(B, 5)`, `Ne(Mod(B, 5), 0)`
guards at trace time, F17's mechanism; the guards of a cached graph are replayed, so `--fix`
turns the FX graph and AOTAutograd caches off).

Found by dynsmith's dynamic-shape campaign (`cpu_dynshape`, docs/dynshape.md): a `recompile`
finding, localized to `inductor: a shape guard of compare_sizes (_inductor/ir.py)`, from
`reshape[shape=[1,1,5,B]](asin(atan(sinh(elu(x0)))))` feeding a conv2d.

    TORCH_LOGS=recompiles python docs/bugs/inductor_reshape_indexer_size_order_guard.py
    python docs/bugs/inductor_reshape_indexer_size_order_guard.py --fix  # one graph each
"""
import sys

import torch
from torch._inductor.compile_fx import compile_fx

if "--fix" in sys.argv[1:]:  # guard only on what a successful optimistic attempt decided
    import sympy
    from torch._inductor.ir import View
    from torch._inductor.virtualized import V

    optimistic = View._dynamic_reshape_indexer

    def deferred_guards(old_size, new_size, dense_dim=None):
        sv = V.graph.sizevars
        real, seen = sv.guard_or_false, []

        def on_hint(expr):
            if expr.free_symbols - set(sv.shape_env.backed_var_to_val):  # unbacked: as before
                return real(expr)
            val = bool(expr.xreplace(sv.shape_env.backed_var_to_val))
            seen.append(expr if val else sympy.Not(expr))
            return val

        sv.guard_or_false = on_hint
        try:
            reindex = optimistic(old_size, new_size, dense_dim)
        finally:
            del sv.guard_or_false
        for expr in seen:  # the attempt succeeded: keep the decisions it relied on
            real(expr)
        return reindex

    View._dynamic_reshape_indexer = staticmethod(deferred_guards)
    # a cached graph replays the guards of the compile that made it (s77 <= 4 included)
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False

compiled = []


def counting(gm, example_inputs):
    compiled.append(gm)
    return compile_fx(gm, example_inputs)


def counting_aot_eager(gm, example_inputs):
    compiled.append(gm)
    return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


def reshape_of_computed(x):  # x: [B, 5]
    return x.sin().reshape(5, x.shape[0])


def reshape_of_input(x):  # a view of the graph input itself: no recompile
    return x.reshape(5, x.shape[0]).sin()


def run(fn, backend, mark, batches):
    torch._dynamo.reset()
    compiled.clear()
    c = torch.compile(fn, backend=backend)
    counts = []
    with torch.no_grad():
        for b in batches:
            x = torch.randn(b, 5)
            mark(x, 0)
            torch.testing.assert_close(c(x), fn(x))
            counts.append(len(compiled))
    failures = getattr(torch._dynamo.utils, "guard_failures", {}).get(fn.__code__, [])
    guards = [str(f).split("#")[0].strip() for f in failures]
    print(f"{fn.__name__}, {backend.__name__}, {mark.__name__}, B={list(batches)}: "
          f"graphs compiled so far {counts}" + (f"; failed guard: {guards[0]}" if guards else ""))
    return counts[-1]


mm = torch._dynamo.maybe_mark_dynamic
n = run(reshape_of_computed, counting, mm, (4, 8))  # [1, 2]: B=8 compiles again
run(reshape_of_computed, counting, mm, (8, 16, 3))  # [1, 1, 2]: B=3 compiles again
run(reshape_of_computed, counting, torch._dynamo.mark_dynamic, (4, 8))  # [1, 2], no error
run(reshape_of_computed, counting_aot_eager, mm, (4, 8))  # [1, 1]
run(reshape_of_input, counting, mm, (4, 8))  # [1, 1]
print("REPRODUCED" if n > 1 else "NOT REPRODUCED")
