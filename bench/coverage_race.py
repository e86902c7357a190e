"""The yardstick (issue #19, docs/coverage.md): compiler coverage reached by NNSmith's generator
and by dynsmith's, for the same CPU time, through the same harness, in one run of this script.

Arms (each its own process, `--arm NAME`):
- `nnsmith`: NNSmith 0.1.0's generator (`model_gen(method="symbolic-cinit")`, its ONNX op
  set, 10 nodes), its concrete graphs converted to dynsmith graphs by `bench/nnsmith_graphs.py`
  in NNSmith's own virtual environment (a child process: its CPU counts against the arm);
- `static`: dynsmith's generator, static DAGs only (no if/loop/scan, no RNN ops, no in-place
  writes, no dynamic shapes, no mutation);
- `dynamic`: dynsmith with control flow (cpu_dynamic's probabilities), in-place writes, dynamic
  shapes and the mutation engine (seed corpus, verdict feedback), without coverage feedback;
- `feedback`: the same with coverage feedback (a test reaching new compiler lines joins the
  seed pool as novel, with energy: docs/coverage.md);
- `extend`: cpu_extend's tests (docs/extensions.md): custom ops (`p_custom` 0.85, 60% of
  sites mutating; `wrap_custom`, `unwrap_custom`), cache tests (`p_cache` 0.25), a third of
  the tests training through pure custom ops; compare it with `train` (`--arms train extend`).
  Not in the default `--arms`.
- `train`: `dynamic` with gradient tests (docs/training.md: `p_grad` 0.85, `p_transform` 0.3,
  cpu_train's shares): Inductor trains them (Dynamo, AOT autograd's joint graph and
  partitioner in torch/_functorch, the backward's code), the exporter and TVM get their
  forward (TVM trains where its reverse mode can: `unsupported` elsewhere). Not in the default
  `--arms`: name it (`--arms nnsmith dynamic train`).
  Measured 2026-12-05 (`--cpu-minutes 4 --repeats 1 --arms nnsmith dynamic train`, this
  2-core machine, other jobs running): Inductor's lines at the end, NNSmith 32312, dynamic
  36488, train 39026 (train/NNSmith 1.21, train/dynamic 1.07); per package NNSmith / dynamic /
  train: torch/_dynamo 9547 / 11934 / 11322, torch/_functorch (AOT autograd) 1681 / 1709 /
  4030, torch/_higher_order_ops 40 / 818 / 1471, torch/_inductor 21068 / 22657 / 22383. The
  train arm ran 6 tests in 312 CPU-s (a gradient test compiles a forward and a backward per
  dialect), NNSmith's 44 in 243, dynamic's 15 in 286.

The harness is the campaign's own (`campaign.worker.FuzzWorker`, in-process, no Ray): each
test gets valid inputs by dynsmith's input search (NNSmith's graphs too), its reference run,
then the backends in their sandbox processes with compiler coverage on every test (rate 1),
the lines kept by the worker's per-backend unions. Backends, one configuration for all arms:
`inductor` (fullgraph, the higher-order-op dialect; packages torch/_dynamo, _functorch,
_higher_order_ops, _inductor), `onnx_export` (torch/export, torch/onnx/_internal, onnxscript,
onnx_ir) and `tvm` (its ONNX frontend and Relax passes: tvm/relax). A test with an op TVM's
ONNX importer lacks (loop, scan, RNN) is not sent to TVM, as the campaign routes it.

CPU time is the arm's whole process tree (the arm, its sandboxes, NNSmith's generator; read
from /proc, reaped children included), from the moment its worker is built; an arm stops at
`--cpu-minutes`. Each arm prints a JSON line per test: CPU seconds, tests, covered lines per
backend, distinct finding buckets; at its end the unions (file paths relative to
site-packages). The parent runs `--repeats` of every arm, `--jobs` at a time (arms measured
in CPU time, so two sharing the 2 cores does not cost either coverage), then prints per
backend the lines each arm reached at quarters of the budget (median [min, max] over
repeats), the lines per package at the end (Inductor's: Dynamo, AOT autograd in _functorch,
the higher-order ops, Inductor), the ratio of each arm to NNSmith's and to the `dynamic`
(inference) arm's (median of the per-repeat ratios, paired by repeat), the lines one side
reached and the other did not, and the distinct finding buckets (backend, verdict, error
signature) per arm.

    python bench/coverage_race.py [--cpu-minutes 20] [--repeats 2] [--jobs 2]
                                  [--arms nnsmith static dynamic feedback [train]]
                                  [--nnsmith-python /tmp/nns/bin/python] [--out DIR]

Prints figures; asserts nothing. Set up NNSmith as bench/nnsmith_graphs.py says; without it
the `nnsmith` arm is left out with a note.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# this folder holds bench/coverage.py, which would shadow coverage.py's package
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

ARMS = ("nnsmith", "static", "dynamic", "feedback", "train", "extend")
#: the arms a run races unless `--arms` names others (`train`: by name)
DEFAULT_ARMS = ("nnsmith", "static", "dynamic", "feedback")
#: arms the others are compared with, in this order: NNSmith's, dynsmith's inference arm,
#: the training arm (`extend` against `train`)
BASELINES = ("nnsmith", "dynamic", "train")
BACKENDS = ("inductor", "onnx_export", "tvm")
NODES = 10
FINDING_VERDICTS = ("crash", "signal", "timeout", "mismatch")


# ---- CPU of a process tree ------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds of `root` (this process) and every live descendant, each with its reaped
    children: what the process tree has spent so far."""
    root = os.getpid() if root is None else root
    parent_of: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parent_of[int(entry)], cpu[int(entry)] = st
    total, frontier = cpu.get(root, 0.0), [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        for kid in children.get(frontier.pop(), []):
            total += cpu.get(kid, 0.0)
            frontier.append(kid)
    return total


# ---- the graph sources ----------------------------------------------------------------------

#: NNSmith models in a row that give no graph before the arm stops (about 57% convert)
MAX_MISSES = 200


class NNSmithGraphs:
    """NNSmith's graphs as dynsmith graphs, from `bench/nnsmith_graphs.py` in NNSmith's
    environment, one per `next()`; models it could not convert are skipped (and counted)."""

    def __init__(self, python: str, seed_start: int):
        self.proc = subprocess.Popen(
            [python, str(HERE / "nnsmith_graphs.py"), "--seed-start", str(seed_start),
             "--count", "0", "--nodes", str(NODES), "--opset", "ort", "--lockstep"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.skipped: dict[str, int] = {}

    def __iter__(self) -> Iterator[Any]:
        from ir import parse

        assert self.proc.stdin is not None and self.proc.stdout is not None
        misses = 0
        while True:
            self.proc.stdin.write("next\n")  # lockstep: it makes one graph per request
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("bench/nnsmith_graphs.py ended")
            rec = json.loads(line)
            if rec.get("gir"):
                misses = 0
                yield parse(rec["gir"])
            else:
                why = str(rec.get("why") or "?").split(":")[0][:60]
                self.skipped[why] = self.skipped.get(why, 0) + 1
                misses += 1
                if misses >= MAX_MISSES:  # a broken set-up, not bad luck: never spin on it
                    raise RuntimeError(f"NNSmith gave no convertible graph in {misses} models in "
                                       f"a row (last: {rec.get('why')})")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class ExternalSource:
    """A `MutationSource` whose graphs come from `graphs` (NNSmith's) instead of dynsmith's
    generator and mutators; the rest (pool bookkeeping, feedback) is the wrapped source's."""

    def __init__(self, inner: Any, graphs: Iterator[Any]):
        self.inner, self.graphs = inner, graphs

    def make(self, test_id: str, seed: int, gen: Any = None) -> tuple[Any, list[dict[str, Any]]]:
        return next(self.graphs), [{"seed": seed, "seed_id": f"nnsmith/{seed}"}]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# ---- one arm --------------------------------------------------------------------------------

def arm_config(arm: str) -> Any:
    """The `WorkerConfig` of an arm (backends, coverage and limits the same for all)."""
    from campaign.compiler_coverage import CoverageConfig
    from campaign.sandbox import SandboxConfig
    from campaign.worker import WorkerConfig
    from ir import GenConfig
    from mutators.engine import MutationConfig

    if arm in ("dynamic", "feedback", "train", "extend"):
        gen = GenConfig(nodes=NODES, p_if=0.15, p_loop=0.1, p_scan=0.1, max_depth=2,
                        p_inplace=0.2, p_dynshape=0.1)
        if arm == "train":  # gradient tests (docs/training.md), cpu_train's shares
            gen = dataclasses.replace(gen, p_grad=0.85, p_transform=0.3)
        mutation = MutationConfig()
        if arm == "extend":  # custom ops and cache tests (docs/extensions.md), cpu_extend's
            gen = dataclasses.replace(gen, p_grad=0.35, p_custom=0.85, p_custom_mutates=0.6,
                                      p_cache=0.25, p_dynshape=0.0)
            mutation = MutationConfig(weights={**mutation.weights, "wrap_custom": 2.0,
                                               "unwrap_custom": 0.5})
    else:  # static DAGs (NNSmith's graphs arrive through ExternalSource)
        gen = GenConfig(nodes=NODES).without(["if", "loop", "scan", "lstm", "gru", "rnn"])
        mutation = MutationConfig(rate=0.0, generated_seeds=0, seeds=None)
    return WorkerConfig(generator=gen, backends=list(BACKENDS), mutation=mutation,
                        limits=SandboxConfig(timeout_s=60.0),
                        compiler_coverage=CoverageConfig(enabled=True, rate=1.0))


def _site_relative(path: str) -> str:
    """A covered file's path from its package root (arms can then be compared)."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


@dataclass
class ArmState:
    """What one arm has seen so far."""

    tests: int = 0
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)
    buckets: set[tuple[str, str, str]] = field(default_factory=set)
    #: per backend, rows per `mode` (infer, grad: it trained, transform: docs/training.md)
    modes: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.tests += 1
        for r in rows:
            v = self.verdicts.setdefault(r["backend"], {})
            v[r["verdict"]] = v.get(r["verdict"], 0) + 1
            modes, mode = self.modes.setdefault(r["backend"], {}), r.get("mode") or "infer"
            modes[mode] = modes.get(mode, 0) + 1
            if r["verdict"] in FINDING_VERDICTS:
                self.buckets.add((r["backend"], r["verdict"], r.get("error_sig") or ""))


def run_arm(arm: str, repeat: int, cpu_minutes: float, nnsmith_python: str) -> None:
    """One arm until its process tree has spent `cpu_minutes`; JSON lines on stdout."""
    from campaign.backends.tvm import TVM_LACKS
    from campaign.verdict import verdict_signature
    from campaign.worker import FuzzWorker, TestReport

    worker = FuzzWorker(arm_config(arm), name=arm)
    if arm in ("dynamic", "train"):  # coverage measured (the race's yardstick), never fed back
        worker.coverage_feedback = lambda outcomes: 0  # type: ignore[method-assign]
    source = None
    if arm == "nnsmith":
        source = NNSmithGraphs(nnsmith_python, seed_start=repeat * 1_000_000)
        worker.mutation = ExternalSource(worker.mutation, iter(source))  # type: ignore[assignment]
    others = [b for b in BACKENDS if b != "tvm"]
    state = ArmState()
    t0, budget = tree_cpu_s(), cpu_minutes * 60.0
    seed = repeat * 1_000_000
    try:
        while tree_cpu_s() - t0 < budget:
            seed += 1
            test_id = f"{arm}-{repeat}-{seed}"
            prep = worker.make_prepared(test_id, seed)
            if isinstance(prep, TestReport):  # an invalid test: no backend compiled it
                rows = prep.rows
            else:
                lacks = TVM_LACKS & set(prep.tc.graph.op_counts())
                rows = worker.evaluate_all(prep, others if lacks else None).rows
            state.add(rows)
            if arm in ("dynamic", "feedback", "train"):
                worker.feedback([(r["test_id"], verdict_signature(r)) for r in rows])
            print(json.dumps({"cpu_s": round(tree_cpu_s() - t0, 2), "tests": state.tests,
                              "lines": {b: len(u) for b, u in worker.unions.items()},
                              "buckets": len(state.buckets)}), flush=True)
        unions = {b: sorted(f"{_site_relative(f)}:{n}" for f, n in u.rows())
                  for b, u in worker.unions.items()}
        print(json.dumps({"end": True, "cpu_s": round(tree_cpu_s() - t0, 2),
                          "tests": state.tests, "verdicts": state.verdicts, "modes": state.modes,
                          "buckets": sorted(map(list, state.buckets)),
                          "skipped": source.skipped if source else {},
                          "unions": unions}), flush=True)
    finally:
        if source is not None:
            source.close()
        worker.close()


# ---- the race -------------------------------------------------------------------------------

def spread(xs: list[float], fmt: str = "{:.0f}") -> str:
    if not xs:
        return "n/a"
    return (fmt.format(float(np.median(xs))) + " [" + fmt.format(min(xs)) + ", "
            + fmt.format(max(xs)) + "]")


def lines_at(trace: list[dict[str, Any]], cpu_s: float, backend: str) -> int:
    """Covered lines of `backend` at `cpu_s` into an arm (its last sample before)."""
    got = 0
    for rec in trace:
        if rec["cpu_s"] > cpu_s:
            break
        got = rec["lines"].get(backend, 0)
    return got


def race(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    arms = list(args.arms)
    if "nnsmith" in arms and not Path(args.nnsmith_python).exists():
        print(f"note: {args.nnsmith_python} not found: the nnsmith arm is left out "
              "(set it up as bench/nnsmith_graphs.py says)")
        arms.remove("nnsmith")
    jobs = [(arm, r) for r in range(args.repeats) for arm in arms]
    running: list[tuple[subprocess.Popen, Any]] = []
    t0 = time.monotonic()
    print(f"{len(jobs)} arm runs of {args.cpu_minutes:g} CPU-minutes, {args.jobs} at a time; "
          f"output {out}", flush=True)
    while jobs or running:
        while jobs and len(running) < args.jobs:
            arm, r = jobs.pop(0)
            log = open(out / f"{arm}-{r}.jsonl", "w")  # noqa: SIM115 (closed when it ends)
            cmd = [sys.executable, __file__, "--arm", arm, "--repeat", str(r),
                   "--cpu-minutes", str(args.cpu_minutes), "--nnsmith-python", args.nnsmith_python]
            running.append((subprocess.Popen(cmd, stdout=log, stderr=open(out / f"{arm}-{r}.err", "w")), log))
        time.sleep(2)
        for proc, log in list(running):
            if proc.poll() is not None:
                log.close()
                running.remove((proc, log))
                print(f"  {Path(log.name).stem} done (rc {proc.returncode}) at "
                      f"{time.monotonic() - t0:.0f} s", flush=True)
    summarize(out, arms, args.repeats, args.cpu_minutes * 60.0)


def load(out: Path, arm: str, r: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    trace, end = [], None
    path = out / f"{arm}-{r}.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("end"):
                end = rec
            else:
                trace.append(rec)
    return trace, end


Runs = dict[tuple[str, int], tuple[list[dict[str, Any]], dict[str, Any] | None]]


def ends(runs: Runs, arm: str) -> list[dict[str, Any]]:
    """The end records of an arm's finished runs."""
    return [end for (a, _), (_, end) in sorted(runs.items()) if a == arm and end is not None]


def union_of(ends: list[dict[str, Any]], backend: str) -> set[str]:
    """The lines (`file:line`) of `backend` any of these runs reached."""
    return {x for end in ends for x in end["unions"].get(backend, [])}


def package_of(line: str) -> str:
    """The package of a covered line (`file:line`, from site-packages): `torch/_functorch`
    (AOT autograd), `torch/_dynamo`, ..., else its top-level package (`onnxscript`, `tvm`)."""
    parts = line.rsplit(":", 1)[0].split("/")
    return "/".join(parts[:2]) if parts[0] == "torch" and len(parts) > 2 else parts[0]


def compared(arms: list[str]) -> list[tuple[str, list[str]]]:
    """(baseline, the arms compared with it) for each of `BASELINES` racing: NNSmith's arm
    against every other, then the inference arm against the rest (nnsmith's arm left out)."""
    bases = [b for b in BASELINES if b in arms]
    pairs = []
    for i, base in enumerate(bases):
        others = [a for a in arms if a not in bases[:i + 1]]
        if others:
            pairs.append((base, others))
    return pairs


def summarize(out: Path, arms: list[str], repeats: int, budget_s: float) -> None:
    runs: Runs = {(a, r): load(out, a, r) for a in arms for r in range(repeats)}
    done = {k for k, (_, end) in runs.items() if end is not None}  # the figures: finished runs
    if len(done) < len(runs):
        print(f"note: {', '.join(f'{a}-{r}' for a, r in sorted(set(runs) - done))} not finished: "
              "left out of the figures")
    print(f"\n== covered lines per backend at quarters of {budget_s / 60:g} CPU-minutes: "
          "median [min, max] over repeats")
    for b in BACKENDS:
        print(f"-- {b}")
        for a in arms:
            cells = []
            for q in (0.25, 0.5, 0.75, 1.0):
                cells.append(spread([lines_at(runs[a, r][0], q * budget_s, b)
                                     for r in range(repeats) if (a, r) in done]))
            print(f"   {a:9} " + "  ".join(f"{c:>22}" for c in cells))
    print("\n== lines per package at the end: median [min, max] over repeats")
    for b in BACKENDS:
        print(f"-- {b:34} " + "  ".join(f"{a:>22}" for a in arms))
        packages = sorted({package_of(x) for a in arms for end in ends(runs, a)
                           for x in end["unions"].get(b, [])})
        for pkg in packages:
            cells = [spread([sum(package_of(x) == pkg for x in end["unions"].get(b, []))
                             for end in ends(runs, a)]) for a in arms]
            print(f"   {pkg:34} " + "  ".join(f"{c:>22}" for c in cells))
    for base, others in compared(arms):
        print(f"\n== lines reached at the end, as a ratio to {base}'s (per repeat, paired)")
        for b in BACKENDS:
            for a in others:
                ratios = []
                for r in range(repeats):
                    if not {(a, r), (base, r)} <= done:
                        continue
                    ours, theirs = (lines_at(runs[x, r][0], budget_s, b) for x in (a, base))
                    if theirs:
                        ratios.append(ours / theirs)
                print(f"   {b:12} {a:9} / {base:8} {spread(ratios, '{:.2f}')}")
    print("\n== tests, verdicts and distinct finding buckets (backend, verdict, signature)")
    for a in arms:
        for r in range(repeats):
            trace, end = runs[a, r]
            if end is None:
                print(f"   {a}-{r}: no end record ({len(trace)} samples): see {a}-{r}.err")
                continue
            mix = {b: dict(sorted(v.items())) for b, v in end["verdicts"].items()}
            # rows per mode, where some trained (records before the train arm have none)
            modes = {b: dict(sorted(v.items())) for b, v in end.get("modes", {}).items()
                     if set(v) - {"infer"}}
            print(f"   {a}-{r}: {end['tests']} tests in {end['cpu_s']:.0f} CPU-s; "
                  f"{len(end['buckets'])} buckets; verdicts {mix}"
                  + (f"; modes {modes}" if modes else "")
                  + (f"; NNSmith models not converted {end['skipped']}" if end["skipped"] else ""))
        all_buckets = {tuple(x) for end in ends(runs, a) for x in end["buckets"]}
        print(f"   {a}: {len(all_buckets)} distinct buckets over the repeats")
    for base, others in compared(arms):
        print(f"\n== lines only one side reached, against {base} (union over repeats), per backend")
        for b in BACKENDS:
            theirs = union_of(ends(runs, base), b)
            for a in others:
                reached = union_of(ends(runs, a), b)
                print(f"   {b:12} {a:9}: {len(reached - theirs)} lines {base} did not reach; "
                      f"{base} reached {len(theirs - reached)} it did not")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-minutes", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--arms", nargs="+", default=list(DEFAULT_ARMS), choices=ARMS,
                    help="the arms to race (default: all but train)")
    ap.add_argument("--nnsmith-python", default="/tmp/nns/bin/python")
    ap.add_argument("--out", default="/tmp/coverage_race")
    ap.add_argument("--summarize", action="store_true", help="only print the figures of --out")
    ap.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.arm:
        from campaign.worker import set_single_thread

        set_single_thread()
        run_arm(args.arm, args.repeat, args.cpu_minutes, args.nnsmith_python)
    elif args.summarize:
        summarize(Path(args.out), list(args.arms), args.repeats, args.cpu_minutes * 60.0)
    else:
        race(args)


if __name__ == "__main__":
    main()
