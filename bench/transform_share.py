"""How many transform tests the torch backends ran, of those they took (issue 42's measure).

A transform test (`mode == "transform"`, docs/training.md) that a backend took but did not run
comes back `skipped` (NotApplicable: torch eager runs it only in another control-flow dialect,
or on another device) or `unsupported`. This reads one or more campaign output folders and
prints, per torch backend and in all: transform rows, the rows that ran (any other verdict),
and their share. With several folders it gives the median and spread of the overall share.

    python bench/transform_share.py /tmp/train-before /tmp/train-after
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

#: verdicts of a transform test the backend did not run
NOT_RUN = ("skipped", "unsupported")
#: backends whose rows count: the torch compilers and torch eager
TORCH_PREFIXES = ("inductor", "aot_eager", "eager")


def transform_rows(run_dir: Path) -> list[dict]:
    import pyarrow.dataset as ds

    table = ds.dataset(run_dir / "results", format="parquet").to_table(
        columns=["backend", "mode", "verdict", "error_class", "dialect"])
    return [r for r in table.to_pylist()
            if r["mode"] == "transform" and r["backend"].startswith(TORCH_PREFIXES)]


def share(run_dir: Path) -> float:
    rows = transform_rows(run_dir)
    took, ran = Counter(), Counter()
    why = Counter()
    for r in rows:
        took[r["backend"]] += 1
        if r["verdict"] in NOT_RUN:
            why[(r["verdict"], r["error_class"])] += 1
        else:
            ran[r["backend"]] += 1
    print(f"{run_dir}:")
    for b in sorted(took):
        print(f"  {b:45s} {ran[b]:4d} ran of {took[b]:4d}")
    total, done = sum(took.values()), sum(ran.values())
    frac = done / total if total else float("nan")
    print(f"  all torch backends: {done} ran of {total} transform rows ({frac:.0%})")
    for (v, c), n in why.most_common():
        print(f"    not run: {n} {v} ({c})")
    return frac


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", type=Path, nargs="+", help="campaign output folders")
    a = p.parse_args(argv)
    shares = [share(r) for r in a.runs]
    if len(shares) > 1:
        print(f"overall share: median {statistics.median(shares):.0%}, "
              f"spread {min(shares):.0%}-{max(shares):.0%} over {len(shares)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
