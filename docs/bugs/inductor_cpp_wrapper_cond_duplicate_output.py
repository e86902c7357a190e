"""Inductor: a torch.cond branch that returns one value twice (two clones of it) comes out
returning one buffer twice, while the outer graph takes the cond's two outputs for two buffers
(dynsmith F47). With the C++ wrapper the process crashes with SIGSEGV when that branch runs;
with the default Python wrapper the result is silently wrong as soon as a later kernel reuses
the first output's buffer in place (`return a + 1, b` gives `b == a + 1`).

Root cause: the post-grad pass `remove_noop_ops` (torch/_inductor/fx_passes/post_grad.py)
removes both clones, since it does not add the source's storage to `output_storages` after
replacing the first one, so the branch returns `(neg, neg)`; `Conditional.create`'s guard
against aliased branch outputs never fires (`_has_aliased_buffers` compares `TensorBox` ids, and
it checks `true_outputs` twice). Then `CppWrapperCpu.codegen_subgraph_suffix` emits
`buf1 = std::move(b); buf2 = std::move(b);` (buf2 null: SIGSEGV), and the Python wrapper's
memory planning reuses `buf1`, which is `buf2` (`buf3 = buf1; del buf1  # reuse`, then an
in-place add). Each case runs in a subprocess (some crash): `default` is torch 2.13 as
installed, `no-noop` replaces `remove_noop_ops` with a no-op, `fix` applies the one-line fix
(`output_storages.add(src_storage)` when an output clone is removed)."""
import subprocess
import sys

CASE = r'''
import inspect, sys, torch
import torch._inductor.config as icfg
import torch._inductor.fx_passes.post_grad as pg
icfg.fx_graph_cache = False
wrapper, pred, use, mode = sys.argv[1:]
icfg.cpp_wrapper = wrapper == "cpp"
if mode == "no-noop":
    pg.remove_noop_ops = lambda graph: None
elif mode == "fix":
    src = inspect.getsource(pg.remove_noop_ops)
    old = "                node.replace_all_uses_with(src)\n"
    assert src.count(old) == 1
    src = src.replace(old, old + "                if node_storage in output_storages:\n"
                                 "                    output_storages.add(src_storage)\n")
    exec(compile(src, pg.__file__, "exec"), pg.__dict__)

def dup(x):             # one value returned twice
    v = torch.neg(x)
    return v.clone(), v.clone()

def two(x):
    return x + 1, x + 2

def f(p, x):
    a, b = torch.cond(p, two, dup, (x,))
    if use == "add":    # a later kernel writes a + 1 into a's buffer
        return a + 1, b
    return a, b

p, x = torch.tensor(pred == "True"), torch.full((3,), 0.25)
with torch.no_grad():
    out = torch.compile(f, fullgraph=True)(p, x)
    ref = f(p, x)
ok = all(torch.equal(o, r) for o, r in zip(out, ref))
print(f"compiled {[o.tolist() for o in out]} eager {[r.tolist() for r in ref]}",
      "ok" if ok else "WRONG")
'''

CASES = [  # wrapper, pred (False runs dup), what follows the cond, mode
    ("python", "False", "none", "default"),
    ("python", "False", "add", "default"),
    ("python", "False", "add", "no-noop"),
    ("python", "False", "add", "fix"),
    ("cpp", "True", "none", "default"),
    ("cpp", "False", "none", "default"),
    ("cpp", "False", "add", "no-noop"),
    ("cpp", "False", "add", "fix"),
]
for wrapper, pred, use, mode in CASES:
    r = subprocess.run([sys.executable, "-c", CASE, wrapper, pred, use, mode],
                       capture_output=True, text=True)
    what = r.stdout.strip().splitlines()[-1] if r.returncode == 0 else f"exit {r.returncode}"
    ret = "a + 1, b" if use == "add" else "a, b"
    print(f"{wrapper:6} wrapper, pred={pred:5} (runs {'two' if pred == 'True' else 'dup'}), "
          f"return {ret:8}, {mode:8}: {what}")
# torch 2.13.0+cpu:
# python wrapper, pred=False (runs dup), return a, b    , default : compiled [[-0.25, -0.25, -0.25], [-0.25, -0.25, -0.25]] eager (the same) ok
# python wrapper, pred=False (runs dup), return a + 1, b, default : compiled [[0.75, 0.75, 0.75], [0.75, 0.75, 0.75]] eager [[0.75, 0.75, 0.75], [-0.25, -0.25, -0.25]] WRONG
# python wrapper, pred=False (runs dup), return a + 1, b, no-noop : ... ok
# python wrapper, pred=False (runs dup), return a + 1, b, fix     : ... ok
# cpp    wrapper, pred=True  (runs two), return a, b    , default : compiled [[1.25, 1.25, 1.25], [2.25, 2.25, 2.25]] eager (the same) ok
# cpp    wrapper, pred=False (runs dup), return a, b    , default : exit -11
# cpp    wrapper, pred=False (runs dup), return a + 1, b, no-noop : ... ok
# cpp    wrapper, pred=False (runs dup), return a + 1, b, fix     : ... ok
