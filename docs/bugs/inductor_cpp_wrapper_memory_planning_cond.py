"""Inductor with the C++ wrapper and memory_planning=True: a torch.cond whose branches allocate
buffers fails to compile (dynsmith F45): "CppCompileError: ... error: 'pool0' was not declared
in this scope" (in the campaign's program "'true_graph_0_buf0' was not declared in this scope").
The C++ wrapper inlines the branches into `if (...) { ... } else { ... }` blocks of one
function, and `MemoryPlanner.plan` (torch/_inductor/codegen/memory_planning.py) plans the whole
line list as one flat scope, ignoring the EnterSubgraphLine/ExitSubgraphLine markers that
`memory_plan_reuse` honours: the pool is created where it is first used (in the then block) and
used again in the else block, where it is out of scope. The Python wrapper emits each branch as
its own function and plans it alone (right); memory_planning=False or the Python wrapper
compiles and agrees with eager. memory_planning only applies to inference graphs."""
import torch
import torch._inductor.config as icfg

icfg.fx_graph_cache = False


def f(p, x):
    def then(x):
        return (torch.sinh(torch.cosh(torch.asin(x))),)

    def other(x):
        return (x.clone(),)

    return torch.cond(p, then, other, (x,))[0].tanh()


x, p = torch.rand(8) * 0.5, torch.tensor(True)
print("eager", f(p, x)[:3].tolist())
for cpp_wrapper, memory_planning in [(False, True), (True, False), (True, True)]:
    torch._dynamo.reset()
    try:
        with icfg.patch(cpp_wrapper=cpp_wrapper, memory_planning=memory_planning), torch.no_grad():
            out = torch.compile(f, fullgraph=True)(p, x)
        print(f"cpp_wrapper={cpp_wrapper} memory_planning={memory_planning}: ok", out[:3].tolist())
    except Exception as e:
        errors = [line.split("error: ", 1)[-1] for line in str(e).splitlines() if "error: " in line]
        print(f"cpp_wrapper={cpp_wrapper} memory_planning={memory_planning}: {type(e).__name__}",
              errors[:1] or str(e).splitlines()[0])
# eager [...]
# cpp_wrapper=False memory_planning=True: ok (the same values)
# cpp_wrapper=True memory_planning=False: ok (the same values)
# cpp_wrapper=True memory_planning=True: InductorError ["'pool0' was not declared in this scope"]
