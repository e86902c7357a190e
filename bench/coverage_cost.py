"""Compiler coverage cost: per backend, a compile with coverage against one without, same tests,
same run (docs/coverage.md). Each backend gets the generated tests a campaign would send it
(none holding an op it lacks, `Backend.LACKS`). Prints figures (median and spread, the ratio); asserts nothing.

For each backend two sandbox processes run side by side: one measures every test
(`CoverageSpec(rate=1)`, the backend's packages), the other measures none. Each test goes to
both, the order alternating per test, so load drifts hit both sides alike. Per test:
- `cpu` ms: the evaluation's CPU time inside the sandbox process (`cpu_ms`: compile + run,
  the tracer's cost included; its start and the read-out of its data are not in it);
- `wall` ms: the whole call from the parent (job, evaluation, tracer start/stop and read-out,
  the lines shipped back).
The ratio is the median of the per-test ratios (lines / plain, arcs / plain). The first test of each
backend (a process's first compile is the slow one) is left out of the figures. ORT's Python
is a thin binding (no compiler code): it is measured with `onnxruntime` as its package, to show
that there is nothing to measure.

`--arcs` adds a third process per backend measuring arcs (branch coverage) instead of lines:
what the choice of lines saves.

    python bench/coverage_cost.py [--backends ort tvm onnx_export inductor_hop] [--tests 8]
                                  [--arcs]
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import numpy as np

# this folder holds bench/coverage.py, which would shadow coverage.py's package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaign.artifacts import Materialized  # noqa: E402
from campaign.backends import make_backend  # noqa: E402
from campaign.compiler_coverage import CoverageSpec, size  # noqa: E402
from campaign.sandbox import Job, Sandbox, SandboxConfig  # noqa: E402
from campaign.worker import set_single_thread  # noqa: E402
from ir import GenConfig  # noqa: E402

#: short names -> backend specs (the Inductor of cpu_dynamic's hop dialect)
SPECS = {"inductor_hop": "inductor?dialect=hop&cpp_wrapper=true", "ort": "ort", "tvm": "tvm",
         "onnx_export": "onnx_export"}
#: packages for backends that declare none
FALLBACK = {"ort": ("onnxruntime",)}


def spread(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    p10, med, p90 = np.percentile(np.asarray(xs), [10, 50, 90])
    return f"{med:9.2f} [{p10:.2f}, {p90:.2f}]"


def _bench_eval():
    """bench/eval.py, loaded by path: this script keeps bench/ off sys.path (its coverage.py
    would shadow the coverage package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_eval", Path(__file__).with_name("eval.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def valid_tests(n: int, gen: GenConfig) -> list[tuple[Materialized, Job]]:
    """The first `n` generated tests whose reference is valid (`bench/eval.py`'s)."""
    return _bench_eval().valid_tests(n, gen)


def arcs_sandbox(backend, cfg: SandboxConfig, spec: CoverageSpec) -> Sandbox:
    """A sandbox measuring arcs (branch coverage) instead of lines: its process inherits, by
    fork, a coverage.py object with `branch=True` in the tracer cache for `spec`
    (`campaign.compiler_coverage._TRACERS`; a bench-only side door: the campaign measures lines)."""
    from campaign import compiler_coverage as cc

    coverage = importlib.import_module("coverage")  # by name, as campaign/compiler_coverage.py does
    sb = Sandbox(backend, cfg, spec)
    cc._TRACERS[spec] = coverage.Coverage(data_file=None, config_file=False,
                                          include=spec.include, branch=True)
    try:
        sb.start()
    finally:
        del cc._TRACERS[spec]
    return sb


def bench(name: str, n: int, nodes: int, arcs: bool) -> None:
    spec = SPECS.get(name, name)
    backend = make_backend(spec)
    # the tests a campaign would send it: none holding an op its frontend lacks (routing)
    tests = valid_tests(n + 1, GenConfig(nodes=nodes).without(backend.LACKS))
    packages = backend.COVERAGE_PACKAGES or FALLBACK.get(name, ())
    cfg = SandboxConfig(timeout_s=600, max_tests_per_process=None)
    sides = {"plain": Sandbox(backend, cfg)}
    if arcs:
        sides["arcs"] = arcs_sandbox(backend, cfg, CoverageSpec(packages))
    sides["lines"] = Sandbox(backend, cfg, CoverageSpec(packages))
    for sb in sides.values():
        sb.start()
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    wall: dict[str, list[float]] = {k: [] for k in sides}
    lines: list[float] = []
    failed = 0
    union: set[tuple[str, int]] = set()
    names = list(sides)
    for i, (m, job) in enumerate(tests):
        got = {}
        k = i % len(names)
        for side in names[k:] + names[:k]:  # the order rotates per test
            t0 = time.perf_counter()
            got[side] = (sides[side].evaluate(m, job), (time.perf_counter() - t0) * 1e3)
        rc = got["lines"][0]
        if rc.covered is not None:
            union |= {(f, n) for f, ls in rc.covered.items() for n in ls}
        if any(r.failed or r.verdict for r, _ in got.values()):
            failed += 1
        if i == 0 or not all(r.cpu_ms for r, _ in got.values()):
            continue
        for side, (r, w) in got.items():
            cpu[side].append(r.cpu_ms or 0.0)
            wall[side].append(w)
        lines.append(float(size(rc.covered or {})))
    for sb in sides.values():
        sb.close()
    print(f"== {spec}: packages {', '.join(packages)}; {len(lines)} tests timed "
          f"({failed} of {len(tests)} did not pass: timed all the same)")
    for side in names:
        print(f"   cpu ms  {side:6} {spread(cpu[side])}")
    for side in names[1:]:
        ratio = [c / p for c, p in zip(cpu[side], cpu["plain"], strict=True)]
        print(f"   cpu ratio {side:6} / plain {spread(ratio)}")
    for side in names:
        print(f"   wall ms {side:6} {spread(wall[side])}")
    for side in names[1:]:
        ratio = [c / p for c, p in zip(wall[side], wall["plain"], strict=True)]
        print(f"   wall ratio {side:6} / plain {spread(ratio)}")
    print(f"   lines per test   {spread(lines)}; union {len(union)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", nargs="+", default=["ort", "tvm", "onnx_export", "inductor_hop"])
    ap.add_argument("--tests", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--arcs", action="store_true",
                    help="also a third process measuring arcs (branch coverage)")
    args = ap.parse_args()
    set_single_thread()
    print(f"{args.tests + 1} valid tests of {args.nodes} nodes per backend, without the ops it "
          "lacks (the first left out); figures: median [p10, p90]", flush=True)
    for name in args.backends:
        bench(name, args.tests, args.nodes, args.arcs)


if __name__ == "__main__":
    main()
