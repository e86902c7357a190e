"""CPU time per stage of one campaign test, as `campaign=cpu_ort` runs it: the generation
actor's `Generator.generate` and the ORT actor's `Evaluator.evaluate` (its sandbox process's CPU
read from /proc), plus what the driver does with each result (Ray's pickling of the call's
arguments and results, the Parquet sink). CPU time (`time.process_time`), not wall time, so the
figures hardly depend on what else the machine runs.

    python bench/stages.py [--tests 300] [--batch 4] [--profile gen|eval|driver]

Stages are timed exclusively (a stage nested in another is subtracted from it), by wrapping the
functions the stages call; `--profile` prints cProfile's top functions of one side instead.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pickle
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Timers:
    """Exclusive CPU seconds per stage name."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[list] = []

    @contextmanager
    def stage(self, name: str):
        frame = [name, time.process_time(), 0.0]  # name, start, time of nested stages
        self.stack.append(frame)
        try:
            yield
        finally:
            self.stack.pop()
            spent = time.process_time() - frame[1]
            self.cpu[name] += spent - frame[2]
            self.calls[name] += 1
            if self.stack:
                self.stack[-1][2] += spent

    def wrap(self, owner, attr: str, name: str) -> None:
        fn = getattr(owner, attr)
        if isinstance(fn, staticmethod):
            fn = fn.__func__

        def timed(*a, **k):
            with self.stage(name):
                return fn(*a, **k)

        setattr(owner, attr, timed)

    def wrap_cached(self, cls, attr: str, name: str) -> None:
        """A functools.cached_property, timed on its first computation."""
        import functools

        prop = cls.__dict__[attr]
        func = prop.func

        def timed(self_):
            with self.stage(name):
                return func(self_)

        new = functools.cached_property(timed)
        new.__set_name__(cls, attr)
        setattr(cls, attr, new)


def instrument(t: Timers) -> None:
    import campaign.artifacts as artifacts
    import campaign.pipeline as pipeline
    import campaign.row as row
    import campaign.sandbox as sandbox
    import campaign.worker as worker
    from campaign.reference import ReferenceResult  # noqa: F401
    from mutators.source import MutationSource

    t.wrap(MutationSource, "make", "gen: generate/mutate")
    t.wrap(worker, "make_valid", "gen: make_valid (input search)")
    t.wrap(worker, "search_inputs", "gen: search_inputs (fallback)")
    t.wrap(worker, "cover", "gen: cover")
    t.wrap(artifacts, "to_onnx", "gen: to_onnx")
    t.wrap(artifacts.onnx.checker, "check_model", "gen: onnx check_model")
    t.wrap_cached(artifacts.Materialized, "onnx_bytes", "gen: onnx serialize")
    t.wrap(row.ResultRow, "of_test", "gen: base row")
    t.wrap(worker, "run_reference", "gen: reference")
    t.wrap(MutationSource, "observe", "gen: pool observe")
    t.wrap(worker, "output_tolerances", "gen: tolerances")
    t.wrap(worker, "output_precisions", "gen: precisions")
    t.wrap(sandbox.Job, "pack", "gen: job pack")
    t.wrap(pipeline, "pack_case", "gen: pack_case (rest)")
    t.wrap(pipeline.Generator, "generate_one", "gen: other")
    t.wrap(pipeline, "unpack_case", "eval: unpack_case")
    t.wrap(sandbox.Sandbox, "evaluate", "eval: sandbox parent (IPC)")
    t.wrap(worker.FuzzWorker, "judge", "eval: judge + row")
    t.wrap(pipeline.Evaluator, "evaluate", "eval: other")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=300)
    ap.add_argument("--batch", type=int, default=4, help="tests per actor call")
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--profile", choices=["gen", "eval", "child"], default=None)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--freeze", action="store_true",
                    help="gc.freeze() after the warm-up, as the campaign's actors do")
    args = ap.parse_args()

    from campaign.config import Config
    from campaign.driver import default_stages
    from campaign.pipeline import Evaluator, Generator
    from campaign.storage import ResultSink

    cfg = Config()
    cfg.campaign.name = "cpu_ort"
    cfg.campaign.backends = ["ort"]
    wcfg = default_stages(cfg).config
    if args.profile == "child":
        wcfg.sandbox = False
    t = Timers()
    gen = Generator(wcfg, "gen#0")
    ev = Evaluator(wcfg, "ort", "ort#0")
    sb = ev.worker.sandboxes.get("ort")
    out = tempfile.mkdtemp(prefix="dynsmith-stages-")
    sink = ResultSink(Path(out), "run", "cpu_ort", flush_rows=2000, flush_every_s=1e9)

    def one_batch(k0: int, n: int, timed: bool, prof=None) -> None:
        items = [(f"b-{k:06d}", k, ["ort"]) for k in range(k0, k0 + n)]
        with (t.stage("ray: gen args pickle") if timed else _null()):
            items = pickle.loads(pickle.dumps(items, protocol=5))
        if prof is not None and args.profile == "gen":
            prof.enable()
        made = gen.generate(items)
        if prof is not None and args.profile == "gen":
            prof.disable()
        with (t.stage("ray: gen results pickle") if timed else _null()):
            data = pickle.dumps(made, protocol=5)
            made = pickle.loads(data)
        sizes["gen_result"].append(len(data) / n)
        cases = [g.case for g in made if getattr(g, "case", None) is not None]
        reports = [g.report for g in made if getattr(g, "report", None) is not None]
        if cases:
            with (t.stage("ray: eval args pickle") if timed else _null()):
                cases = pickle.loads(pickle.dumps(cases, protocol=5))
            c0 = proc_cpu(sb.pid) if sb is not None and sb.pid else None
            pid0 = sb.pid if sb is not None else None
            if prof is not None and args.profile in ("eval", "child"):
                prof.enable()
            reps = ev.evaluate(cases)
            if prof is not None and args.profile in ("eval", "child"):
                prof.disable()
            if timed and c0 is not None and sb.pid == pid0:
                t.cpu["sandbox child (ORT etc.)"] += proc_cpu(pid0) - c0
            with (t.stage("ray: eval results pickle") if timed else _null()):
                data = pickle.dumps(reps, protocol=5)
                reps = pickle.loads(data)
            sizes["eval_result"].append(len(data) / len(cases))
            sizes["case"] += [len(c) for c in cases]
            reports += reps
        with (t.stage("driver: sink.add") if timed else _null()):
            for r in reports:
                for row in r.rows:
                    sink.add({**row, "finding_dir": None})
        verdicts.update(r["verdict"] for rep in reports for r in rep.rows)

    sizes: dict[str, list] = defaultdict(list)
    from collections import Counter

    verdicts: Counter = Counter()
    for k in range(0, args.warm, args.batch):
        one_batch(10_000 + k, args.batch, False)
    instrument(t)
    import gc

    if args.freeze:  # as `campaign.driver` does in every actor after its start
        gc.collect()
        gc.freeze()

    gc_start = {}

    def on_gc(phase, info):  # CPU of the collector itself, per generation
        if phase == "start":
            gc_start[0] = time.process_time()
        elif 0 in gc_start:
            t.cpu[f"python gc (gen {info['generation']}, in the stages above)"] += \
                time.process_time() - gc_start.pop(0)

    gc.callbacks.append(on_gc)
    print(f"gc-tracked objects: {len(gc.get_objects())}; frozen: {gc.get_freeze_count()}")
    prof = cProfile.Profile() if args.profile else None
    sizes.clear()
    verdicts.clear()
    w0 = time.perf_counter()
    for k in range(0, args.tests, args.batch):
        one_batch(k, args.batch, True, prof)
    with t.stage("driver: parquet flush"):
        sink.flush()
    wall = time.perf_counter() - w0
    n = args.tests
    gc.callbacks.remove(on_gc)
    total = sum(v for k, v in t.cpu.items() if not k.startswith("python gc"))
    print(f"{n} tests (batches of {args.batch}), verdicts {dict(verdicts)}; load average "
          f"{'{:.1f} {:.1f} {:.1f}'.format(*os.getloadavg())}; wall {wall / n * 1e3:.1f} ms per test")
    print(f"{'stage':40s} {'CPU ms/test':>11s} {'share':>6s}")
    for name, s in sorted(t.cpu.items(), key=lambda kv: -kv[1]):
        print(f"{name:40s} {s / n * 1e3:11.3f} {100 * s / total:5.1f}%")
    print(f"{'total':40s} {total / n * 1e3:11.3f}")
    print("sizes (bytes, median): " + ", ".join(
        f"{k} {statistics.median(v):.0f}" for k, v in sizes.items() if v))
    if prof is not None:
        st = pstats.Stats(prof)
        st.sort_stats("tottime").print_stats(args.top)
        st.sort_stats("cumulative").print_stats(args.top)
    ev.close()
    gen.close()


@contextmanager
def _null():
    yield


if __name__ == "__main__":
    main()
