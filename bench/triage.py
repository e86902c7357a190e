"""Figures of the triage over one or more campaign outputs (their `bugs.parquet`): buckets,
reduction ratio (reduced / original instructions, nested counted), the campaigns' timeouts
(confirmed, or cleared by their re-run) and how many `repro.py` reproduced the verdict when
run fresh. Prints, never asserts.

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
    causes = {(r["run"], r.get("bug") or r.get("bucket")) for r in bugs}
    print(f"{len(rows)} buckets, {len(bugs)} compiler-bug buckets ({len(causes)} bugs: buckets "
          f"grouped by cause) in {len(dirs)} run(s)")
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
    timeouts(dirs)
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


def timeouts(dirs: list[str]) -> None:
    """The campaigns' timeouts (results/): confirmed by a re-run in a fresh process with a
    larger limit, cleared by it (a test slow only under load: the re-run's verdict), or never
    re-run (older runs, `campaign.confirm_timeout_factor = 0`, the driver's WorkerTimeout)."""
    from collections import Counter

    from campaign.storage import read_results

    confirmed = unconfirmed = 0
    cleared: Counter[str] = Counter()
    took = []
    for d in dirs:
        if not (Path(d) / "results").is_dir():
            continue
        t = read_results(Path(d)).select(["verdict", "timeout_confirmed", "confirm_s"])
        for r in t.to_pylist():
            if r["timeout_confirmed"] is True:
                confirmed += 1
            elif r["timeout_confirmed"] is False:
                cleared[r["verdict"]] += 1
                took.append(r["confirm_s"])
            elif r["verdict"] == "timeout":
                unconfirmed += 1
    if confirmed or cleared or unconfirmed:
        verdicts = ", ".join(f"{v} {n}" for v, n in cleared.most_common())
        print(f"timeouts: {confirmed} confirmed by a re-run in a fresh process; "
              f"{sum(cleared.values())} cleared by it ({verdicts or '-'}; re-run median "
              f"{statistics.median(took) if took else 0:.1f} s); {unconfirmed} never re-run")


if __name__ == "__main__":
    main(sys.argv[1:])
