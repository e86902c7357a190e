"""Gradient tests' cost: per backend, the CPU of a gradient test against an inference test, the
same graphs in both modes, in one run (docs/training.md). Prints figures (median [min, max],
ratios); asserts nothing.

Per seed, made in this process by the worker's own `make_test` (no sandbox, no mutation):
- `grad`: the seed's gradient test (`GenConfig(p_grad=1)`: a float graph,
  `GenConfig.for_training`, leaves and cotangents; `p_transform` 0: plain gradient tests);
- `twin`: the same test with `grad=None`: the same graph and input sets, forward only. The
  gradient's cost is grad against twin, test by test (the ratio: the median of per-test
  ratios grad / twin);
- `infer`: the seed's inference test (`p_grad=0`: every dtype, another graph): what an
  inference test of the campaign costs, for context.

Each backend evaluates the three in this process (`FuzzWorker.evaluate`, the order rotating per
test so that load drifts hit all alike); CPU seconds are `BackendResult.cpu_ms` (the
evaluation: import, compile, run on every input set, the g++ children it waited for). Only
evaluations that finished (outputs to compare) are timed; the rows' `mode` says what the grad
test did there: trained (`grad`), ran its forward (`infer`: a backend that does not train), or
was `unsupported`/`skipped` (e.g. TVM's reverse mode: no gradient for many Relax ops, none
through control flow); the most common signatures of grad rows that did not pass are printed.
Each backend first gets `prepare()` and one throwaway test, all three sides (Inductor's first
compile in a process is the slow one). Before every evaluation the backend's per-process setup
runs again (`child_init`) in a fresh folder: Inductor's on-disk graph cache off, as in a
sandbox, and its code caches emptied, since grad and twin share a graph (and infer, when the
seed's inference graph is all float, is often that graph too) whose kernels a second compile
would only load. A backend that lacks ops (`Backend.LACKS`: TVM, no loop/scan/RNN) gets tests
generated without them, as the campaign routes them. Generation: CPU s of `make_test` per mode, and of `prepare` (ONNX
build, reference run: eager autograd for grad, the forward for twin) on the same graphs.

    python bench/grad_cost.py [--seeds 8] [--nodes 10] [--control]
        [--backends eager aot_eager "inductor?dialect=hop&cpp_wrapper=true"
                    "inductor?dialect=python&fullgraph=false" tvm ort]

`--control` adds cpu_train's control flow (if 0.25, loop 0.15, scan 0.15, nested one level).

Figures (session 29, `--seeds 5 --control`, 10 nodes, one run on 2 shared cores; grad / twin
is the median of per-test ratios, min-max in brackets): aot_eager 2.04 [1.35, 2.37] (grad 1.50
CPU-s median), Inductor python dialect 1.88 [1.83, 2.27] (3.72 CPU-s), Inductor hop + C++
wrapper 1.93 (2 of 5: the other 3 crashed, docs/findings F28; 5.09 CPU-s), eager 2.80 (about a
millisecond), ORT 1.07 (the forward alone); TVM trained none (5/5 `unsupported`: ops without a
Relax gradient). Making a gradient test: its reference (eager autograd) costs about 5x the
twin's, milliseconds.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaign.backends import Backend  # noqa: E402
from campaign.backends.base import cpu_seconds  # noqa: E402
from campaign.testcase import TestCase  # noqa: E402
from campaign.worker import FuzzWorker, Prepared, TestReport, WorkerConfig  # noqa: E402
from ir import GenConfig  # noqa: E402
from mutators import MutationConfig  # noqa: E402

BACKENDS = ["eager", "aot_eager", "inductor?dialect=hop&cpp_wrapper=true",
            "inductor?dialect=python&fullgraph=false", "tvm", "ort"]
#: cpu_train's control flow (conf/campaign/cpu_train.yaml)
CONTROL = {"p_if": 0.25, "p_loop": 0.15, "p_scan": 0.15, "max_depth": 2}
SIDES = ("grad", "twin", "infer")


def spread(xs: list[float], fmt: str = "{:.3f}") -> str:
    if not xs:
        return "n/a"
    return (fmt.format(float(np.median(xs))) + " [" + fmt.format(min(xs)) + ", "
            + fmt.format(max(xs)) + "]")


@dataclasses.dataclass
class Case:
    """One seed's three tests, prepared (reference run), with their making's CPU seconds."""

    seed: int
    preps: dict[str, Prepared]
    gen_s: dict[str, float]  #: make_test, per mode (grad, infer)
    prep_s: dict[str, float]  #: prepare (ONNX build + reference), per side


def _prepared(worker: FuzzWorker, tc: TestCase) -> tuple[Prepared | None, float]:
    c0 = cpu_seconds()
    prep = worker.prepare(tc)
    return (None if isinstance(prep, TestReport) else prep), cpu_seconds() - c0


def make_cases(n: int, gen: GenConfig, specs: list[str], seed_start: int) -> list[Case]:
    """The first `n` seeds from `seed_start` whose gradient test and inference test are both
    valid (a generator failure or an invalid reference: skipped, not this bench's business)."""
    def worker(p_grad: float) -> FuzzWorker:
        return FuzzWorker(WorkerConfig(
            generator=dataclasses.replace(gen, p_grad=p_grad, p_transform=0.0), backends=specs,
            sandbox=False, mutation=MutationConfig(rate=0.0, generated_seeds=0, seeds=None)))

    makers = {"grad": worker(1.0), "infer": worker(0.0)}
    cases: list[Case] = []
    for seed in range(seed_start, seed_start + 5 * n):
        if len(cases) == n:
            break
        try:
            tcs, gen_s = {}, {}
            for mode, w in makers.items():
                c0 = cpu_seconds()
                tcs[mode] = w.make_test(f"{mode}-{seed}", seed)
                gen_s[mode] = cpu_seconds() - c0
            assert tcs["grad"].grad is not None and tcs["infer"].grad is None
            tcs["twin"] = dataclasses.replace(tcs["grad"], test_id=f"twin-{seed}", grad=None,
                                              transform=None)
            preps, prep_s = {}, {}
            for side in SIDES:
                preps[side], prep_s[side] = _prepared(makers["infer" if side == "infer"
                                                             else "grad"], tcs[side])
        except Exception as e:  # a generator failure
            print(f"   seed {seed}: not made ({type(e).__name__}: {str(e)[:80]})")
            continue
        if all(p is not None for p in preps.values()):
            cases.append(Case(seed, preps, gen_s, prep_s))
    return cases


def outcome(row: dict) -> str:
    """What a grad test's row says it did: trained, forward (only), or its verdict."""
    if row["verdict"] != "pass":
        return row["verdict"]
    return "trained" if row.get("mode") == "grad" else "forward"


def bench(backend: Backend, worker: FuzzWorker, cases: list[Case]) -> None:
    scratch = tempfile.mkdtemp(prefix="dynsmith-gradcost-")
    backend.prepare()
    cpu: dict[str, list[float]] = {s: [] for s in SIDES}
    ratios: list[float] = []
    outcomes: Counter[str] = Counter()
    why: Counter[str] = Counter()  #: error signatures of grad rows that did not pass
    warm = ""
    for i, case in enumerate(cases):
        got: dict[str, float | None] = {}
        sides = SIDES[i % 3:] + SIDES[:i % 3]  # the order rotates per test
        for side in sides:
            prep = case.preps[side]
            # a fresh cache folder and in-memory caches per evaluation: grad, twin (and now and
            # then infer) share a graph, whose kernels a second compile would load, not build
            backend.child_init(os.path.join(scratch, f"{i}-{side}"))
            r = worker.evaluate(backend, prep.m)
            row, _ = worker.judge(backend, prep, r)
            if side == "grad" and i:
                d = dict(row)
                outcomes[outcome(d)] += 1
                if d["verdict"] != "pass":
                    why[f"{d['verdict']}: {(d.get('error_sig') or '')[:90]}"] += 1
            got[side] = r.cpu_ms / 1e3 if r.outputs is not None and r.cpu_ms else None
        if i == 0:  # the throwaway: warm-up
            warm = ", ".join(f"{s} {got[s]:.1f}" for s in SIDES if got[s] is not None)
            continue
        for side in SIDES:
            if got[side] is not None:
                cpu[side].append(got[side])
        if got["grad"] is not None and got["twin"] is not None:
            ratios.append(got["grad"] / got["twin"])
    shutil.rmtree(scratch, ignore_errors=True)
    n = len(cases) - 1
    mix = ", ".join(f"{k} {v}" for k, v in outcomes.most_common())
    print(f"== {backend.name} (trains: {backend.TRAINS}): {n} tests; grad rows: {mix}; "
          f"warm-up test CPU s: {warm or 'n/a'}")
    print(f"   cpu s grad  (same graph)     {spread(cpu['grad'])}   n={len(cpu['grad'])}")
    print(f"   cpu s twin  (same, infer)    {spread(cpu['twin'])}   n={len(cpu['twin'])}")
    print(f"   ratio grad / twin, per test  {spread(ratios, '{:.2f}')}   n={len(ratios)}")
    print(f"   cpu s infer (own graph)      {spread(cpu['infer'])}   n={len(cpu['infer'])}")
    for sig, k in why.most_common(3):
        print(f"   grad not passed x{k}: {sig}")
    sys.stdout.flush()


def print_generation(name: str, cases: list[Case]) -> None:
    grad_ref = [c.prep_s["grad"] / c.prep_s["twin"] for c in cases if c.prep_s["twin"] > 0]
    print(f"-- generation ({name}), CPU s per test, {len(cases)} seeds "
          f"({cases[0].seed if cases else '-'}..{cases[-1].seed if cases else '-'})")
    for mode in ("grad", "infer"):
        print(f"   make_test {mode:5}               {spread([c.gen_s[mode] for c in cases])}")
    for side in SIDES:
        print(f"   prepare   {side:5} (ONNX + ref)  {spread([c.prep_s[side] for c in cases])}")
    print(f"   ratio prepare grad / twin    {spread(grad_ref, '{:.2f}')}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8, help="tests timed per backend")
    ap.add_argument("--backends", nargs="+", default=BACKENDS)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--control", action="store_true", help="cpu_train's control flow")
    ap.add_argument("--seed-start", type=int, default=0)
    args = ap.parse_args()
    gen = GenConfig(nodes=args.nodes, **(CONTROL if args.control else {}))
    print(f"{args.seeds} seeds (+1 warm-up, left out) of {args.nodes} nodes"
          f"{', control flow' if args.control else ''}; grad: the gradient test, twin: it "
          "without gradients (same graph), infer: the seed's inference test (another graph); "
          "figures: median [min, max]", flush=True)
    # tests per set of lacked ops (TVM: none with loop/scan/RNN), shared by those backends
    from campaign.backends import make_backend

    groups: dict[frozenset[str], list[str]] = {}
    for spec in args.backends:
        groups.setdefault(make_backend(spec).LACKS, []).append(spec)
    for lacks, specs in groups.items():
        cases = make_cases(args.seeds + 1, gen.without(lacks), specs, args.seed_start)
        print_generation(f"without {', '.join(sorted(lacks))}" if lacks else "all ops", cases)
        if len(cases) < 2:
            print(f"   too few valid tests for {', '.join(specs)}")
            continue
        worker = FuzzWorker(WorkerConfig(backends=specs, sandbox=False,
                                         mutation=MutationConfig(rate=0.0, generated_seeds=0,
                                                                 seeds=None)))
        for backend in worker.backends:
            bench(backend, worker, cases)


if __name__ == "__main__":
    main()
