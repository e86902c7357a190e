"""Probe a backend (default `tvm_torch`) on generated tests, in-process: verdicts, the distinct
failures, and optionally a differential check against a second backend on the same tests.

    python bench/tvm_torch_probe.py                       # 100 cpu_dynamic tests on tvm_torch
    python bench/tvm_torch_probe.py --static --n 200      # generated, no control flow, vs ort_noopt
    python bench/tvm_torch_probe.py --save /tmp/probe     # graph + traceback per non-pass

Tests are made as a campaign of the preset makes them (`FuzzWorker.make_prepared`, the Hydra
preset's generator and mutation settings), seeds `--first` .. `--first + n - 1`. Each backend
evaluates in this process (`--sandbox` for sandbox processes) and is judged against the torch
eager reference as a campaign judges it (`FuzzWorker.judge`). Capability routing is not applied:
a test holding an op in the backend's `LACKS` is evaluated too and counted apart, so the probe
also checks that those ops really fail.

With `--against B` (default `ort_noopt` under `--static`), the outputs of the two backends are
also compared with each other (`campaign.oracle.judge_sets`, the test's tolerances, no float64
shadow) wherever both finished: a disagreement is listed whatever the reference says.

Prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@dataclasses.dataclass
class Outcome:
    """One backend's evaluation of one test: its row and what it ran."""

    seed: int
    row: dict[str, Any]
    outputs: list | None
    traceback: str | None
    lacked: frozenset[str]  #: ops of the test in the backend's LACKS


def worker_config(preset: str, backends: list[str], static: bool, sandbox: bool) -> Any:
    """The WorkerConfig of `preset`'s generator and mutation settings for `backends`
    (`--static`: no control flow, and no mutants)."""
    from hydra import compose, initialize_config_dir

    from campaign.config import to_config
    from campaign.sandbox import SandboxConfig
    from campaign.worker import WorkerConfig

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = to_config(compose("config", overrides=[f"campaign={preset}"]))
    gen, mutation = cfg.generator, cfg.mutation
    if static:  # generated graphs only: the seed pool's mutants hold control flow
        gen = dataclasses.replace(gen, p_if=0.0, p_loop=0.0, p_scan=0.0)
        mutation = dataclasses.replace(mutation, rate=0.0)
    return WorkerConfig(generator=gen, backends=backends, mutation=mutation,
                        sandbox=sandbox, limits=SandboxConfig(timeout_s=120))


def probe(a: argparse.Namespace) -> None:
    from campaign.oracle import judge_sets
    from campaign.worker import FuzzWorker, TestReport
    from ir.core.text import print_graph

    backends = [a.backend] + ([a.against] if a.against else [])
    w = FuzzWorker(worker_config(a.preset, backends, a.static, a.sandbox))
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    invalid_tests = 0
    disagree: list[tuple[int, str]] = []
    t0 = time.perf_counter()
    try:
        for seed in a.seeds or range(a.first, a.first + a.n):
            prep = w.make_prepared(f"probe-{seed}", seed)
            if isinstance(prep, TestReport):
                invalid_tests += 1
                continue
            ops = set(prep.tc.graph.op_counts())
            outs: dict[str, list | None] = {}
            for b in w.backends:
                result = w.evaluate(b, prep.m)
                row, _ = w.judge(b, prep, result)
                d = dict(row)
                outs[b.name] = result.outputs
                outcomes[b.name].append(Outcome(seed, d, result.outputs, result.traceback,
                                                frozenset(ops & b.LACKS)))
                if a.save and d["verdict"] not in ("pass", "skipped"):
                    folder = Path(a.save) / b.name.replace("?", "_") / f"{seed}-{d['verdict']}"
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / "graph.gir").write_text(print_graph(prep.tc.graph))
                    (folder / "error.txt").write_text(
                        f"{d['stage']} {d['error_class']}\n{d.get('error_msg')}\n\n"
                        f"{result.traceback or ''}")
            if a.against and all(outs.get(n) is not None for n in backends):
                j = judge_sets(outs[a.against], outs[a.backend], len(prep.tc.graph.outputs),
                               prep.tolerances, prep.precisions)
                if j.verdict.value != "pass":
                    disagree.append((seed, j.comparison.message))
            if a.progress:
                print(f"seed {seed}: " + ", ".join(
                    f"{n}={outcomes[n][-1].row['verdict']}" for n in backends), flush=True)
    except KeyboardInterrupt:
        print("interrupted: figures so far", flush=True)
    finally:
        w.close()
    elapsed = time.perf_counter() - t0
    report(a, outcomes, invalid_tests, disagree, elapsed)


def report(a: argparse.Namespace, outcomes: dict[str, list[Outcome]], invalid_tests: int,
           disagree: list[tuple[int, str]], elapsed: float) -> None:
    seeds = (f"seeds {a.seeds}" if a.seeds else f"seeds {a.first}..{a.first + a.n - 1}")
    print(f"\n{a.preset}{' (static: p_if=p_loop=p_scan=0, no mutants)' if a.static else ''}, "
          f"{seeds}: {elapsed:.0f} s; {invalid_tests} tests invalid before any backend (no rows)")
    for name, outs in outcomes.items():
        routed = [o for o in outs if o.lacked]
        taken = [o for o in outs if not o.lacked]
        print(f"\n== {name}: {len(outs)} tests ==")
        print("  verdicts (tests it would get):",
              dict(Counter(o.row["verdict"] for o in taken).most_common()))
        if routed:
            print(f"  tests holding an op in LACKS ({len(routed)}; routed away in a campaign):",
                  dict(Counter(o.row["verdict"] for o in routed).most_common()),
                  "ops", dict(Counter(op for o in routed for op in o.lacked)))
        cf = Counter()
        for o in taken:
            if o.row["verdict"] == "pass":
                for k in ("n_if", "n_loop", "n_scan", "n_rnn"):
                    cf[k] += bool(o.row[k])
        print("  passed tests holding if / loop / scan / rnn:", dict(cf))
        ms = sorted(o.row["compile_ms"] for o in taken if o.row["compile_ms"] is not None)
        if ms:
            print(f"  compile_ms median {ms[len(ms) // 2]:.0f}, max {ms[-1]:.0f}")
        by_sig: dict[str, list[Outcome]] = defaultdict(list)
        for o in outs:
            if o.row["verdict"] not in ("pass", "skipped"):
                by_sig[f"{o.row['verdict']} [{o.row['stage']}] {o.row['error_sig']}"].append(o)
        for sig, group in sorted(by_sig.items(), key=lambda kv: -len(kv[1])):
            seeds = [o.seed for o in group]
            msg = (group[0].row.get("error_msg") or "").strip().splitlines()
            print(f"  {len(group):3d} x {sig}\n        seeds {seeds[:12]}"
                  + (f"\n        {msg[0][:240]}" if msg else ""))
    if a.against:
        print(f"\n== {a.backend} vs {a.against} (both finished; test tolerances): "
              f"{len(disagree)} disagreements ==")
        for seed, message in disagree:
            print(f"  seed {seed}: {message[:300]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="tvm_torch")
    p.add_argument("--against", default=None,
                   help="a second backend whose outputs are compared with the first's "
                        "(default with --static: ort_noopt)")
    p.add_argument("--preset", default="cpu_dynamic")
    p.add_argument("--static", action="store_true", help="no if/loop/scan")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="*", default=None,
                   help="these seeds instead of --first/--n")
    p.add_argument("--sandbox", action="store_true", help="evaluate in sandbox processes")
    p.add_argument("--save", default=None, help="a folder for each non-pass's graph and error")
    p.add_argument("--progress", action="store_true")
    a = p.parse_args()
    if a.static and a.against is None:
        a.against = "ort_noopt"
    try:
        probe(a)
    except Exception:
        traceback.print_exc()
        raise


if __name__ == "__main__":
    main()
