"""Inductor with the C++ wrapper: a torch.cond branch that returns one value twice (two clones
of it, which Inductor makes one buffer) crashes the process with SIGSEGV when that branch runs
(dynsmith F47). `CppWrapperCpu.codegen_subgraph_suffix` (torch/_inductor/codegen/
cpp_wrapper_cpu.py) moves each subgraph output into its outer output with `std::move`, so the
second `buf2 = std::move(false_graph_0_buf0)` takes an already moved-from, null handle, and the
next use of `buf2` (`assert_size_stride`, `release()`) dereferences it. The Python wrapper is
right; so is the C++ wrapper when the other branch runs. The top-level graph's outputs had the
same defect (pytorch#122826, fixed by #122846: copy the handles of repeated outputs, move only
the last); subgraph outputs did not get that fix. Each case runs in a subprocess (it crashes)."""
import subprocess
import sys

CASE = r'''
import sys, torch
import torch._inductor.config as icfg
icfg.fx_graph_cache = False
icfg.cpp_wrapper = sys.argv[1] == "cpp"

def dup(x):             # one value returned twice
    v = torch.neg(x)
    return v.clone(), v.clone()

def two(x):
    return x + 1, x + 2

def f(p, x):
    return torch.cond(p, two, dup, (x,))

p, x = torch.tensor(sys.argv[2] == "True"), torch.full((3,), 0.25)
with torch.no_grad():
    out = torch.compile(f, fullgraph=True)(p, x)
print([t.tolist() for t in out], "eager:", [t.tolist() for t in f(p, x)])
'''

for wrapper, pred in [("python", "False"), ("cpp", "True"), ("cpp", "False")]:
    r = subprocess.run([sys.executable, "-c", CASE, wrapper, pred], capture_output=True, text=True)
    what = r.stdout.strip().splitlines()[-1] if r.returncode == 0 else f"exit {r.returncode}"
    print(f"{wrapper} wrapper, pred={pred} (runs {'two' if pred == 'True' else 'dup'}): {what}")
# python wrapper, pred=False (runs dup): [[-0.25, -0.25, -0.25], [-0.25, -0.25, -0.25]] eager: (the same)
# cpp wrapper, pred=True (runs two): [[1.25, 1.25, 1.25], [2.25, 2.25, 2.25]] eager: (the same)
# cpp wrapper, pred=False (runs dup): exit -11
