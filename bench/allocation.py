"""Allocation benchmark: where a campaign's CPU goes, before and after the core scheduler,
capability routing and known-bug avoidance (issue: "spend the CPU where the bugs are").

For each preset, the same minutes of `python run.py campaign=<preset>` run twice, one after the
other, on the code *before* (a git worktree of `--before`, default: the parent of the commit that
added campaign/scheduler.py) and on this checkout. Per backend it prints:
  - tests evaluated, of them `unsupported`, and tests not sent to it (not applicable, held back
    for a known bug, skipped while busy, cut off at the deadline);
  - seconds in its sandbox (compile + run of its rows: wall time, inflated by contention), the
    CPU-seconds its rows measured (`cpu_ms`, where the code has it: sandbox s / cpu s is the
    inflation), and, after, the scheduler's core-seconds and share;
  - median compile time of the tests it compiled alone, and the ratio against that backend's
    compile time *alone on an idle machine*, measured in the same run of this script
    (`--idle-tests` tests per backend, generated with the preset's generator config,
    evaluated in one sandbox, first compile of the process left out); for a backend that
    merges tests (`merge` k), also the median compile of its merged modules (their mean size)
    against a merged module of k tests compiled alone in the same run;
  - ops compiled per sandbox-second (instructions of the tests it compiled);
  - distinct finding buckets after the triage (compiler-bug buckets of bugs.parquet), and the
    distinct error signatures of its findings before triage;
and per run the wall time of the whole command against the budget (Ray's start-up included, so
a run may exceed the budget by that much) and the CPU-seconds of its whole process tree.

    python bench/allocation.py [--presets cpu_dynamic] [--minutes 3] [--idle-tests 6] [--no-triage]
    python bench/allocation.py --before-dir runs/old --after-dir runs/new   # reuse runs

Asserts nothing about time: the machine is shared and varies 1.5x between identical runs; the
figures to compare are the ratios of the two runs made back to back.
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
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from scale import CpuSampler  # noqa: E402  (the process-tree CPU sampler)


def before_rev() -> str:
    """The parent of the commit that added campaign/scheduler.py (HEAD when uncommitted)."""
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--",
                          "campaign/scheduler.py"], cwd=REPO, capture_output=True, text=True)
    added = out.stdout.split()
    return f"{added[-1]}~1" if added else "HEAD"


def worktree(rev: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="dynsmith-before-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=REPO,
                   check=True, capture_output=True)
    return path


def run_campaign(tree: Path, preset: str, minutes: float, out: Path, triage: bool = True
                 ) -> dict:
    """`python run.py` in `tree` for `minutes`; its wall time and process-tree CPU."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "run.py", f"campaign={preset}", f"campaign.budget={minutes:g}m",
           f"output.dir={out}", "ray.temp_dir=/tmp/dsray-bench"]
    if not triage:
        cmd.append("triage.enabled=false")
    t0 = time.monotonic()
    with open(out.parent / f"{out.name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
        with CpuSampler(proc.pid) as cpu:
            proc.wait()
    wall = time.monotonic() - t0
    return {"wall_s": wall, "cpu_s": max((c for _, c in cpu.samples), default=0.0),
            "rc": proc.returncode}


def idle_compile_ms(preset: str, backends: list[str], n: int) -> dict[str, dict[str, float | None]]:
    """Per backend, its median compile time alone on the machine, on tests of the preset:
    `single`, a test compiled alone (in its sandbox, as `FuzzWorker.run` does), and for a
    backend the preset merges (`merge` k > 1) `merged`, a module of k tests of one dialect
    (`campaign.merge`, in-process: the campaign's merged compiles are compared with it)."""
    from hydra import compose, initialize_config_dir

    from campaign.artifacts import Materialized
    from campaign.backends import make_backend
    from campaign.config import to_config
    from campaign.merge import merge, unmergeable
    from campaign.sandbox import SandboxConfig
    from campaign.worker import FuzzWorker, Prepared, WorkerConfig

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = to_config(compose("config", overrides=[f"campaign={preset}"]))
    out: dict[str, dict[str, float | None]] = {}
    for b in backends:
        w = FuzzWorker(WorkerConfig(generator=cfg.generator, backends=[b],
                                    mutation=cfg.mutation, limits=SandboxConfig(timeout_s=120)))
        times: list[float] = []
        try:
            for seed in range(1000, 1000 + 6 * n):
                row = w.run(f"idle-{seed}", seed).rows[0]
                if row.get("compile_ms") is not None and row["verdict"] != "unsupported":
                    times.append(row["compile_ms"])
                if len(times) > n:  # the first compile of the process is left out
                    break
        finally:
            w.close()
        out[b] = {"single": statistics.median(times[1:]) if len(times) > 1 else None,
                  "merged": None}
        k = cfg.campaign.options(b).merge if b in cfg.campaign.backends else 1
        if k < 2:
            continue
        backend = make_backend(b)
        backend.prepare()
        # a fresh kernel cache, as a campaign's sandbox process has (compiled kernels of
        # earlier runs on disk would skip their C++ compiles)
        backend.child_init(tempfile.mkdtemp(prefix="dynsmith-idle-"))
        gen = FuzzWorker(WorkerConfig(generator=cfg.generator, backends=["eager"],
                                      mutation=cfg.mutation))
        by_key: dict[object, list[Prepared]] = {}
        merged_ms: list[float] = []
        try:
            for seed in range(2000, 2000 + 20 * k * n):
                if len(merged_ms) >= n:
                    break
                p = gen.make_prepared(f"idle-m{seed}", seed)
                if not isinstance(p, Prepared) or unmergeable(p) is not None:
                    continue
                group = by_key.setdefault(backend.dialect_of(seed), [])
                group.append(p)
                if len(group) == k:
                    result = backend.evaluate(Materialized(merge(group).tc))
                    backend.reset()
                    group.clear()
                    if result.compile_ms is not None and not result.failed:
                        merged_ms.append(result.compile_ms)
        finally:
            gen.close()
        out[b]["merged"] = statistics.median(merged_ms) if merged_ms else None
    return out


def figures(out: Path) -> dict:
    """Per backend figures of one campaign output dir (module doc)."""
    import pyarrow.dataset as pads

    data = pads.dataset(out / "results", format="parquet")
    wanted = ["backend", "verdict", "compile_ms", "run_ms", "n_insts", "error_sig", "merged",
              "worker"]  # the code before may have no `merged` column
    rows = data.to_table(columns=[c for c in wanted if c in data.schema.names]).to_pylist()
    summary = json.loads((out / "summary.json").read_text())
    bugs: Counter[str] = Counter()
    if (out / "bugs.parquet").is_file():
        import pyarrow.parquet as pq

        for r in pq.read_table(out / "bugs.parquet").to_pylist():
            if r["kind"] == "bug":
                bugs[r["backend"]] += 1
    per: dict[str, dict] = {}
    for b, s in summary["backends"].items():
        mine = [r for r in rows if r["backend"] == b]
        compiled = [r for r in mine if r["compile_ms"] is not None and r["verdict"] != "unsupported"]
        alone = [r for r in compiled if not r.get("merged")]
        # a merged module's compile is on each of its parts' rows: once per module
        modules = {(r["worker"], r["compile_ms"], r["run_ms"]): r for r in compiled
                   if r.get("merged")}
        sandbox_s = (sum((r["compile_ms"] or 0) + (r["run_ms"] or 0) for r in mine
                         if not r.get("merged"))
                     + sum((r["compile_ms"] or 0) + (r["run_ms"] or 0)
                           for r in modules.values())) / 1e3
        sigs = {r["error_sig"] for r in mine if r["verdict"] in ("crash", "signal", "timeout",
                                                                  "mismatch")}
        per[b] = {
            "tests": len(mine), "unsupported": sum(r["verdict"] == "unsupported" for r in mine),
            "not_applicable": sum((s.get("not_applicable") or {}).values()),
            "held_known": sum((s.get("held_known") or {}).values()),
            "skipped_busy": s.get("skipped_busy", 0), "cut_off": s.get("cut_off", 0),
            "sandbox_s": sandbox_s, "core_s": s.get("core_s"), "share": s.get("share"),
            "cpu_s": s.get("cpu_s"),
            "compile_ms": (statistics.median(r["compile_ms"] for r in alone)
                           if alone else None),
            "merged_ms": (statistics.median(r["compile_ms"] for r in modules.values())
                          if modules else None),
            "modules": len(modules), "merged_tests": sum(r["merged"] for r in modules.values()),
            "ops_per_s": (sum(r["n_insts"] or 0 for r in compiled) / sandbox_s
                          if sandbox_s else None),
            "bug_buckets": bugs.get(b, 0), "finding_sigs": len(sigs)}
    return {"per": per, "elapsed_s": summary.get("elapsed_s"), "tests": summary.get("tests")}


def _f(x, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def print_preset(preset: str, minutes: float, idle: dict, runs: dict[str, dict]) -> None:
    print(f"\n== {preset}, {minutes:g} min ==")
    for label, r in runs.items():
        wall = r.get("wall_s")
        print(f"{label}: {r['dir']}  wall {_f(wall)} s for a {minutes * 60:.0f} s budget"
              + (f" ({wall / (minutes * 60):.2f}x)" if wall else "")
              + (f", CPU {r['cpu_s']:.0f} s" if r.get("cpu_s") else ""))
    backends = sorted({b for r in runs.values() for b in r["fig"]["per"]})
    head = ["backend", "run", "tests", "unsupp", "n/a", "known", "busy", "cut", "sandbox s",
            "cpu s", "core s", "share", "compile ms", "x idle", "merged ms (k)", "x idle", "ops/s",
            "bugs", "sigs"]
    lines = [head]
    for b in backends:
        for label, r in runs.items():
            p = r["fig"]["per"].get(b)
            if p is None:
                continue
            alone = (idle.get(b) or {}).get("single")
            merged = (idle.get(b) or {}).get("merged")
            ratio = p["compile_ms"] / alone if p["compile_ms"] and alone else None
            mratio = p.get("merged_ms") / merged if p.get("merged_ms") and merged else None
            k = (f" ({p['merged_tests'] / p['modules']:.1f})" if p.get("modules") else "")
            lines.append([b, label, str(p["tests"]), str(p["unsupported"]),
                          str(p["not_applicable"]), str(p["held_known"]), str(p["skipped_busy"]),
                          str(p["cut_off"]), _f(p["sandbox_s"]), _f(p.get("cpu_s")),
                          _f(p["core_s"]),
                          _f(p["share"], "{:.0%}"), _f(p["compile_ms"]), _f(ratio, "{:.2f}"),
                          _f(p.get("merged_ms")) + k, _f(mratio, "{:.2f}"),
                          _f(p["ops_per_s"], "{:.1f}"), str(p["bug_buckets"]),
                          str(p["finding_sigs"])])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    for row in lines:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in
                        enumerate(zip(row, widths, strict=True))))
    print("idle compile ms (alone, same run): " + ", ".join(
        f"{b} {_f(v['single'])}" + (f" (a merged module: {_f(v['merged'])})"
                                    if v.get("merged") else "")
        for b, v in sorted(idle.items())))
    for b in backends:
        a, z = (runs.get("before", {}).get("fig", {}).get("per", {}).get(b),
                runs.get("after", {}).get("fig", {}).get("per", {}).get(b))
        if a and z and a["tests"]:
            print(f"  {b}: tests after/before {z['tests'] / a['tests']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["cpu_dynamic"])
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--before", default=None, help="git revision of the code before")
    ap.add_argument("--before-dir", type=Path, default=None,
                    help="reuse this output dir as the before run (one preset)")
    ap.add_argument("--after-dir", type=Path, default=None,
                    help="reuse this output dir as the after run (one preset)")
    ap.add_argument("--idle-tests", type=int, default=6)
    ap.add_argument("--no-triage", action="store_true",
                    help="no triage after either run (the code before has no wall-clock "
                         "triage budget: its triage can take many minutes); buckets are then "
                         "counted by error signature only")
    ap.add_argument("--out", type=Path, default=None, help="where the runs go (a temp dir)")
    a = ap.parse_args()
    base = a.out or Path(tempfile.mkdtemp(prefix="dynsmith-alloc-"))
    base.mkdir(parents=True, exist_ok=True)
    old = None
    for preset in a.presets:
        runs: dict[str, dict] = {}
        for label in ("before", "after"):
            given = a.before_dir if label == "before" else a.after_dir
            if given is not None:
                runs[label] = {"dir": given, "fig": figures(given), "reused": True}
                continue
            if label == "before" and old is None:
                old = worktree(a.before or before_rev())
            tree = old if label == "before" else REPO
            out = base / f"{preset}-{label}"
            print(f"running {label} ({tree}) {preset} for {a.minutes:g} min -> {out}",
                  flush=True)
            r = run_campaign(tree, preset, a.minutes, out, triage=not a.no_triage)
            runs[label] = {**r, "dir": out, "fig": figures(out)}
        backends = sorted({b for r in runs.values() for b in r["fig"]["per"]})
        print(f"measuring compile times alone ({a.idle_tests} tests per backend)", flush=True)
        idle = idle_compile_ms(preset, backends, a.idle_tests)
        print_preset(preset, a.minutes, idle, runs)
    if old is not None:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=REPO,
                       capture_output=True)


if __name__ == "__main__":
    main()
