"""Assemble the report: one self-contained HTML file (plotly.js inlined once, every figure a div,
tables as plain HTML; no request leaves the file)."""
from __future__ import annotations

import datetime as dt
import html
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

import plotly
import plotly.graph_objects as go
import plotly.offline

from campaign.report import figures
from campaign.report.data import FEATURES, FINDING_VERDICTS, SUMMARY_FILE, ReportData, Run

PLOT_CONFIG = {"displaylogo": False, "responsive": True,
               "modeBarButtonsToRemove": ["select2d", "lasso2d"]}

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #222; background: #fafafa; }
header { background: #263238; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; }
header .sub { color: #b0bec5; font-size: 13px; }
main { padding: 8px 32px 40px 32px; max-width: 1500px; }
section { background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; margin: 18px 0;
          padding: 12px 18px; }
h2 { font-size: 17px; margin: 6px 0 4px 0; }
p.note { color: #666; font-size: 13px; margin: 2px 0 8px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0 4px 0; }
.card { background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; padding: 8px 16px;
        min-width: 120px; }
.card .v { font-size: 22px; font-weight: 600; }
.card .k { font-size: 12px; color: #666; }
table { border-collapse: collapse; font-size: 12.5px; width: 100%; }
th, td { border-bottom: 1px solid #eee; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.tid { white-space: nowrap; font-family: ui-monospace, Menlo, Consolas, monospace;
         font-size: 11px; }
td.sig { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 11.5px;
         max-width: 520px; word-break: break-word; }
.tablewrap { max-height: 620px; overflow: auto; }
.v-mismatch { color: #d32f2f; font-weight: 600; } .v-crash { color: #f57c00; font-weight: 600; }
.v-signal { color: #7b1fa2; font-weight: 600; } .v-timeout { color: #1976d2; font-weight: 600; }
.v-invalid { color: #9a7d0a; font-weight: 600; }
.missing { color: #999; }
input.filter { margin: 4px 0 8px 0; padding: 4px 8px; width: 320px; }
nav a { margin-right: 14px; font-size: 13px; }
.parts { color: #666; font-size: 11px; white-space: nowrap; }
h3 { font-size: 14px; margin: 12px 0 2px 0; }
"""

# filter the rows of a bucket table by a substring typed into its box
FILTER_JS = """
document.querySelectorAll('input.filter').forEach(function (box) {
  box.addEventListener('input', function () {
    var q = box.value.toLowerCase();
    document.querySelectorAll('#' + box.dataset.table + ' tbody tr').forEach(function (tr) {
      tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
});
"""

E = html.escape


def _href(target: Path, out_dir: Path) -> str:
    try:
        rel = os.path.relpath(target, out_dir)
    except ValueError:  # another drive (Windows)
        rel = str(target)
    return quote(Path(rel).as_posix())


def _link(target: Path, out_dir: Path, text: str) -> str:
    cls = "" if target.exists() else ' class="missing" title="not on disk"'
    return f'<a href="{_href(target, out_dir)}"{cls}>{E(text)}</a>'


def _fmt_dur(s: float) -> str:
    s = float(s)
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _fig_html(fig: go.Figure, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config=PLOT_CONFIG, default_width="100%")


def _runs_table(data: ReportData, out_dir: Path) -> str:
    head = ("<tr><th>run</th><th>run ids</th><th>backends</th><th class=num>tests</th>"
            "<th class=num>rows</th><th>started (UTC)</th><th class=num>duration</th>"
            "<th class=num>tests/s</th><th class=num>finding rows</th>"
            "<th class=num>invalid rows</th><th>bugs table</th></tr>")
    body = []
    for r in data.runs:
        start = dt.datetime.fromtimestamp(r.start_ms / 1000, tz=dt.timezone.utc)
        tps = r.tests / r.duration_s if r.duration_s > 0 else float("nan")
        body.append(
            f"<tr><td>{_link(r.dir, out_dir, r.label)}</td><td>{E(', '.join(r.run_ids))}</td>"
            f"<td>{E(', '.join(r.backends))}</td><td class=num>{r.tests:,}</td>"
            f"<td class=num>{r.rows:,}</td><td>{start:%Y-%m-%d %H:%M:%S}</td>"
            f"<td class=num>{_fmt_dur(r.duration_s)}</td><td class=num>{tps:.2f}</td>"
            f"<td class=num>{r.findings:,}</td><td class=num>{r.invalid:,}</td>"
            f"<td>{'yes' if r.has_bugs_table else 'no'}</td></tr>")
    return (f'<div class="tablewrap"><table id="runs"><thead>{head}</thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


#: the "Where the cores went" table: (heading, stage key, format, tooltip)
_CORE_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("share", "share", "pct", "the stage's share of the cores (normalized over the stages)"),
    ("core-s", "core_s", "sec", "core-seconds the stage used"),
    ("% of core-s", "core_frac", "pct", "fraction of the core-seconds of all stages"),
    ("tests", "evaluated", "int", "tests the backend evaluated; generation: tests of the run "
     "(with at least one row)"),
    ("tests/core-s", "per_core_s", "rate", "tests per core-second"),
    ("not applicable", "not_applicable", "int",
     "tests the backend was not given because they hold ops it lacks (by op)"),
    ("held back (known bug)", "held_known", "int",
     "tests held back because they matched a known bug (by bucket)"),
    ("held back (environment fault)", "held_env", "int",
     "tests not given to the backend once it was held back for an environment fault (one "
     "signature on most of its tests: the line above the table)"),
    ("skipped busy", "skipped_busy", "int", "tests not given to the backend: its queue was full"),
    ("cut off at the deadline", "cut_off", "int", "tests still in the stage at the deadline"),
    ("made for it", "made_for", "int", "tests generated to suit this backend (avoiding the ops "
     "it lacks)"),
)
#: why a run's cores table is short, by Run.summary_state
_CORE_STATES = {
    "none": f"no {SUMMARY_FILE}: no per-stage numbers.",
    "unreadable": f"{SUMMARY_FILE} could not be read.",
    "pre-scheduler": "the run predates the core scheduler: no shares or core-seconds.",
    "no-scheduler": "no core scheduler in this run (cores = 0): no shares or core-seconds.",
}


def _cell(v: float | None, fmt: str) -> str:
    if v is None:
        return '<span class="missing">–</span>'
    if fmt == "pct":
        return f"{v:.1%}"
    if fmt == "sec":
        return f"{v:,.1f}"
    if fmt == "rate":
        return f"{v:,.2f}"
    return f"{int(v):,}"


def _parts(parts: list[tuple[str, int]], n: int) -> str:
    """`loop 120, scan 80`: the first `n` (key, count), and how many more there are."""
    more = f", … {len(parts) - n} more" if len(parts) > n else ""
    return ", ".join(f"{k} {c:,}" for k, c in parts[:n]) + more


def _cores_table(run: Run) -> str:
    head = "<tr><th>stage</th>" + "".join(
        f'<th class=num title="{E(tip)}">{E(h)}</th>' for h, _, _, tip in _CORE_COLUMNS) + "</tr>"
    body = []
    for st in run.stages:
        row = f"<td>{E(st['stage'])}</td>"
        for _, key, fmt, _ in _CORE_COLUMNS:
            cell = _cell(st[key], fmt)
            parts = st.get(key + "_parts") or []
            if parts:
                cell = (f'<span title="{E(_parts(parts, 20))}">{cell}</span>'
                        + (f'<br><span class="parts">{E(_parts(parts, 2))}</span>'
                           if key == "not_applicable" else ""))
            row += f"<td class=num>{cell}</td>"
        body.append(f"<tr>{row}</tr>")
    return (f'<div class="tablewrap"><table class="cores" id="cores-{run.idx}"><thead>{head}'
            f"</thead><tbody>{''.join(body)}</tbody></table></div>")


def _cores_section(data: ReportData) -> str:
    parts = []
    for run in data.runs:
        facts = []
        if run.cores:
            facts.append(f"{run.cores} cores")
        if run.testing_s is not None:
            facts.append(f"testing {_fmt_dur(run.testing_s)}" + (
                f" of a {_fmt_dur(run.testing_deadline_s)} deadline"
                if run.testing_deadline_s is not None else " (a test budget, no deadline)"))
        note = _CORE_STATES.get(run.summary_state, "")
        line = "; ".join(facts + ([note] if note else []) + sorted(run.env_faults.values()))
        parts.append(f'<h3>{E(run.label)}</h3><p class="note">{E(line)}</p>'
                     + (_cores_table(run) if run.stages else ""))
    return ('<section id="s-cores"><h2>Where the cores went</h2><p class="note">'
            f"Per run, from its {SUMMARY_FILE}: per stage (generation, then each backend) its "
            "share of the cores, the core-seconds it used and their fraction of all stages', "
            "the tests it evaluated and tests per core-second, and the tests that got no row "
            "there: not applicable (ops the backend lacks; the top ops below, all on hover), "
            "held back as a known bug (buckets on hover), held back for an environment fault "
            "(the backend's fault is named above its run's table), skipped while the backend "
            "was busy, cut off at the deadline; and the tests made for the backend.</p>"
            + "".join(parts) + "</section>")


def _links(paths: Sequence[Path], out_dir: Path, text: str) -> str:
    return " ".join(_link(p, out_dir, text if len(paths) == 1 else f"{text} {i + 1}")
                    for i, p in enumerate(paths))


def _bucket_table(rows: list[dict], out_dir: Path, table_id: str, *, derived: bool) -> str:
    head = ("<tr><th>backend</th><th>verdict</th><th>stage</th><th>signature</th>"
            "<th class=num>rows</th>" + ("<th class=num>tests</th>" if derived else "") +
            "<th class=num>runs</th>" + ("" if derived else "<th>new in</th>") +
            "<th>first seen (UTC)</th><th>example tests</th>"
            "<th>artifacts</th><th>repro</th></tr>")
    body = []
    for b in rows:
        backend = b.get("backend") or ""
        if b.get("target") not in (None, "", "cpu"):
            backend += "@" + b["target"]
        verdict = b.get("verdict") or ""
        sig = b.get("signature") or ("" if derived else b.get("bucket") or "")
        # a bucket grouped into another's bug (one cause): the bug's id
        bug = (f"<br><span class=note>bug {E(b['bug'])}</span>"
               if b.get("bug") and b.get("bug") != b.get("bucket") else "")
        # a known bug written up in docs/findings: the note
        if b.get("finding"):
            bug += f"<br><span class=note>known: docs/findings/{E(b['finding'])}.md</span>"
        # no compiler bug (docs/triage.md): said in the row, never counted as one
        if b.get("unconfirmed_in"):
            bug += ("<br><span class=note>unconfirmed in "
                    f"{E(', '.join(b['unconfirmed_in']))}: its repro.py did not reproduce"
                    "</span>")
        if b.get("unchecked_in"):
            bug += ("<br><span class=note>not checked in "
                    f"{E(', '.join(b['unchecked_in']))}: its repro.py was not run (no triage "
                    "time left)</span>")
        if b.get("fixed_in"):
            bug += (f"<br><span class=note>fixed in {E(b['fixed_in'])}: its repro.py does not "
                    "reproduce there (a known bug)</span>")
        if b.get("environment"):
            bug += ("<br><span class=note>environment fault: not a compiler bug (the "
                    "campaign held the backend back)</span>")
        first = E(b.get("first_seen") or "")
        if derived and b.get("first_run"):
            first += f"<br><span class=note>{E(b['first_run'])} +{_fmt_dur(b['first_el'])}</span>"
        count = b.get("count")
        # the (reduced) compiler configuration the bucket's failure needs, when not the spec's
        config = (f"<br><span class=note>{E(b['config'])}</span>" if b.get("config") else "")
        row = (f"<td>{E(backend)}{config}</td>"
               f"<td><span class=\"v-{E(verdict)}\">{E(verdict)}</span></td>"
               f"<td>{E(b.get('stage') or '')}</td><td class=sig>{E(sig)}{bug}</td>"
               f"<td class=num>{'' if count is None else f'{int(count):,}'}</td>")
        if derived:
            row += f"<td class=num>{b['tests']:,}</td>"
        row += f"<td class=num>{b['n_runs']}</td>"
        if not derived:  # the runs whose triage found it new; empty: known before
            row += f"<td>{'<br>'.join(E(r) for r in b.get('new_in') or [])}</td>"
        row += (f"<td>{first}</td>"
                f"<td class=tid>{'<br>'.join(E(t) for t in b['examples'])}</td>"
                f"<td>{_links(b['artifacts'], out_dir, 'folder')}</td>"
                f"<td>{_links(b['repros'], out_dir, 'repro.py')}</td>")
        body.append(f"<tr>{row}</tr>")
    return (f'<input class="filter" data-table="{table_id}" placeholder="filter rows…">'
            f'<div class="tablewrap"><table id="{table_id}"><thead>{head}</thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


_COVERAGE_NOTE = (
    "Lines of each backend's compiler packages (Python; docs/coverage.md) that its measured "
    "tests ran: the union over time, and the new lines (cov_new) the tests of each mutator "
    "and each feature brought. Backends without packages (ORT, eager) are not measured. "
    "The curves: lines covered by time since the run started (the campaign's clock, t_s of "
    "coverage/growth.parquet), one panel per backend; several runs of a campaign give the "
    "median and a band from min to max over the runs that measured the backend and lasted "
    "that long.")
#: the coverage section's text when no run measured coverage
NO_COVERAGE = ("No compiler coverage data in these runs: no coverage/ folder and no measured "
               "rows (cov_new). Coverage was off (campaign.compiler_coverage.enabled), or the results "
               "predate it.")
#: ... when rows were measured but no run has a growth file to draw
NO_CURVES = ("No run has coverage growth (coverage/growth.parquet: a campaign writes it when it "
             "ends, so a run still going, or killed, has none): no curve.")
#: the runs left out of the curves, named after this
NOT_IN_CURVES = ("Runs without coverage growth (no readable coverage/growth.parquet, or an empty "
                 "one), not in the curves: ")


def _coverage_body(data: ReportData) -> str:
    """The coverage section below its figure: notes, the union at each run's end, and the new
    lines per mutator and per feature (or the line saying there is no coverage data)."""
    cov = data.coverage
    if cov.empty:
        return f'<p id="cov-none">{E(NO_COVERAGE)}</p>'
    labels = {r.idx: r.label for r in data.runs}
    parts = []
    if not cov.curves:
        parts.append(f'<p class="note">{E(NO_CURVES)}</p>')
    missing = [r.label for r in data.runs if r.idx not in cov.growth_runs]
    if cov.curves and missing:
        parts.append('<p class="note">' + E(NOT_IN_CURVES + ", ".join(missing)) + ".</p>")
    if cov.totals:
        rows = "".join(
            f"<tr><td>{E(labels.get(t['run'], '?'))}</td><td>{E(t['backend'])}</td>"
            f"<td class=num>{t['lines']:,}</td><td class=num>{t['files']:,}</td></tr>"
            for t in cov.totals)
        parts.append('<h3>Lines covered at the end of each run (coverage/union.parquet)</h3>'
                     '<div class="tablewrap"><table id="cov-totals"><thead><tr><th>run</th>'
                     "<th>backend</th><th class=num>lines</th><th class=num>files</th></tr>"
                     f"</thead><tbody>{rows}</tbody></table></div>")
    if cov.by_mutator:
        parts.append(
            "<h3>New compiler lines per mutator</h3><p class=\"note\">Per mutator the test "
            "applied itself (step_mutators; a test with several credits each in full, as the "
            "seed pool does; (none: generated) for generated graphs) and per backend: the sum "
            "of cov_new, the tests measured, and those that brought new lines. A line counts "
            "for the first measured test that ran it, so the first tests of a backend bring "
            "most of its lines.</p>" + _coverage_table(cov.by_mutator, cov.backends,
                                                       "mutator", "cov-mutators"))
        parts.append(
            "<h3>New compiler lines per dynamic feature</h3><p class=\"note\">The same per "
            "feature the test contains (as in the yield per dynamic feature; a test with "
            "several counts for each).</p>"
            + _coverage_table(cov.by_feature, cov.backends, "feature", "cov-features"))
    if cov.by_model:
        parts.append(
            "<h3>New compiler lines per seed model</h3><p class=\"note\">The same per model "
            "the test's root seed is a window of (seed_model; mutation.seeds naming models or "
            "their windows, docs/mutation.md).</p>"
            + _coverage_table(cov.by_model, cov.backends, "model", "cov-models"))
    return "".join(parts)


def _coverage_table(rows: list[dict], backends: list[str], what: str, table_id: str) -> str:
    """A group x backend table: per backend, new lines (sum of cov_new), tests measured and
    those with new lines; a group's rows in the order given."""
    cells: dict[tuple[str, str], dict] = {(r["name"], r["backend"]): r for r in rows}
    names = list(dict.fromkeys(r["name"] for r in rows))
    shown = [b for b in backends if any((n, b) in cells for n in names)]
    head = (f"<tr><th rowspan=2>{E(what)}</th>"
            + "".join(f"<th colspan=3 class=num>{E(b)}</th>" for b in shown)
            + "</tr><tr>" + "<th class=num>new lines</th><th class=num>measured</th>"
            "<th class=num>with new</th>" * len(shown) + "</tr>")
    body = []
    for n in names:
        row = f"<td>{E(n)}</td>"
        for b in shown:
            c = cells.get((n, b))
            row += (f"<td class=num>{_cell(None, 'int')}</td>" * 3 if c is None else
                    f"<td class=num>{c['lines']:,}</td><td class=num>{c['measured']:,}</td>"
                    f"<td class=num>{c['with_new']:,}</td>")
        body.append(f"<tr>{row}</tr>")
    return (f'<div class="tablewrap"><table id="{table_id}"><thead>{head}</thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def render(data: ReportData, out: Path, *, title: str | None = None,
           inputs: Sequence[Path] = ()) -> list[str]:
    """Write the page to `out`; return the ids of the plot divs it holds."""
    out = Path(out)
    out_dir = out.parent.resolve()
    campaigns = sorted({r.campaign for r in data.runs})
    title = title or "dynsmith campaign report: " + ", ".join(campaigns)
    n_find = sum(r.findings for r in data.runs)
    n_inv = sum(r.invalid for r in data.runs)
    total_s = sum(r.duration_s for r in data.runs)

    plots: list[tuple[str, str, str, str]] = []  # id, heading, note, html
    plot_ids: list[str] = []

    def add(div_id: str, heading: str, note: str, fig: go.Figure | None,
            extra: str = "") -> None:
        """A section `s-<div_id>`: its figure (none: `extra` alone) and `extra` below."""
        if fig is not None:
            plot_ids.append(div_id)
        plots.append((div_id, heading, note,
                      (_fig_html(fig, div_id) if fig is not None else "") + extra))

    add("fig-progress", "Tests over time and throughput",
        "Distinct tests finished since each run's first result, and tests per second in time "
        "bins (at most 60 per run).", figures.progress(data))
    add("fig-verdicts", "Verdict mix per backend",
        "Share of each backend's rows by verdict (hover for counts). "
        "docs/results-schema.md defines the verdicts.", figures.verdicts(data))
    multi = any(p["n_runs"] > 1 for p in data.bucket_curves)
    add("fig-buckets", "Unique buckets over time per backend",
        "Distinct (backend, target, verdict, stage, error signature) buckets among "
        + "/".join(FINDING_VERDICTS) + " rows, by time since the run's first result."
        + (" Several runs of a campaign: the line is the median, the band spans min to max, "
           "over the runs that lasted that long." if multi else ""),
        figures.buckets_over_time(data))
    add("fig-mutators", "Yield per mutator",
        "Tests whose lineage applied each mutator (a test with several counts for each); "
        "a finding is a mismatch/crash/signal/timeout row on any backend.",
        figures.yield_bars(data.mutator_yield))
    if data.model_yield:
        add("fig-models", "Yield per seed model",
            "Tests whose root seed is a window of each model (seed_model: its lineage's "
            "root, through every mutant of a mutant); a finding is a mismatch/crash/signal/"
            "timeout row on any backend.", figures.yield_bars(data.model_yield))
    absent = data.absent_features
    feat_note = ("Columns " + ", ".join(c for lbl, cols in FEATURES if lbl in absent for c in cols)
                 + " are in none of these results: " + ", ".join(absent) + " not shown."
                 if absent else None)
    add("fig-features", "Yield per dynamic feature",
        "Tests containing each feature (If: n_if, Loop: n_loop, Scan: n_scan, RNN: n_rnn, "
        "In-place: n_inplace or n_view_writes > 0, Dynamic shapes: dyn_dims not empty); a test "
        "with several counts for each.",
        figures.yield_bars(data.feature_yield, feat_note))
    cov = data.coverage
    add("fig-coverage", "Compiler coverage", _COVERAGE_NOTE,
        figures.coverage_over_time(data) if cov.curves else None, _coverage_body(data))
    ops_note = f"{len(data.op_coverage)} distinct ops in these tests"
    if data.registered_ops is None:
        ops_note += " (the op registry could not be imported: ops never generated are not listed)."
    else:
        seen_ops = {r["op"] for r in data.op_coverage}
        never = [o for o in data.registered_ops if o not in seen_ops]
        ops_note += (f"; {len(never)} of the {len(data.registered_ops)} registered ops were never "
                     "generated (marked x)." if never else
                     f"; all {len(data.registered_ops)} registered ops were generated.")
    add("fig-ops", "Operator coverage", ops_note + " Bar colour: share of the tests containing "
        "the op that had a finding.", figures.op_coverage(data))

    sections = []
    for div_id, heading, note, body in plots:
        sections.append(f'<section id="s-{div_id}"><h2>{E(heading)}</h2>'
                        f'<p class="note">{E(note)}</p>{body}</section>')
    tables = []
    if data.bugs:
        tables.append(
            '<section id="s-bugs"><h2>Buckets (triage bugs table)</h2><p class="note">'
            f"From the bugs tables of {sum(r.has_bugs_table for r in data.runs)} run(s); "
            f"{len(data.bugs)} buckets shown (merged across runs)"
            + (f"; their finding buckets are {data.n_finding_bugs} bugs (causes: buckets "
               "grouped by the triage, docs/triage.md)" if data.n_finding_bugs is not None
               else "")
            + (f" ({data.n_unconfirmed_bugs} more unconfirmed: their repro.py did not "
               "reproduce)" if data.n_unconfirmed_bugs else "")
            + (f" ({data.n_env_buckets} buckets of environment faults: not compiler bugs)"
               if data.n_env_buckets else "")
            + f", findings first, then by count; {sum(bool(b.get('new_in')) for b in data.bugs)}"
            " of them new (not known to the triage's bug database or earlier tables, and not "
            "unconfirmed: <i>new in</i> names the runs).</p>"
            + _bucket_table(data.bugs, out_dir, "bugs-table", derived=False) + "</section>")
    if data.buckets or not data.bugs:
        shown = len(data.buckets)
        more = (f" Showing the {shown} largest of {data.n_buckets_total}."
                if data.n_buckets_total > shown else "")
        src = (" (runs without a bugs table)" if data.bugs else "")
        tables.append(
            '<section id="s-buckets"><h2>Buckets derived from result rows' + src + "</h2>"
            '<p class="note">Rows with verdict ' + "/".join(FINDING_VERDICTS) + "/invalid "
            "grouped by (backend, target, verdict, stage, error_sig); findings first, then by "
            "row count. Links are relative to this file: the finding folders (graph.gir, "
            f"model.onnx, inputs.npz, info.json) and their repro.py where one exists.{more}</p>"
            + (_bucket_table(data.buckets, out_dir, "bucket-table", derived=True)
               if data.buckets else "<p>No findings and no invalid results.</p>")
            + "</section>")
    # the bucket tables read best right after the buckets-over-time plot
    body = "".join(sections[:3]) + "".join(tables) + "".join(sections[3:])
    links = [(f"s-{i}", h) for i, h, _, _ in plots]
    links.insert(3, ("s-bugs" if data.bugs else "s-buckets", "Buckets"))
    links.insert(0, ("s-cores", "Where the cores went"))
    nav = "".join(f'<a href="#{i}">{E(h)}</a>' for i, h in links)
    cards = [("campaigns", len(campaigns)), ("runs", len(data.runs)),
             ("tests", f"{data.n_tests:,}"), ("result rows", f"{data.n_rows:,}"),
             ("run time (sum)", _fmt_dur(total_s)), ("finding rows", f"{n_find:,}"),
             ("finding buckets", f"{data.n_finding_buckets:,}"), ("invalid rows", f"{n_inv:,}")]
    if data.n_finding_bugs is not None:  # the triage grouped the buckets into bugs (causes)
        cards.insert(-1, ("finding bugs (triage)", f"{data.n_finding_bugs:,}"))
        if data.n_unconfirmed_bugs:  # apart: a harness failure is never a compiler bug
            cards.insert(-1, ("unconfirmed (repro did not reproduce)",
                              f"{data.n_unconfirmed_bugs:,}"))
    cards_html = "".join(f'<div class="card"><div class="v">{v}</div><div class="k">{E(k)}</div>'
                         "</div>" for k, v in cards)
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{E(title)}</title>
<style>{CSS}</style>
<script type="text/javascript">/* plotly.js {plotly.__version__} (bundled plotly.py) */
{plotly.offline.get_plotlyjs()}</script>
</head><body>
<header><h1>{E(title)}</h1>
<div class="sub">generated {generated} from {E(", ".join(str(i) for i in inputs))}
 · dynsmith report · plotly {plotly.__version__}</div></header>
<main>
<div class="cards">{cards_html}</div>
<nav>{nav}</nav>
<section id="s-runs"><h2>Runs</h2>{_runs_table(data, out_dir)}</section>
{_cores_section(data)}
{body}
</main>
<script>{FILTER_JS}</script>
</body></html>
"""
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return plot_ids

