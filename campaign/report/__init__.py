"""Campaign dashboard: one self-contained HTML page from the Parquet results of one or more
campaign runs (docs/report.md).

    python run.py report runs/cpu_ort            # or: python -m campaign.report runs/cpu_ort
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from campaign.report.data import ReportData, ReportError, load


@dataclass
class ReportResult:
    out: Path
    plot_ids: list[str]
    data: ReportData
    query_s: float
    render_s: float
    total_s: float
    size_bytes: int


def build_report(dirs: Sequence[Path], out: Path, *, title: str | None = None,
                 max_buckets: int = 500, op_registry: bool = True) -> ReportResult:
    """Read the runs under `dirs` and write the page to `out`."""
    from campaign.report.page import render  # imports plotly

    t0 = time.perf_counter()
    data = load([Path(d) for d in dirs], max_buckets=max_buckets, op_registry=op_registry)
    t1 = time.perf_counter()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ids = render(data, out, title=title, inputs=[Path(d) for d in dirs])
    t2 = time.perf_counter()
    return ReportResult(out=out, plot_ids=ids, data=data, query_s=t1 - t0, render_s=t2 - t1,
                        total_s=t2 - t0, size_bytes=out.stat().st_size)


__all__ = ["ReportError", "ReportResult", "build_report"]
