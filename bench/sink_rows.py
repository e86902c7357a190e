"""The result sink's cost per row, the rows kept as `ResultRow` objects (the campaign's one
form, issue 42) against the same rows as dicts (the form they had before), in one run.

    python bench/sink_rows.py [--rows 2000] [--repeats 15]

Prints, per form, the median and spread (min-max) of `add` for every row plus building the
Arrow table, in microseconds a row, and the ratio objects/dicts of the medians.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from campaign.row import ResultRow
from campaign.storage import ResultSink


def rows(n: int) -> list[ResultRow]:
    base = ResultRow.graphless("t", 0, graph_hash="h", n_insts=1, n_inputs=1, dialect="eager",
                               gen_ms=0.1, host="h", worker="gen")
    return [base.for_backend("ort", "cpu", verdict="pass", seed=i, test_id=f"t{i}")
            for i in range(n)]


def once(batch: list, root: Path) -> float:
    sink = ResultSink(root, "r", "c", flush_rows=10**9)
    t0 = time.perf_counter()
    for row in batch:
        sink.add(row)
    sink._table()
    return (time.perf_counter() - t0) / len(batch) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=15)
    a = p.parse_args()
    objects = rows(a.rows)
    dicts = [dict(r) for r in objects]
    root = Path(tempfile.mkdtemp())
    times: dict[str, list[float]] = {"objects": [], "dicts": []}
    for _ in range(a.repeats):  # interleaved, so both see the same machine
        times["objects"].append(once(objects, root))
        times["dicts"].append(once(dicts, root))
    for name, ts in times.items():
        print(f"{name:8s} median {statistics.median(ts):6.1f} us/row  "
              f"spread {min(ts):6.1f}-{max(ts):6.1f}")
    print(f"ratio objects/dicts: "
          f"{statistics.median(times['objects']) / statistics.median(times['dicts']):.2f}")


if __name__ == "__main__":
    main()
