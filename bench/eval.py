"""Evaluation benchmark: per backend, time per test (compile, run) and what the sandbox costs
against an in-process call. Prints figures (median and spread); asserts nothing about time.

For each backend, the same valid generated tests are evaluated twice, in this process and in a
`campaign.sandbox.Sandbox` process, alternating per test; the sandbox overhead of a test is its
sandboxed wall time minus its in-process wall time (the pair differs only by the process
boundary: job transfer, result transfer, stage bookkeeping). Both sides get the backend's
per-process setup (`child_init`: e.g. Inductor's on-disk caches off). The first test of each
backend is reported apart (Inductor's first compile in a process is the slow one) and left out
of medians. `null` is a backend that does nothing: its sandboxed wall time is the pure
round-trip cost (job packing included: once per test, shared by all backends).
Also measured: starting a sandbox process (fork + handshake) and replacing a killed one.

    python bench/eval.py [--backends ort ort_noopt tvm inductor onnx_export eager]
                         [--tests 20] [--nodes 10]
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaign.artifacts import Materialized  # noqa: E402
from campaign.backends import Backend, BackendResult, make_backend  # noqa: E402
from campaign.backends.base import input_feed_sets  # noqa: E402
from campaign.reference import run_reference  # noqa: E402
from campaign.sandbox import Job, Sandbox, SandboxConfig  # noqa: E402
from campaign.verdict import Stage  # noqa: E402
from campaign.worker import FuzzWorker, WorkerConfig, set_single_thread  # noqa: E402
from ir import GenConfig  # noqa: E402


class NullBackend(Backend):
    """Returns the inputs untouched: measures the harness and the process boundary alone."""

    def __init__(self) -> None:
        self.name = "null"

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        return self.stage(Stage.RUN, lambda: [x for feeds in input_feed_sets(m)
                                              for x in feeds.values()], result, "run_ms")


def spread(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    a = np.asarray(xs)
    p10, med, p90 = np.percentile(a, [10, 50, 90])
    return f"{med:8.2f} [{p10:.2f}, {p90:.2f}]"


def valid_tests(n: int, gen: GenConfig) -> list[tuple[Materialized, Job]]:
    """The first `n` generated tests whose reference is valid (the worker's own make_test)."""
    worker = FuzzWorker(WorkerConfig(generator=gen, backends=["ort"], sandbox=False))
    out: list[tuple[Materialized, Job]] = []
    seed = 0
    while len(out) < n and seed < 50 * n:
        try:
            tc = worker.make_test(f"b{seed}", seed)
            m = Materialized(tc)
            m.onnx_bytes  # noqa: B018 (builds and checks it)
            if run_reference(m).problem is None:
                out.append((m, Job.of(m)))
        except Exception:  # a generator failure: not this benchmark's business
            pass
        seed += 1
    return out


def bench_backend(backend: Backend, tests: list[tuple[Materialized, Job]]) -> None:
    sb = Sandbox(backend, SandboxConfig(timeout_s=300, max_tests_per_process=None))
    t0 = time.perf_counter()
    backend.prepare()
    prepare_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sb.start()
    start_ms = (time.perf_counter() - t0) * 1e3
    # the in-process runs get the sandbox process's per-process setup too (e.g. Inductor's
    # on-disk caches off), so that the pair differs only by the process boundary
    scratch = tempfile.mkdtemp(prefix="dynsmith-bench-")
    backend.child_init(scratch)
    compile_ms, run_ms, inproc, boxed, over = [], [], [], [], []
    first = ""
    failed = 0
    for i, (m, job) in enumerate(tests):
        t0 = time.perf_counter()
        a = backend.evaluate(m)
        t1 = time.perf_counter()
        b = sb.evaluate(m, job)
        t2 = time.perf_counter()
        if a.failed or b.failed or a.verdict or b.verdict:
            failed += 1
            continue
        if i == 0:
            first = (f"first test: in-process {(t1 - t0) * 1e3:.0f} ms, "
                     f"sandboxed {(t2 - t1) * 1e3:.0f} ms")
            continue
        compile_ms.append(b.compile_ms or 0.0)
        run_ms.append(b.run_ms or 0.0)
        inproc.append((t1 - t0) * 1e3)
        boxed.append((t2 - t1) * 1e3)
        over.append((t2 - t1 - (t1 - t0)) * 1e3)
    # replacing a dead process: kill it while idle, time the next (transparent) evaluation
    m, job = tests[-1]
    os.kill(sb.pid, signal.SIGKILL)
    time.sleep(0.05)
    t0 = time.perf_counter()
    sb.evaluate(m, job)
    replace_ms = (time.perf_counter() - t0) * 1e3
    sb.close()
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"== {backend.name}: {len(inproc)} tests timed ({failed} failed/skipped, left out); "
          f"prepare {prepare_s:.1f} s; {first}")
    print(f"   compile ms (in sandbox)     {spread(compile_ms)}")
    print(f"   run ms (in sandbox)         {spread(run_ms)}")
    print(f"   wall ms in-process          {spread(inproc)}")
    print(f"   wall ms sandboxed           {spread(boxed)}")
    print(f"   sandbox overhead ms         {spread(over)}")
    print(f"   sandbox start {start_ms:.1f} ms; "
          f"replace a killed process + 1 test {replace_ms:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", nargs="+",
                    default=["null", "ort", "ort_noopt", "tvm", "eager", "onnx_export", "inductor"])
    ap.add_argument("--tests", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=10)
    args = ap.parse_args()
    set_single_thread()
    tests = valid_tests(args.tests + 1, GenConfig(nodes=args.nodes))
    print(f"{len(tests)} valid tests of {args.nodes} nodes; figures: median [p10, p90]")
    for name in args.backends:
        backend = NullBackend() if name == "null" else make_backend(name)
        bench_backend(backend, tests)


if __name__ == "__main__":
    main()
