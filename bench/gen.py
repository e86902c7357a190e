"""Generator benchmark: ms per graph (generation, input search, ONNX build+check, and together)
and validity (input search succeeds, ONNX checker passes, reference valid, ORT with optimizations
off agrees), at 10 and 20 nodes.

    python bench/gen.py [--n 300] [--nodes 10 20] [--nnsmith-python /tmp/nns/bin/python]

With `--nnsmith-python`, NNSmith's own generator is timed in the same run (see
bench/nnsmith_gen.py) and the generation times are given as a ratio against it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaign.artifacts import Materialized  # noqa: E402
from campaign.backends import make_backend  # noqa: E402
from campaign.oracle import compare  # noqa: E402
from campaign.reference import run_reference  # noqa: E402
from campaign.testcase import TestCase  # noqa: E402
from campaign.worker import set_single_thread  # noqa: E402
from ir import GenConfig, generate  # noqa: E402
from ir.analysis.precision import output_precisions  # noqa: E402
from ir.numerics.input_search import make_valid  # noqa: E402


def stats(xs: list[float]) -> str:
    a = np.asarray(xs)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return f"median {med:7.2f} ms  IQR [{q1:.2f}, {q3:.2f}]  max {a.max():.1f}"


def nnsmith_ms(python: str, nodes: int, n: int) -> list[float]:
    script = Path(__file__).with_name("nnsmith_gen.py")
    out = subprocess.run([python, str(script), "--nodes", str(nodes), "--n", str(n)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms"]


def run(nodes: int, n: int, nnsmith_python: str | None = None) -> None:
    cfg = GenConfig(nodes=nodes)
    ort = make_backend("ort_noopt")
    t_gen, t_inp, t_onnx, iters, drops = [], [], [], [], []
    outcome: Counter[str] = Counter()
    for seed in range(n):
        t0 = time.perf_counter()
        g = generate(seed, cfg)
        t1 = time.perf_counter()
        valid = make_valid(g, seed)
        t2 = time.perf_counter()
        if valid is None:
            outcome["input search failed"] += 1
            continue
        g, search, values = valid.graph, valid.search, valid.search.values
        iters.append(search.iters)
        drops.append(len(valid.dropped))
        m = Materialized(TestCase(str(seed), seed, g, values))
        try:
            m.onnx_bytes  # noqa: B018 (builds and checks it)
        except Exception:
            outcome["onnx checker failed"] += 1
            continue
        t3 = time.perf_counter()
        t_gen.append((t1 - t0) * 1e3)
        t_inp.append((t2 - t1) * 1e3)
        t_onnx.append((t3 - t2) * 1e3)
        ref = run_reference(m)
        if ref.problem:
            outcome["reference invalid"] += 1
            continue
        res = ort.evaluate(m)
        if res.failed:
            outcome["ort failed"] += 1
        elif not compare(ref.outputs, res.outputs, output_precisions(g)).ok:
            outcome["ort mismatch"] += 1
        else:
            outcome["valid and agrees"] += 1
    total = [a + b + c for a, b, c in zip(t_gen, t_inp, t_onnx, strict=True)]
    print(f"== {nodes} nodes, {n} graphs")
    print(f"  generation     {stats(t_gen)}")
    print(f"  search+repair  {stats(t_inp)}")
    print(f"  onnx build+chk {stats(t_onnx)}")
    print(f"  together       {stats(total)}")
    if nnsmith_python:
        base = nnsmith_ms(nnsmith_python, nodes, min(n, 100))
        ratio = float(np.median(base) / np.median(t_gen))
        print(f"  NNSmith gen    {stats(base)}  ({len(base)} graphs; ours is {ratio:.1f}x faster)")
    valid = n - outcome["onnx checker failed"] - outcome["reference invalid"] - outcome["input search failed"]
    print(f"  validity (search+repair ok, ONNX checker, reference valid): {valid}/{n} = {100 * valid / n:.1f}%")
    print(f"  repair dropped instructions in {sum(1 for d in drops if d)}/{len(drops)} graphs "
          f"(mean {np.mean(drops):.2f} per graph)")
    print(f"  ORT (no opt) agrees on valid: {outcome['valid and agrees']}/{valid}")
    searched = sum(1 for i in iters if i > 0)
    print(f"  input search: {searched}/{len(iters)} needed search steps (max {max(iters)})")
    print(f"  outcomes: {dict(outcome)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--nodes", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--nnsmith-python", help="an interpreter with NNSmith installed (baseline)")
    args = ap.parse_args()
    set_single_thread()
    for nodes in args.nodes:
        run(nodes, args.n, args.nnsmith_python)


if __name__ == "__main__":
    main()
