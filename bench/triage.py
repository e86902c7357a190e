"""Figures of the triage over one or more campaign outputs (their `bugs.parquet`): buckets,
reduction ratio (reduced / original instructions, nested counted) and how many `repro.py`
reproduced the verdict when run fresh. Prints, never asserts.

    python bench/triage.py runs/cpu_all/<time> runs/cpu_dynamic/<time> ...
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq


def main(dirs: list[str]) -> None:
    rows = []
    for d in dirs:
        path = Path(d) / "bugs.parquet"
        if not path.is_file():
            print(f"{d}: no bugs.parquet (run python -m campaign.triage {d})")
            continue
        for r in pq.read_table(path).to_pylist():
            rows.append({**r, "run": d})
    bugs = [r for r in rows if r.get("kind") == "bug"]
    print(f"{len(rows)} buckets, {len(bugs)} compiler-bug buckets in {len(dirs)} run(s)")
    print(f"{'run':<28} {'bucket':<36} {'count':>5} {'orig':>5} {'red':>4} {'ratio':>6} "
          f"{'tests':>5} {'s':>6}  repro")
    ratios = []
    for r in sorted(bugs, key=lambda r: (r.get("run"), r.get("bucket"))):
        ratio = None
        if r.get("reduced_insts") is not None and r.get("original_insts"):
            ratio = r.get("reduced_insts") / r.get("original_insts")
            ratios.append(ratio)
        dash = lambda v: "-" if v is None else str(v)  # noqa: E731
        secs = "-" if r.get("reduction_s") is None else f"{r.get('reduction_s'):.0f}"
        pct = "-" if ratio is None else f"{ratio:.0%}"
        print(f"{Path(r.get('run')).name[:28]:<28} {r.get('bucket')[:36]:<36} {r.get('count'):>5} "
              f"{dash(r.get('original_insts')):>5} {dash(r.get('reduced_insts')):>4} {pct:>6} "
              f"{dash(r.get('reduction_tests')):>5} {secs:>6}  {r.get('repro_status') or '-'}")
    if ratios:
        print(f"reduced buckets: {len(ratios)}; median reduced/original = "
              f"{statistics.median(ratios):.1%} (mean {statistics.mean(ratios):.1%}, "
              f"max {max(ratios):.1%})")
    per = []  # every reduction done (bugs/reduced.json), not only each bucket's smallest
    for d in dirs:
        index = Path(d) / "bugs" / "reduced.json"
        if index.is_file():
            import json

            for e in json.loads(index.read_text()).values():
                if e.get("status") == "reduced" and e.get("original_insts"):
                    per.append(e["reduced_insts"] / e["original_insts"])
    if per:
        print(f"every reduction: {len(per)}; median reduced/original = "
              f"{statistics.median(per):.1%} (max {max(per):.1%})")
    checked = [r for r in bugs if r.get("repro_status") not in (None, "none")]
    ok = [r for r in checked if r.get("repro_status") == "reproduced"]
    confirmed = [r for r in checked if r.get("confirmed")]
    ok_conf = [r for r in confirmed if r.get("repro_status") == "reproduced"]
    if checked:
        print(f"repro.py reproduced the verdict for {len(ok)}/{len(checked)} buckets "
              f"({len(ok) / len(checked):.0%}); of the buckets the triage confirmed by a re-run: "
              f"{len(ok_conf)}/{len(confirmed)}")
    for r in checked:
        if r.get("repro_status") != "reproduced":
            print(f"  not reproduced: {r.get('bucket')} ({r.get('repro_status')}; confirmed="
                  f"{r.get('confirmed')}): {r.get('note') or ''}"[:200])


if __name__ == "__main__":
    main(sys.argv[1:])
