"""Control-flow coverage benchmark: how many `if`s see both branches across a test's input
sets, how many loops run several trip counts, what it costs, and why the rest is missed.

Tests are made with the generator settings of a campaign preset, read from the Hydra config
(`conf/campaign/<preset>.yaml` over `conf/config.yaml`, default `cpu_dynamic`: p_if 0.15,
p_loop 0.1, p_scan 0.1, max_depth 2, the other `GenConfig` fields at their defaults), from seeds
0..N-1 (`--first F`: F..F+N-1). Each test is made by the campaign worker itself,
`campaign.worker.FuzzWorker.make_test` (generate or mutate, `make_valid`, `cover` with the
worker's `CoverConfig`), with no backend; `make_valid` and `cover` are timed by wrapping the
names the worker calls, and the `Coverage` `cover` returns is kept. An input set counts only
when it passed `ir.numerics.domain.evaluate_checked` (`cover` keeps no other).

`--mutation-rate R` (default 0: generation only, the preset's mutation off) makes tests as a
campaign does with `mutation.rate = R` (the preset's other `mutation` settings): one worker,
its seed pool (the corpus in `seeds/`, generated seeds, then the tests it made: each test goes
through `FuzzWorker.prepare`, which runs the reference and tells the pool, as the campaign's
generation stage does; there are no backend verdicts to feed back). Figures are then printed
for all tests, generated tests and mutants, and per mutator (a mutant counts under every
mutator of its chain, from the root seed on: the rows' `mutators` column).

    python bench/coverage.py [--n 150] [--first 0] [--preset cpu_dynamic]
                             [--mutation-rate 0.8] [--list]

Prints: ifs covered both ways / total (top level, nested), branches taken / total (what the
rows' `branch_coverage` averages), loops with >= 2 distinct trip counts and with a zero trip,
input sets per test, seconds per test (median, p90; CPU time of this process, then wall) in
`cover` and in `make_valid` over the tests with control flow, instructions `make_valid`
dropped, and each uncovered if's reason (`ir.numerics.flow_coverage.explain`, the reason of its first
missing branch); `--list` names them (seed, site, reason, mutators).
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import campaign.worker as worker_mod  # noqa: E402
from campaign.config import Config, register_configs, to_config  # noqa: E402
from campaign.worker import FuzzWorker, WorkerConfig  # noqa: E402
from ir.gen.builder import GenConfig  # noqa: E402
from ir.numerics.flow_coverage import REASONS, Coverage, explain  # noqa: E402


def preset_config(preset: str) -> Config:
    """The campaign config of `conf/campaign/<preset>.yaml`, as the campaign composes it."""
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return to_config(compose("config", overrides=[f"campaign={preset}"]))


@dataclass
class Timed:
    """Wraps a function the worker calls: its CPU and wall seconds, and its last result."""

    fn: Callable
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    last: Any = None

    def __call__(self, *args: Any, **kw: Any) -> Any:
        c0, w0 = time.process_time(), time.perf_counter()
        self.last = self.fn(*args, **kw)
        self.cpu.append(time.process_time() - c0)
        self.wall.append(time.perf_counter() - w0)
        return self.last

    def reset(self) -> None:
        self.last = None


@dataclass
class Tally:
    ifs: Counter = field(default_factory=Counter)  #: "top"/"nested" -> ifs
    both: Counter = field(default_factory=Counter)  #: "top"/"nested" -> ifs with both branches
    branches: int = 0  #: branches taken (two per if)
    loops: int = 0
    loops_two_trips: int = 0
    loops_zero_trip: int = 0
    sets: list[int] = field(default_factory=list)  #: input sets per test with control flow
    cover_cpu: list[float] = field(default_factory=list)
    cover_wall: list[float] = field(default_factory=list)
    valid_cpu: list[float] = field(default_factory=list)
    valid_wall: list[float] = field(default_factory=list)
    drops: Counter = field(default_factory=Counter)  #: "top"/"nested" -> instructions dropped
    reasons: Counter = field(default_factory=Counter)
    uncovered: list[tuple[int, str, str, str]] = field(default_factory=list)
    tests: int = 0
    no_valid: int = 0
    failed: int = 0  #: make_test raised (a generator or mutator bug: an invalid row)

    def add(self, seed: int, cov: Coverage, tag: str = "") -> None:
        for site in cov.if_sites:
            where = "nested" if "/" in site else "top"
            self.ifs[where] += 1
            self.both[where] += len(cov.branches.get(site, ())) == 2
            self.branches += len(cov.branches.get(site, ()))
        for site in cov.loop_sites:
            if cov.ops[site] != "loop":
                continue
            self.loops += 1
            trips = cov.trips.get(site, set())
            self.loops_two_trips += len(trips) >= 2
            self.loops_zero_trip += 0 in trips
        why = explain(cov)
        for site in cov.if_sites:
            missing = [k for k in (0, 1) if (site, k) in why]
            if missing:
                self.reasons[why[site, missing[0]]] += 1
                self.uncovered.append((seed, site, why[site, missing[0]], tag))


@dataclass
class Groups:
    """The tallies: every test, generated tests, mutants, and per mutator of a mutant's chain."""

    all: Tally = field(default_factory=Tally)
    generated: Tally = field(default_factory=Tally)
    mutant: Tally = field(default_factory=Tally)
    by_mutator: dict[str, Tally] = field(default_factory=dict)

    def of(self, lineage: list[dict]) -> list[Tally]:
        chain = sorted({s["mutator"] for s in lineage[1:] if "mutator" in s})
        if not chain:
            return [self.all, self.generated]
        return [self.all, self.mutant, *(self.by_mutator.setdefault(m, Tally()) for m in chain)]


def run(n: int, preset: str, first: int = 0, mutation_rate: float = 0.0) -> Groups:
    cfg = preset_config(preset)
    gen: GenConfig = cfg.generator
    wcfg = WorkerConfig(generator=gen, backends=[], sandbox=False,
                        mutation=replace(cfg.mutation, rate=mutation_rate))
    how = (f"mutation rate {mutation_rate} (seed pool: {cfg.mutation.seeds}, "
           f"{cfg.mutation.generated_seeds} generated seeds)" if mutation_rate > 0
           else "generated only")
    print(f"preset {preset}: p_if {gen.p_if}, p_loop {gen.p_loop}, p_scan {gen.p_scan}, "
          f"max_depth {gen.max_depth}, nodes {gen.nodes}; seeds {first}..{first + n - 1}, "
          f"{how}; {wcfg.coverage}")
    timed_cover = Timed(worker_mod.cover)
    timed_valid = Timed(worker_mod.make_valid)
    worker_mod.cover, worker_mod.make_valid = timed_cover, timed_valid
    groups = Groups()
    try:
        worker = FuzzWorker(wcfg)
        for seed in range(first, first + n):
            timed_cover.reset()
            timed_valid.reset()
            try:
                tc = worker.make_test(f"cov-{seed}", seed)
            except Exception:  # the campaign records a generator failure and goes on
                if not groups.all.failed:
                    traceback.print_exc()
                groups.all.tests += 1
                groups.all.failed += 1
                continue
            if mutation_rate > 0:  # the reference runs and the seed pool learns of the test
                worker.prepare(tc)
            tallies = groups.of(tc.lineage)
            tag = ",".join(s["mutator"] for s in tc.lineage[1:] if "mutator" in s)
            valid = timed_valid.last
            for t in tallies:
                t.tests += 1
                t.no_valid += valid is None
            if valid is None:
                continue
            out = timed_cover.last
            assert out is not None and tc.coverage is not None
            cov: Coverage = out[1]
            for t in tallies:
                for d in valid.dropped:
                    t.drops["nested" if "/" in d else "top"] += 1
                if not cov.ops:
                    continue
                t.sets.append(cov.n_sets)
                t.cover_cpu.append(timed_cover.cpu[-1])
                t.cover_wall.append(timed_cover.wall[-1])
                t.valid_cpu.append(timed_valid.cpu[-1])
                t.valid_wall.append(timed_valid.wall[-1])
                t.add(seed, cov, tag)
    finally:
        worker_mod.cover, worker_mod.make_valid = timed_cover.fn, timed_valid.fn
    return groups


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} = {100 * a / b:.1f}%" if b else f"{a}/0"


def _times(cpu: list[float], wall: list[float]) -> str:
    if not cpu:
        return "n/a"
    c50, c90 = np.percentile(cpu, [50, 90])
    w50, w90 = np.percentile(wall, [50, 90])
    return f"median {c50:.3f} s, p90 {c90:.3f} s CPU (wall: median {w50:.3f} s, p90 {w90:.3f} s)"


def report(t: Tally, listing: bool) -> None:
    both, ifs = sum(t.both.values()), sum(t.ifs.values())
    failed = f", make_test failed {t.failed}" if t.failed else ""
    print(f"tests {t.tests}, no valid inputs {t.no_valid}, with control flow {len(t.sets)}{failed}")
    print(f"ifs covered both ways: {_pct(both, ifs)} "
          f"(top level {_pct(t.both['top'], t.ifs['top'])}, "
          f"nested {_pct(t.both['nested'], t.ifs['nested'])}); "
          f"branches taken: {_pct(t.branches, 2 * ifs)}")
    print(f"loops with >= 2 distinct trip counts: {_pct(t.loops_two_trips, t.loops)}; "
          f"with a zero trip: {_pct(t.loops_zero_trip, t.loops)}")
    if t.sets:
        print(f"input sets per test with control flow: mean {np.mean(t.sets):.2f}, "
              f"max {max(t.sets)}")
    print(f"cover per test:      {_times(t.cover_cpu, t.cover_wall)}")
    print(f"make_valid per test: {_times(t.valid_cpu, t.valid_wall)}")
    print(f"instructions dropped by make_valid: {t.drops['top']} top-level, "
          f"{t.drops['nested']} inside branches not taken")
    print(f"uncovered ifs ({ifs - both}), by the reason of their first missing branch:")
    for reason in REASONS:
        if t.reasons[reason]:
            print(f"  {t.reasons[reason]:4d}  {reason}")
    if listing:
        for seed, site, reason, tag in t.uncovered:
            print(f"  seed {seed:4d}  site {site:10s}  {reason}" + (f"  [{tag}]" if tag else ""))


def report_groups(g: Groups, listing: bool, split: bool) -> None:
    if not split:
        report(g.all, listing)
        return
    for name, t in (("all tests", g.all), ("generated tests", g.generated),
                    ("mutants", g.mutant)):
        print(f"\n== {name}")
        report(t, listing and t is not g.all)
    print("\n== per mutator (a mutant counts under every mutator of its chain)")
    print(f"  {'mutator':18s} {'tests':>5s} {'ifs':>4s}  {'ifs both ways':>22s}  "
          f"{'branches taken':>22s}  uncovered ifs by reason")
    short = {r: f"r{i}" for i, r in enumerate(REASONS)}
    for name in sorted(g.by_mutator):
        t = g.by_mutator[name]
        both, ifs = sum(t.both.values()), sum(t.ifs.values())
        why = " ".join(f"{short[r]}:{t.reasons[r]}" for r in REASONS if t.reasons[r])
        print(f"  {name:18s} {t.tests:5d} {ifs:4d}  {_pct(both, ifs):>22s}  "
              f"{_pct(t.branches, 2 * ifs):>22s}  {why}")
    print("  reasons: " + "; ".join(f"{short[r]} {r}" for r in REASONS))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=150, help="graphs (seeds first..first+n-1)")
    ap.add_argument("--first", type=int, default=0, help="first seed")
    ap.add_argument("--preset", default="cpu_dynamic", help="conf/campaign preset")
    ap.add_argument("--mutation-rate", type=float, default=0.0,
                    help="share of tests made by mutating the seed pool, as a campaign with "
                         "mutation.rate R (0: generation only)")
    ap.add_argument("--list", action="store_true", help="name every uncovered if")
    args = ap.parse_args()
    groups = run(args.n, args.preset, args.first, args.mutation_rate)
    report_groups(groups, args.list, args.mutation_rate > 0)


if __name__ == "__main__":
    main()
