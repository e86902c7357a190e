"""The sandbox's process model: what the fork server costs against forking the caller, and
whether each gives sound rows, on the torch this interpreter has. Prints figures (median and
spread, the same-run ratio); asserts nothing about time.

Both start methods (`SandboxConfig.start_method`) run in one process, alternating per round:
- `fork`: the caller runs `backend.prepare()` (warm-ups: Inductor compiles a trivial program,
  forward and backward), then forks each sandbox process itself (the model before session 38);
- `forkserver`: a process exec'd fresh imports `Backend.PRELOAD` and forks each sandbox
  process, which runs `prepare()` itself before its first test (the model now).

Per backend and method: the seconds to the first ready process (`start`: for `fork` the
caller's `prepare` included, the first time), to a replacement after the process is killed
(`restart`: what a crash or a recycle costs), and the wall time of each test (`test`). The
tests are gradient tests made by the worker's own `make_test` in this process: their reference
runs eager autograd here, as a generation actor does, and `--poison` also compiles a training
graph here with AOT autograd, as a pytest process or the triage does before it opens a
sandbox. Rows whose message is torch's fork refusal ("fork-based multiprocessing") are counted:
a sound model has none on any build.

    python bench/sandbox_start.py [--backends aot_eager inductor ort] [--tests 8] [--rounds 2]
                                  [--poison]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaign.artifacts import Materialized  # noqa: E402
from campaign.backends import make_backend  # noqa: E402
from campaign.sandbox import START_METHODS, Job, Sandbox, SandboxConfig  # noqa: E402
from campaign.worker import FuzzWorker, WorkerConfig, set_single_thread  # noqa: E402
from ir import GenConfig  # noqa: E402

FORK_REFUSAL = "fork-based multiprocessing"


def spread(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    p10, med, p90 = np.percentile(np.asarray(xs), [10, 50, 90])
    return f"{med:7.3f} [{p10:.3f}, {p90:.3f}] n={len(xs)}"


def gradient_tests(n: int, nodes: int) -> list[tuple[Materialized, Job]]:
    """The first `n` gradient tests whose reference is valid (the worker's own `make_test`)."""
    gen = dataclasses.replace(GenConfig(), nodes=nodes, p_grad=1.0, p_transform=0.0)
    worker = FuzzWorker(WorkerConfig(generator=gen, backends=["eager"], sandbox=False))
    out: list[tuple[Materialized, Job]] = []
    seed = 0
    while len(out) < n and seed < 50 * n:
        try:
            tc = worker.make_test(f"s{seed}", seed)
        except Exception:  # a generator failure: not this benchmark's business
            tc = None
        if tc is not None and tc.grad is not None:
            m = Materialized(tc)
            out.append((m, Job.of(m)))
        seed += 1
    return out


def poison() -> None:
    """What a pytest process or the triage does before it opens a sandbox: AOT autograd
    traces a training graph here."""
    import torch

    f = torch.compile(lambda x: torch.sin(x) * 2, backend="aot_eager", fullgraph=True)
    x = torch.ones(4, requires_grad=True)
    f(x).sum().backward()
    torch._dynamo.reset()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", nargs="+", default=["aot_eager", "inductor", "ort"])
    ap.add_argument("--tests", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--poison", action="store_true")
    args = ap.parse_args()
    set_single_thread()
    import torch

    tests = gradient_tests(args.tests, args.nodes)
    if args.poison:
        poison()
    print(f"torch {torch.__version__}; {len(tests)} gradient tests, {args.nodes} nodes; "
          f"{args.rounds} rounds alternating {' / '.join(START_METHODS)}; caller "
          f"{'compiled a training graph (--poison)' if args.poison else 'ran eager autograd'}",
          flush=True)
    for spec in args.backends:
        start: dict[str, list[float]] = defaultdict(list)
        restart: dict[str, list[float]] = defaultdict(list)
        per_test: dict[str, list[float]] = defaultdict(list)
        refused: dict[str, int] = defaultdict(int)
        verdicts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for r in range(args.rounds):
            methods = START_METHODS if r % 2 == 0 else START_METHODS[::-1]
            for method in methods:
                sb = Sandbox(make_backend(spec), SandboxConfig(
                    timeout_s=300, max_tests_per_process=None, start_method=method))
                try:
                    t0 = time.perf_counter()
                    sb.start()
                    start[method].append(time.perf_counter() - t0)
                    for m, job in tests:
                        t0 = time.perf_counter()
                        res = sb.evaluate(m, job)
                        per_test[method].append(time.perf_counter() - t0)
                        verdicts[method][res.verdict.value if res.verdict else "ran"] += 1
                        refused[method] += FORK_REFUSAL in (res.error_msg or "")
                        if os.environ.get("BENCH_VERBOSE") and res.error_msg:
                            print(method, res.verdict, res.error_msg[:200])
                    os.kill(sb.pid, signal.SIGKILL)
                    sb._proc.join(10)  # dead before the restart is timed
                    t0 = time.perf_counter()
                    sb.start()
                    restart[method].append(time.perf_counter() - t0)
                finally:
                    sb.close()
        print(f"== {spec}")
        for method in START_METHODS:
            print(f"   {method:10s} start   {spread(start[method])}")
            print(f"   {method:10s} restart {spread(restart[method])}")
            print(f"   {method:10s} test    {spread(per_test[method])}   verdicts "
                  f"{dict(verdicts[method])}; fork refusals {refused[method]}")
        fs, fk = per_test["forkserver"], per_test["fork"]
        if fs and fk:
            print(f"   ratio per test forkserver / fork (medians): "
                  f"{np.median(fs) / np.median(fk):.2f}; restart: "
                  f"{np.median(restart['forkserver']) / np.median(restart['fork']):.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
