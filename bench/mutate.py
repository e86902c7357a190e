"""Mutation throughput and validity, per mutator, on one core.

For each mutator: `--tries` proposals on the shipped seeds (round-robin, a fresh rng each),
each accepted candidate verified (`ir.core.verify`, as the engine does). Prints:
  - valid mutants/s: mutants that pass `verify` per second of CPU time spent proposing and
    verifying (failed and declined attempts included), on one core (torch and this process
    single-threaded; CPU time, so other load on the machine does not count);
  - applied: share of proposals that gave a verified mutant (the rest: declined, ill-formed);
  - valid on the reference: of `--valid` of those mutants, the share for which the input search
    finds values every instruction accepts (`make_valid`, repairs allowed, then `ir.numerics.domain`'s
    check), and the share needing no repair.
Then the median over mutators, and whole chains (length 1..5) as the campaign makes them.

    python bench/mutate.py [--tries 300] [--valid 60] [--seeds DIR]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ir import GenConfig, verify  # noqa: E402
from ir.numerics.domain import evaluate_checked  # noqa: E402
from ir.numerics.input_search import make_valid  # noqa: E402
from mutators import MUTATORS, MutationConfig, MutationEngine  # noqa: E402
from mutators.source import ROOT, load_seeds  # noqa: E402


def valid_on_reference(g, seed: int) -> tuple[bool, bool]:
    """(valid after make_valid, valid without any repair)."""
    v = make_valid(g, seed)
    if v is None:
        return False, False
    env = {k: torch.from_numpy(np.array(a)) for k, a in v.search.values.items()}
    ok = evaluate_checked(v.graph, env)[1] is None
    return ok, ok and not v.dropped


def bench_mutator(name: str, seeds, tries: int, n_valid: int) -> dict:
    m = MUTATORS[name]()
    m.donors = lambda rng: rng.choice(seeds)
    gen = GenConfig()
    made = []
    cpu = 0.0
    t_wall = time.perf_counter()
    for i in range(tries):
        _, g = seeds[i % len(seeds)]
        t = time.process_time()
        mu = m.propose(g, random.Random(i), gen)
        if mu is not None:
            verify(mu.graph)
            made.append((i, mu.graph))
        cpu += time.process_time() - t
    wall = time.perf_counter() - t_wall
    checked = [valid_on_reference(g, i) for i, g in made[:n_valid]]
    return {"name": name, "rate": len(made) / cpu if cpu else 0.0, "wall_rate": len(made) / wall,
            "applied": len(made) / tries, "ms": 1e3 * cpu / tries,
            "valid": sum(a for a, _ in checked) / max(1, len(checked)),
            "unrepaired": sum(b for _, b in checked) / max(1, len(checked)), "n": len(checked)}


def bench_chains(seeds, n: int) -> dict:
    engine = MutationEngine(MutationConfig(max_steps=5), GenConfig(),
                            donors=lambda rng: rng.choice(seeds))
    cpu, steps = 0.0, 0
    for i in range(n):
        rng = random.Random(i)
        t = time.process_time()
        out = engine.mutate(seeds[i % len(seeds)][1], rng, steps=rng.randint(1, 5))
        cpu += time.process_time() - t
        steps += len(out.steps)
    return {"chains/s": n / cpu, "steps/s": steps / cpu, "stats": engine.stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tries", type=int, default=300)
    ap.add_argument("--valid", type=int, default=60)
    ap.add_argument("--chains", type=int, default=200)
    ap.add_argument("--seeds", default=str(ROOT / "seeds"))
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    seeds = load_seeds(a.seeds)
    names = a.only or sorted(MutationConfig().weights)
    # warm-up: imports, op tables, z3 context
    bench_mutator(names[0], seeds, 20, 0)
    print(f"{len(seeds)} seeds from {a.seeds}; {a.tries} proposals per mutator, one core (CPU time)")
    print(f"{'mutator':18s} {'valid/s':>8s} {'(wall)':>7s} {'ms/try':>7s} {'applied':>8s} "
          f"{'valid ref':>9s} {'no repair':>9s}")
    rows = []
    for name in names:
        r = bench_mutator(name, seeds, a.tries, a.valid)
        rows.append(r)
        print(f"{name:18s} {r['rate']:8.0f} {r['wall_rate']:7.0f} {r['ms']:7.2f} "
              f"{r['applied']:8.1%} {r['valid']:9.1%} {r['unrepaired']:9.1%}  (n={r['n']})")
    med = statistics.median(r["rate"] for r in rows)
    slow = [r["name"] for r in rows if r["rate"] < 100]
    print(f"median valid mutants/s over mutators: {med:.0f}" +
          (f"; under 100/s: {', '.join(slow)}" if slow else ""))
    c = bench_chains(seeds, a.chains)
    print(f"chains of 1..5 steps (engine, retries included): {c['chains/s']:.0f} chains/s, "
          f"{c['steps/s']:.0f} accepted steps/s")
    for name, s in c["stats"].items():
        print(f"  {name:18s} " + " ".join(f"{k}={v}" for k, v in sorted(s.items())))


if __name__ == "__main__":
    main()
