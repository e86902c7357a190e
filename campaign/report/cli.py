"""`python run.py report DIR... [-o report.html]` and `python -m campaign.report DIR...`."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from campaign.report import ReportError, build_report


def parser(prog: str = "python run.py report") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog, description="Write a self-contained HTML dashboard of campaign results.")
    ap.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                    help="run dirs (holding results/), campaign dirs or runs/ (searched below)")
    ap.add_argument("-o", "--out", type=Path, default=None,
                    help="output HTML file (default: DIR/report.html for the first DIR)")
    ap.add_argument("--title", default=None, help="page title")
    ap.add_argument("--max-buckets", type=int, default=500,
                    help="rows of the bucket table (largest first; default 500)")
    ap.add_argument("--no-op-registry", action="store_true",
                    help="don't import the IR to list ops never generated")
    return ap


def main(argv: Sequence[str] | None = None, prog: str = "python run.py report") -> int:
    a = parser(prog).parse_args(argv)
    out = a.out or a.dirs[0] / "report.html"
    try:
        res = build_report(a.dirs, out, title=a.title, max_buckets=a.max_buckets,
                           op_registry=not a.no_op_registry)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    d = res.data
    print(f"wrote {res.out} ({res.size_bytes / 1e6:.1f} MB): {len(d.runs)} run(s), "
          f"{d.n_tests:,} tests, {d.n_rows:,} rows, {d.n_finding_buckets} finding buckets"
          + (f" ({d.n_finding_bugs} bugs in the bugs tables)" if d.n_finding_bugs is not None
             else "") + ", "
          f"{len(res.plot_ids)} plots; query {res.query_s:.2f} s, render {res.render_s:.2f} s")
    return 0
