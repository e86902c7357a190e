"""Report benchmark: time `python run.py report` over synthetic campaigns of a given size, from
Parquet to a page drawn in headless Chromium.

    python bench/report.py [--rows 10000 100000] [--runs 3] [--backends ort,tvm,inductor]
                           [--screenshot docs/report.png] [--keep DIR]

For each size: rows written (synthetic, through campaign.storage.ResultSink), DuckDB query time,
page build time, HTML size, and the time headless Chromium takes from navigation to the last plot
drawn (skipped when there is no Chromium). Prints figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaign.report import build_report  # noqa: E402
from campaign.report.browser import check_page, why_unavailable  # noqa: E402
from campaign.report.synthetic import write_campaign  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--runs", type=int, default=3, help="repeated runs per campaign")
    ap.add_argument("--backends", default="ort,tvm,inductor")
    ap.add_argument("--screenshot", type=Path, default=None,
                    help="save a full-page screenshot of the first size's page here")
    ap.add_argument("--keep", type=Path, default=None, help="write the data and pages here")
    a = ap.parse_args()
    backends = a.backends.split(",")
    no_browser = why_unavailable()
    if no_browser:
        print(f"browser check skipped: {no_browser}")
    root = a.keep or Path(tempfile.mkdtemp(prefix="dynsmith-report-bench-"))
    print(f"{'rows':>9} {'tests':>8} {'write s':>8} {'query s':>8} {'build s':>8} "
          f"{'HTML MB':>8} {'browser s':>9} {'total s':>8} plots")
    for k, rows in enumerate(a.rows):
        d = root / f"n{rows}"
        per_run = max(1, rows // (a.runs * len(backends)))
        t0 = time.perf_counter()
        write_campaign(d, n_runs=a.runs, n_tests=per_run, backends=backends,
                       duration_s=1800.0, bugs_table=False)
        t_write = time.perf_counter() - t0
        out = d / "report.html"
        res = build_report([d], out)
        shot = a.screenshot if (k == 0 and a.screenshot) else None
        if no_browser:
            b_s, plots = float("nan"), "-"
        else:
            chk = check_page(out, len(res.plot_ids), screenshot=shot)
            b_s = chk.load_s
            plots = f"{chk.n_plots}/{len(res.plot_ids)}" + (
                f" PROBLEMS: {chk.problems[:3]}" if chk.problems else "")
        print(f"{res.data.n_rows:>9,} {res.data.n_tests:>8,} {t_write:>8.2f} {res.query_s:>8.2f} "
              f"{res.render_s:>8.2f} {res.size_bytes / 1e6:>8.1f} {b_s:>9.2f} "
              f"{res.total_s + b_s:>8.2f} {plots}")
    if a.keep:
        print(f"kept under {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
