"""The report's plotly figures, built from `ReportData` (already aggregated: no figure carries
per-row data, so the page stays small whatever the campaign's size)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from campaign.report.data import FINDING_VERDICTS, ReportData

VERDICT_COLORS = {
    "pass": "#4caf50", "mismatch": "#d32f2f", "crash": "#f57c00", "signal": "#7b1fa2",
    "timeout": "#1976d2", "invalid": "#fbc02d", "unsupported": "#9e9e9e", "skipped": "#cfd8dc",
}
VERDICT_ORDER = ("mismatch", "crash", "signal", "timeout", "invalid", "unsupported", "skipped",
                 "pass")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _layout(fig: go.Figure, height: int, legend_y: float = 1.02, **kw) -> go.Figure:
    kw.setdefault("margin", dict(l=60, r=20, t=50, b=50))
    fig.update_layout(template="plotly_white", height=height, font=dict(size=12),
                      legend=dict(orientation="h", yanchor="bottom", y=legend_y, x=0), **kw)
    return fig


def _empty(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font=dict(size=14, color="#777"))
    return fig


def _unit_for(longest_s: float) -> tuple[float, str]:
    """Divisor and name of the time unit for an axis up to `longest_s` seconds."""
    return (60.0, "minutes") if longest_s > 180 else (1.0, "seconds")


def time_unit(data: ReportData) -> tuple[float, str]:
    return _unit_for(max((r.duration_s for r in data.runs), default=0.0))


def progress(data: ReportData) -> go.Figure:
    div, unit = time_unit(data)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08,
                        subplot_titles=("Tests finished", "Throughput (tests/s)"))
    by_run: dict[int, list[dict]] = {}
    for p in data.progress:
        by_run.setdefault(p["run"], []).append(p)
    for k, run in enumerate(data.runs):
        pts = by_run.get(run.idx, [])
        color = PALETTE[k % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=[0.0] + [p["t"] / div for p in pts], y=[0] + [p["cum"] for p in pts],
            mode="lines", name=run.label, legendgroup=run.label, line=dict(color=color),
            hovertemplate="%{y} tests at %{x:.2f} " + unit + "<extra>" + run.label + "</extra>"),
            row=1, col=1)
        fig.add_trace(go.Scatter(
            x=[(p["t"] - p["width"] / 2) / div for p in pts],
            y=[p["n"] / p["width"] for p in pts], mode="lines", name=run.label,
            legendgroup=run.label, showlegend=False, line=dict(color=color),
            hovertemplate="%{y:.1f} tests/s<extra>" + run.label + "</extra>"), row=1, col=2)
    fig.update_xaxes(title_text=f"time since the run's first result ({unit})")
    fig.update_yaxes(title_text="tests", row=1, col=1)
    fig.update_yaxes(title_text="tests/s", rangemode="tozero", row=1, col=2)
    return _layout(fig, 430, margin=dict(l=60, r=20, t=90, b=50), legend_y=1.12)


def verdicts(data: ReportData) -> go.Figure:
    multi = len({v["campaign"] for v in data.verdicts}) > 1
    label = (lambda v: f"{v['campaign']} · {v['backend']}") if multi else (lambda v: v["backend"])
    ys = sorted({label(v) for v in data.verdicts}, reverse=True)
    totals = {y: 0 for y in ys}
    counts: dict[tuple[str, str], int] = {}
    for v in data.verdicts:
        totals[label(v)] += v["n"]
        counts[(label(v), v["verdict"])] = counts.get((label(v), v["verdict"]), 0) + v["n"]
    present = {v["verdict"] for v in data.verdicts}
    order = [v for v in VERDICT_ORDER if v in present] + sorted(present - set(VERDICT_ORDER))
    fig = go.Figure()
    for verdict in order:
        n = [counts.get((y, verdict), 0) for y in ys]
        fig.add_trace(go.Bar(
            y=ys, x=[100.0 * c / max(totals[y], 1) for c, y in zip(n, ys, strict=True)], customdata=n,
            orientation="h", name=verdict, marker_color=VERDICT_COLORS.get(verdict, "#555"),
            hovertemplate="%{y}: %{customdata} " + verdict + " (%{x:.2f}%)<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text="share of the backend's results (%)", range=[0, 100])
    fig.update_yaxes(ticksuffix="  ")
    return _layout(fig, max(260, 70 + 38 * len(ys)))


def _curve_groups(curves: list[dict]) -> tuple[list[tuple[str, list[dict]]], int]:
    """Median/band curves (campaign, backend, t, med, lo, hi, n_runs) grouped per campaign x
    backend, sorted, with their names (`campaign · backend` when there are several
    campaigns), and the most runs any group has."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for p in curves:
        groups.setdefault((p["campaign"], p["backend"]), []).append(p)
    multi = len({c for c, _ in groups}) > 1
    named = [(f"{camp} · {backend}" if multi else backend, pts)
             for (camp, backend), pts in sorted(groups.items())]
    return named, max((p["n_runs"] for p in curves), default=0)


def _add_band(fig: go.Figure, pts: list[dict], name: str, color: str, div: float, unit: str,
              noun: str, **where: int) -> None:
    """One campaign x backend's step curve: the median over its runs, and where it has several
    a min-max band beneath (hover: min, max and runs). `where`: row/col of a subplot."""
    x = [p["t"] / div for p in pts]
    n_runs = max(p["n_runs"] for p in pts)
    if n_runs > 1:
        fig.add_trace(go.Scatter(x=x, y=[p["lo"] for p in pts], mode="lines",
                                 line=dict(width=0, shape="hv"), legendgroup=name,
                                 showlegend=False, hoverinfo="skip"), **where)
        fig.add_trace(go.Scatter(x=x, y=[p["hi"] for p in pts], mode="lines",
                                 line=dict(width=0, shape="hv"), fill="tonexty",
                                 fillcolor=_rgba(color, 0.2), legendgroup=name,
                                 showlegend=False, hoverinfo="skip"), **where)
    fig.add_trace(go.Scatter(
        x=x, y=[p["med"] for p in pts], mode="lines", line=dict(color=color, shape="hv"),
        name=name + (f" (median of {n_runs} runs, band min–max)" if n_runs > 1 else ""),
        legendgroup=name, customdata=[[p["lo"], p["hi"], p["n_runs"]] for p in pts],
        hovertemplate=("%{y:,} " + noun + " at %{x:.2f} " + unit +
                       (" (min %{customdata[0]:,}, max %{customdata[1]:,}, "
                        "%{customdata[2]} runs)" if n_runs > 1 else "")
                       + "<extra>" + name + "</extra>")), **where)


def buckets_over_time(data: ReportData) -> go.Figure:
    div, unit = time_unit(data)
    fig = go.Figure()
    groups, _ = _curve_groups(data.bucket_curves)
    for k, (name, pts) in enumerate(groups):
        _add_band(fig, pts, name, PALETTE[k % len(PALETTE)], div, unit, "buckets")
    fig.update_xaxes(title_text=f"time since the run's first result ({unit})")
    fig.update_yaxes(title_text="distinct buckets", rangemode="tozero")
    if not any(p["hi"] > 0 for p in data.bucket_curves):
        _empty(fig, "no " + "/".join(FINDING_VERDICTS) + " findings in these runs")
    return _layout(fig, 400)


def _runs_title(name: str, pts: list[dict]) -> str:
    """A panel's title: its name, and how many runs its median is over where several."""
    n = max(p["n_runs"] for p in pts)
    return f"{name} ({n} runs)" if n > 1 else name


def coverage_over_time(data: ReportData) -> go.Figure:
    """Compiler lines covered against campaign time, one panel per campaign x backend (their
    scales differ tenfold: Inductor's packages against TVM's), two panels a row; the time
    unit follows the curves' own span (campaign time, not the span of every run's results)."""
    div, unit = _unit_for(max((p["t"] for p in data.coverage.curves), default=0.0))
    groups, n_runs = _curve_groups(data.coverage.curves)
    cols = 2 if len(groups) > 1 else 1
    nrows = max(1, -(-len(groups) // cols))
    top = 80 if n_runs > 1 else 50
    height = top + 50 + 300 * nrows
    fig = make_subplots(rows=nrows, cols=cols, horizontal_spacing=0.1,
                        vertical_spacing=100 / (height - top - 50),  # px: x title, next title
                        subplot_titles=[_runs_title(name, pts) for name, pts in groups] or None)
    for k, (name, pts) in enumerate(groups):
        _add_band(fig, pts, name, PALETTE[k % len(PALETTE)], div, unit, "lines",
                  row=k // cols + 1, col=k % cols + 1)
    fig.update_xaxes(title_text=f"time since the run started ({unit})", rangemode="tozero")
    fig.update_yaxes(title_text="lines covered", rangemode="tozero")
    fig.update_annotations(font=dict(size=12))
    if not groups:
        _empty(fig, "no coverage/growth.parquet in these runs")
    if n_runs > 1:
        fig.update_layout(title=dict(text=f"median of the runs, band min–max (up to {n_runs} "
                                     "runs)", font=dict(size=12), x=0))
    return _layout(fig, height, showlegend=False, margin=dict(l=70, r=20, t=top, b=50))


def yield_bars(rows: list[dict], note: str | None = None) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "tests with a finding / an invalid result (%)", "distinct finding buckets hit"))
    names = [f"{r['name']}<br>n={r['tests']}" for r in rows]
    fig.add_trace(go.Bar(
        x=names, y=[100.0 * r["hits"] / max(r["tests"], 1) for r in rows],
        customdata=[r["hits"] for r in rows], name="finding (mismatch/crash/signal/timeout)",
        marker_color=VERDICT_COLORS["mismatch"],
        hovertemplate="%{customdata} tests with a finding (%{y:.2f}%)<extra></extra>"),
        row=1, col=1)
    fig.add_trace(go.Bar(
        x=names, y=[100.0 * r["invalid"] / max(r["tests"], 1) for r in rows],
        customdata=[r["invalid"] for r in rows], name="invalid (our bug)",
        marker_color=VERDICT_COLORS["invalid"],
        hovertemplate="%{customdata} tests with an invalid result (%{y:.2f}%)<extra></extra>"),
        row=1, col=1)
    fig.add_trace(go.Bar(
        x=names, y=[r["buckets"] for r in rows], name="buckets", showlegend=False,
        marker_color="#455a64", hovertemplate="%{y} buckets<extra></extra>"), row=1, col=2)
    fig.update_layout(barmode="group")
    fig.update_yaxes(rangemode="tozero")
    if not rows:
        _empty(fig, "no tests")
    if note:
        fig.add_annotation(text=note, showarrow=False, xref="paper", yref="paper", x=0, y=-0.28,
                           xanchor="left", font=dict(size=11, color="#777"))
    return _layout(fig, 430, margin=dict(l=60, r=20, t=90, b=90 if note else 60), legend_y=1.12)


def colors_at(x: float) -> str:
    return sample_colorscale("OrRd", [x])[0]


def op_coverage(data: ReportData) -> go.Figure:
    seen = {r["op"]: r for r in data.op_coverage}
    rows = list(data.op_coverage)
    never = [op for op in (data.registered_ops or []) if op not in seen]
    rows += [{"op": op, "tests": 0, "hits": 0} for op in never]
    rate = [100.0 * r["hits"] / r["tests"] if r["tests"] else 0.0 for r in rows]
    top = max(rate, default=0.0) or 1.0
    # colours computed here: plotly.js 3 warns "Invalid color specifier" for numeric bar colours
    colors = sample_colorscale("OrRd", [0.15 + 0.85 * x / top for x in rate])
    fig = go.Figure(go.Bar(
        x=[r["op"] for r in rows], y=[r["tests"] for r in rows], showlegend=False,
        customdata=[[r["hits"], rt] for r, rt in zip(rows, rate, strict=True)], marker=dict(color=colors),
        hovertemplate=("%{x}: in %{y} tests, %{customdata[0]} with a finding "
                       "(%{customdata[1]:.2f}%)<extra></extra>")))
    if rows:  # an invisible scatter carries the colour bar
        fig.add_trace(go.Scatter(
            x=[rows[0]["op"]], y=[max(rows[0]["tests"], 1)], mode="markers", showlegend=False,
            hoverinfo="skip", marker=dict(
                size=0, opacity=0, color=[0.0], cmin=0.0, cmax=top,
                colorscale=[[i / 10, colors_at(0.15 + 0.085 * i)] for i in range(11)],
                showscale=True,
                colorbar=dict(title=dict(text="finding %"), thickness=12))))
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9), dtick=1)  # every op named
    fig.update_yaxes(title_text="tests containing the op (log)", type="log" if rows else "linear",
                     dtick="D2")
    if never:
        fig.add_trace(go.Scatter(
            x=never, y=[1] * len(never), mode="markers", marker=dict(symbol="x", color="#d32f2f"),
            name="registered, never generated",
            hovertemplate="%{x}: never generated<extra></extra>"))
    if not rows:
        _empty(fig, "no ops recorded")
    return _layout(fig, 460, margin=dict(l=60, r=20, t=40, b=110))
