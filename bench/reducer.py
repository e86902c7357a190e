"""Reducer benchmark: the GraphIR reducer (`ir.shrink.reducer.reduce_graph`) of two source trees
on the same 20 findings: reduced size and seconds per finding, before and after (issue 31).

The findings are deterministic, cheap and need no compiler: 20 graphs from the generator
(`ir.generate`, seeds 7000..7019, `nodes` 24 to 52; every other one with `if`, `loop` and
`scan` knobs on), made valid by the input search (`make_valid`), each with a stand-in bug
predicate the reducer must keep true, evaluated in-process, in five kinds (finding i has kind
i % 5):
  - `edge`: a fake backend crashes on a pattern: the graph still holds an instruction of op X
    whose result an instruction of op Y reads (X -> Y: the last edge of the original);
  - `many`: a fake backend crashes when the graph holds all of a set of ops at once (the ops of
    every sixth top-level instruction of the original: up to 6 of them), so the reduced graph
    keeps several parts and most deletions fail;
  - `rank`: a fake backend crashes on op X when its first operand has rank >= r (r: the rank
    it has in the original, X the op of the original's largest-rank instruction);
  - `wrong`: a fake backend computes op X wrongly (its float results times 1.5 plus 1): the
    outputs differ from the interpreter's (the test suite's `_wrong_on`), X the op of the
    middle instruction, or the nearest one whose error shows (none: `edge`);
  - `nested`: a fake backend crashes on op X inside a body (X: the first op found in a body);
    where the graph has no body, `edge` instead.
The graphs, values and predicates are written once (GraphIR text round-trips), then each tree's
reducer runs in a process of its own (that tree first on `sys.path`), one tree after the other,
`ReduceConfig(max_tests=300, max_seconds=180, seed=0)`. Size: instructions (nested counted) and
elements (`Size`); "no larger" compares `Size` without its text tie-break.

    git worktree add /tmp/reducer_before 49dfafd   # the tree before issue 31
    python bench/reducer.py [--before /tmp/reducer_before] [--after .] [--only 0,3] [--repeat 3]

Prints, per finding, original and reduced size, wall and CPU seconds of the reduction (the least
of `--repeat` runs, torch on one thread; CPU seconds are the steadier figure on a shared
machine) and predicate calls (what costs a compile in a real reduction) for both trees; then
the medians and totals before/after and their ratios after/before (same run), and how many
findings got smaller, equal or larger.
Asserts nothing: the machine is shared. `--after` defaults to this checkout; give a clean
worktree of a commit when others edit this one.

Measured (2-core machine shared with other jobs, load 3-4; one run, `--repeat 3`, before =
49dfafd, after = commit 2905da5; i: instructions, e: elements; tests: predicate calls):

   # kind    op                           original       before        after s before  s after  cpu b  cpu a  tests b/a
   0 edge    acos                      24i   2626e   2i      3e   2i      3e     0.05     0.02   0.02   0.02  13/13
   1 many    if+loop+scan             112i    808e   4i     16e   4i     16e     0.06     0.06   0.06   0.06  39/39
   2 wrong   where                     32i    190e   1i      4e   1i      4e     0.02     0.02   0.02   0.02  16/16
   3 nested  logical_xor              137i   1619e   2i      6e   2i      6e     0.02     0.02   0.02   0.02  14/14
   4 rank    erf                       29i   1022e   1i      2e   1i      2e     0.02     0.02   0.02   0.02  18/18
   5 edge    neg                      116i    865e   2i      3e   2i      3e     0.05     0.05   0.05   0.05  32/32
   6 many    expand+logical_not+min+n  48i   1701e   5i     63e   5i     63e     0.13     0.13   0.13   0.13  82/82
   7 wrong   reduce_sum                63i    616e   1i      2e   1i      2e     0.02     0.02   0.02   0.02  7/7
   8 edge    cast                      24i   1740e   2i      9e   2i      9e     0.03     0.03   0.03   0.03  21/21
   9 rank    conv_transpose2d          54i  10828e   1i      3e   1i      3e     0.04     0.04   0.04   0.04  17/17
  10 edge    argmax                    32i    217e   2i      4e   2i      4e     0.02     0.02   0.02   0.02  19/19
  11 many    gt+reduce_sum            111i   3413e   2i      4e   2i      4e     0.02     0.02   0.02   0.02  14/14
  12 wrong   unsqueeze                 37i   2166e   1i      2e   1i      2e     0.02     0.02   0.02   0.02  10/10
  13 nested  logical_and              136i    317e   2i      6e   2i      6e     0.01     0.01   0.01   0.01  6/6
  14 rank    tril                      43i    318e   1i      2e   1i      2e     0.02     0.02   0.02   0.02  16/16
  15 edge    logical_and               83i   1890e   2i      3e   2i      3e     0.03     0.04   0.03   0.03  27/27
  16 many    cosh+layer_norm+logical_  24i    168e   6i     13e   6i     13e     0.17     0.17   0.17   0.17  111/111
  17 wrong   reduce_sum                52i   9521e   1i      2e   1i      2e     0.02     0.02   0.02   0.02  10/10
  18 edge    gru                       29i   1866e   2i     33e   2i     33e     0.11     0.11   0.11   0.11  19/19
  19 rank    reduce_sum                56i   2851e   1i      2e   1i      2e     0.03     0.02   0.03   0.02  17/17
  wall seconds: median before 0.024, after 0.024, ratio after/before 0.99; total before 0.88, after 0.88, ratio 0.99
  CPU seconds: median before 0.023, after 0.022, ratio after/before 0.96; total before 0.85, after 0.86, ratio 1.01
  predicate calls: before 508, after 508
  reduced size after vs before: {'smaller': 0, 'equal': 20, 'larger': 0}

Every finding reduces to the same size with the same predicate calls (508 in all): the
adaptive schedule's failure cap (50 failures in a row) is never reached on these findings, so
its rounds end at the same fixed point as the fixed order did. At a cap of 5 it was reached
(2 findings of an earlier set of 20 differed: 1 larger, 1 smaller) and cost more predicate
calls (a suspended pass restarts from its first candidate once another pass shrank the graph),
at 20 finding 5 took 92 calls instead of 32 (`drop_outputs` suspended before its 24th output):
hence 50. CPU time is the same (median ratio 0.96, total 1.01; 0.99 and 1.01 in a run at load 5-7),
and so is wall time here (0.99; it varies with the load).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
N_FINDINGS = 20
KINDS = ("edge", "many", "wrong", "nested", "rank")


# ---- the findings (built in this tree) --------------------------------------------------------

def _edges(g) -> list[tuple[str, str]]:
    out = []
    for block in _blocks(g):
        made = {r.name: inst.op.name for inst in block.insts for r in inst.results}
        for inst in block.insts:
            out += [(made[a], inst.op.name) for a in inst.args if a in made]
    return out


def _blocks(g):
    yield g
    for inst in g.insts:
        for b in inst.blocks:
            yield from _blocks(b)


def _spec(i: int, g, values: dict) -> dict:
    kind = KINDS[i % len(KINDS)]
    nested = [inst.op.name for inst, path in g.walk() if path]
    if kind == "nested" and not nested:
        kind = "edge"
    edges = _edges(g)
    if kind == "edge" and not edges:
        kind = "rank"
    if kind == "edge":
        x, y = edges[-1]
        return {"kind": kind, "x": x, "y": y}
    if kind == "nested":
        return {"kind": kind, "x": nested[0]}
    if kind == "many":
        step = max(1, len(g.insts) // 6)
        ops = sorted({inst.op.name for inst in g.insts[::step]})
        return {"kind": kind, "x": "+".join(ops)}
    types = g.types()
    plain = [inst for inst in g.insts if not inst.blocks]
    if kind == "rank":
        inst = max(plain, key=lambda inst: types[inst.args[0]].rank)
        return {"kind": kind, "x": inst.op.name, "rank": types[inst.args[0]].rank}
    middle = len(plain) // 2
    for inst in plain[middle:] + plain[:middle][::-1]:  # the middle one, else the nearest that shows
        spec = {"kind": kind, "x": inst.op.name}
        if predicate(spec)(g, values):
            return spec
    return _spec(0, g, values)  # none shows: `edge`


def build(folder: Path) -> None:
    import numpy as np

    import ir
    from ir.numerics.input_search import make_valid

    for i in range(N_FINDINGS):
        seed = 7000 + i
        cf = {"p_if": 0.3, "p_loop": 0.3, "p_scan": 0.2} if i % 2 else {}
        valid = None
        while valid is None:
            g = ir.generate(seed, ir.GenConfig(nodes=24 + 4 * (i % 8), **cf))
            valid = make_valid(g, seed)
            seed += 1000
        g = valid.graph
        (folder / f"{i}.ir").write_text(ir.print_graph(g))
        np.savez(folder / f"{i}.npz", **valid.search.values)
        (folder / f"{i}.json").write_text(json.dumps(_spec(i, g, valid.search.values)))


# ---- the predicates (run in either tree: graph API only) --------------------------------------

def predicate(spec: dict):
    import numpy as np
    import torch

    kind, x = spec["kind"], spec["x"]

    def walk(g):
        yield from g.walk()

    if kind == "edge":
        def edge(g, values) -> bool:
            return (x, spec["y"]) in set(_edges(g))
        return edge
    if kind == "nested":
        def nested(g, values) -> bool:
            return any(inst.op.name == x and path for inst, path in walk(g))
        return nested
    if kind == "many":
        def many(g, values) -> bool:
            return set(x.split("+")) <= {inst.op.name for inst, _ in walk(g)}
        return many
    if kind == "rank":
        def rank(g, values) -> bool:
            for block in _blocks(g):
                types = block.types()
                if any(inst.op.name == x and types[inst.args[0]].rank >= spec["rank"]
                       for inst in block.insts):
                    return True
            return False
        return rank

    def run(g, env, wrong: bool):
        env = dict(env)
        for inst in g.insts:
            def run_block(body, args):
                vals = run(body, {v.name: t for v, t in zip(body.inputs, args, strict=True)}, wrong)
                return [vals[o] for o in body.outputs]
            res = inst.op.torch_call([env[a] for a in inst.args], inst.blocks, run_block)
            res = (res,) if len(inst.results) == 1 else tuple(res)
            if wrong and inst.op.name == x:
                res = tuple(t * 1.5 + 1 if t.is_floating_point() else t for t in res)
            for r, t in zip(inst.results, res, strict=True):
                env[r.name] = t
        return env

    def wrong_answer(g, values) -> bool:
        if not any(inst.op.name == x for inst, _ in walk(g)):
            return False
        env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}
        with torch.no_grad():
            want, got = run(g, env, False), run(g, env, True)
        for o in g.outputs:
            a, b = want[o].numpy(), got[o].numpy()
            if a.shape != b.shape or not np.allclose(a, b, equal_nan=True):
                return True
        return False
    return wrong_answer


# ---- one tree's run (a process of its own) -----------------------------------------------------

def worker(folder: Path, only: list[int], repeat: int = 1) -> None:
    import numpy as np
    import torch

    import ir
    from ir.shrink.reducer import ReduceConfig, reduce_graph

    torch.set_num_threads(1)  # CPU seconds comparable between the trees on a shared machine

    for i in only:
        g = ir.verify(ir.parse((folder / f"{i}.ir").read_text()))
        values = dict(np.load(folder / f"{i}.npz"))
        spec = json.loads((folder / f"{i}.json").read_text())
        pred = predicate(spec)
        assert pred(g, values), f"finding {i}: the predicate does not hold on the original"
        wall, cpu = [], []
        for _ in range(repeat):  # (deterministic: the same result each time; the least time)
            t0, c0 = time.perf_counter(), time.process_time()
            res = reduce_graph(g, values, pred, ReduceConfig(max_tests=300, max_seconds=180, seed=0))
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        s = res.size
        print(json.dumps({"i": i, "spec": spec, "orig": [res.original.insts, res.original.elements],
                          "size": [s.insts, s.elements, s.rank, s.dtype_cost, s.io, s.params,
                                   s.outputs],
                          "seconds": min(wall), "cpu": min(cpu),
                          "tests": res.tests,
                          "stopped": res.stopped}), flush=True)


def run_tree(tree: Path, folder: Path, only: list[int], repeat: int) -> dict[int, dict]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = (f"import sys; sys.path.insert(0, {str(tree)!r}); sys.path.insert(1, {str(HERE / 'bench')!r}); "
            f"import reducer as b; from pathlib import Path; "
            f"b.worker(Path({str(folder)!r}), {only!r}, {repeat})")
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["i"]: r for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="/tmp/reducer_before")
    ap.add_argument("--after", default=str(HERE))
    ap.add_argument("--only", default="", help="finding indices, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="reductions per finding (least time)")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.after).resolve()))  # the findings: built with that tree
    only = [int(x) for x in args.only.split(",")] if args.only else list(range(N_FINDINGS))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build(folder)
        before = run_tree(Path(args.before).resolve(), folder, only, args.repeat)
        after = run_tree(Path(args.after).resolve(), folder, only, args.repeat)
    print(f"{'#':>2} {'kind':7} {'op':24} {'original':>12} {'before':>12} {'after':>12} "
          f"{'s before':>8} {'s after':>8} {'cpu b':>6} {'cpu a':>6}  tests b/a")
    verdicts = {"smaller": 0, "equal": 0, "larger": 0}
    for i in only:
        b, a = before[i], after[i]
        verdict = ("smaller" if a["size"] < b["size"] else "larger" if a["size"] > b["size"]
                   else "equal")
        verdicts[verdict] += 1
        print(f"{i:>2} {b['spec']['kind']:7} {b['spec']['x'][:24]:24} "
              f"{b['orig'][0]:>3}i {b['orig'][1]:>6}e {b['size'][0]:>3}i {b['size'][1]:>6}e "
              f"{a['size'][0]:>3}i {a['size'][1]:>6}e {b['seconds']:>8.2f} {a['seconds']:>8.2f} "
              f"{b['cpu']:>6.2f} {a['cpu']:>6.2f}  "
              f"{b['tests']}/{a['tests']}{'' if verdict == 'equal' else '  ' + verdict}"
              f"{'' if a['stopped'] == 'fixed point' else '  after: ' + a['stopped']}"
              f"{'' if b['stopped'] == 'fixed point' else '  before: ' + b['stopped']}")
    for key, what in (("seconds", "wall seconds"), ("cpu", "CPU seconds")):
        mb = statistics.median(before[i][key] for i in only)
        ma = statistics.median(after[i][key] for i in only)
        tb = sum(before[i][key] for i in only)
        ta = sum(after[i][key] for i in only)
        print(f"{what}: median before {mb:.3f}, after {ma:.3f}, ratio after/before {ma / mb:.2f}; "
              f"total before {tb:.2f}, after {ta:.2f}, ratio {ta / tb:.2f}")
    print(f"predicate calls: before {sum(before[i]['tests'] for i in only)}, "
          f"after {sum(after[i]['tests'] for i in only)}")
    print(f"reduced size after vs before: {verdicts}")


if __name__ == "__main__":
    main()
