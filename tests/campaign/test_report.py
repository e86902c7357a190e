"""The campaign report (campaign/report): its numbers against pyarrow's own count of the same
Parquet rows, missing columns, bugs tables, links, the entry points, and the page as headless
Chromium draws it (plots present, console clean, no request leaving the file, 10k rows in < 10 s).
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.report import ReportError, build_report
from campaign.report.browser import check_page, why_unavailable
from campaign.report.cli import main as report_main
from campaign.report.data import FINDING_VERDICTS, load
from campaign.report.synthetic import write_run

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ("ort", "tvm", "inductor")
PLOT_IDS = ["fig-progress", "fig-verdicts", "fig-buckets", "fig-mutators", "fig-features",
            "fig-coverage", "fig-ops"]
#: the plots of runs without compiler coverage (its section says so instead)
PLOT_IDS_NO_COVERAGE = [i for i in PLOT_IDS if i != "fig-coverage"]
INPLACE = {"n_inplace": pa.int32(), "n_view_writes": pa.int32()}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """Two runs of one campaign, 10,200 rows: run A through ResultSink with today's schema, run B
    with the in-place columns and a triage bugs table; both measure compiler coverage of half
    their tests (tests/campaign/test_report_coverage.py checks its numbers). The report is
    built once."""
    root = tmp_path_factory.mktemp("report") / "runs"
    import datetime as dt
    t0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    a = root / "camp" / "20260101-120000"
    b = root / "camp" / "20260101-130000"
    n = write_run(a, campaign="camp", n_tests=1700, backends=BACKENDS, seed=1, start=t0,
                  duration_s=900, coverage_rate=0.5)
    n += write_run(b, campaign="camp", n_tests=1700, backends=BACKENDS, seed=2,
                   start=t0 + dt.timedelta(hours=1), duration_s=700, extra_columns=INPLACE,
                   bugs_table=True, coverage_rate=0.5)
    out = root / "report.html"
    res = build_report([root], out)
    return {"root": root, "a": a, "b": b, "rows": n, "out": out, "res": res}


def _tables(c) -> dict[str, pa.Table]:
    return {k: pq.read_table(c[k] / "results") for k in ("a", "b")}


def test_counts_agree_with_pyarrow(campaign):
    data = campaign["res"].data
    tabs = _tables(campaign)
    assert data.n_rows == campaign["rows"] == sum(t.num_rows for t in tabs.values()) >= 10_000
    rows = [r for t in tabs.values() for r in t.to_pylist()]
    assert data.n_tests == len({(r["run_id"], r["test_id"]) for r in rows})
    assert [r.label for r in data.runs] == ["camp/20260101-120000", "camp/20260101-130000"]

    verdicts = Counter((r["backend"], r["verdict"]) for r in rows)
    assert {(v["backend"], v["verdict"]): v["n"] for v in data.verdicts} == dict(verdicts)

    keys = {(r["backend"], r["target"], r["verdict"], r["stage"] or "", r["error_sig"] or "")
            for r in rows if r["verdict"] in FINDING_VERDICTS}
    assert data.n_finding_buckets == len(keys)

    # tests finished over time: the running total ends at each run's test count
    for run in data.runs:
        last = [p for p in data.progress if p["run"] == run.idx][-1]
        assert last["cum"] == run.tests == 1700

    # yield per mutator, per test (a test's rows share its graph)
    tests: dict[tuple, dict] = {}
    for r in rows:
        t = tests.setdefault((r["run_id"], r["test_id"]), {**r, "hit": False, "inv": False})
        t["hit"] |= r["verdict"] in FINDING_VERDICTS
        t["inv"] |= r["verdict"] == "invalid"
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for t in tests.values():
        for m in sorted(set(t["mutators"])) or ["(none: generated)"]:
            want[m][0] += 1
            want[m][1] += t["hit"]
            want[m][2] += t["inv"]
    assert {m["name"]: [m["tests"], m["hits"], m["invalid"]] for m in data.mutator_yield} == want

    # yield per feature: In-place only where the columns exist (run B)
    feats = {f["name"]: f for f in data.feature_yield}
    assert list(feats) == ["If", "Loop", "Scan", "RNN", "In-place", "Dynamic shapes",
                           "Gradients", "Transforms", "none (static)"]
    assert data.absent_features == []
    assert feats["If"]["tests"] == sum(t["n_if"] > 0 for t in tests.values())
    assert feats["In-place"]["tests"] == sum(
        (t.get("n_inplace") or 0) > 0 or (t.get("n_view_writes") or 0) > 0
        for t in tests.values()) > 0
    assert feats["RNN"]["hits"] == sum(t["hit"] for t in tests.values() if t["n_rnn"] > 0)
    assert feats["Dynamic shapes"]["tests"] == sum(bool(t["dyn_dims"])
                                                   for t in tests.values()) > 0
    assert feats["Gradients"]["tests"] == sum(t["grad_leaves"] > 0 for t in tests.values()) > 0

    # operator coverage: tests containing each op
    ops = Counter(op for t in tests.values() for op in set(t["ops"]))
    assert {o["op"]: o["tests"] for o in data.op_coverage} == dict(ops)


def test_bucket_curves_are_median_and_range_over_the_runs(campaign):
    data = campaign["res"].data
    tabs = _tables(campaign)
    first: dict[tuple[str, str], dict] = defaultdict(dict)  # (run, backend) -> bucket -> el
    dur = {}
    for k, t in tabs.items():
        rows = t.to_pylist()
        t0 = min(r["ts"] for r in rows)
        dur[k] = max((r["ts"] - t0).total_seconds() for r in rows)
        for r in rows:
            if r["verdict"] in FINDING_VERDICTS:
                b = (r["verdict"], r["stage"], r["error_sig"])
                el = (r["ts"] - t0).total_seconds()
                first[(k, r["backend"])][b] = min(el, first[(k, r["backend"])].get(b, el))
    assert {p["backend"] for p in data.bucket_curves} == set(BACKENDS)
    checked_both = 0
    for p in data.bucket_curves:
        runs = [k for k in tabs if dur[k] >= p["t"] - 1e-6]
        counts = [sum(el <= p["t"] + 1e-9 for el in first[(k, p["backend"])].values())
                  for k in runs]
        assert p["n_runs"] == len(counts)
        assert (p["lo"], p["hi"]) == (min(counts), max(counts))
        assert p["med"] == pytest.approx(statistics.median(counts))
        checked_both += len(counts) == 2
    assert checked_both > 100  # most of the grid is covered by both runs


def test_bugs_table_is_used_where_a_run_has_one(campaign):
    data = campaign["res"].data
    a, b = data.runs
    assert (a.has_bugs_table, b.has_bugs_table) == (False, True)
    table = pq.read_table(campaign["b"] / "bugs.parquet").to_pylist()
    assert len(data.bugs) == len(table) < 500
    assert {lbl for x in data.bugs for lbl in x["run_labels"]} == {b.label}
    assert {x["bucket"]: x["count"] for x in data.bugs} == {x["bucket"]: x["count"] for x in table}
    # findings first, then by count
    order = [(x["verdict"] == "invalid", -x["count"]) for x in data.bugs]
    assert order == sorted(order)
    # derived buckets come from run A only
    assert data.buckets and all(x["n_runs"] == 1 for x in data.buckets)
    assert all(e.startswith(a.run_ids[0]) for x in data.buckets for e in x["examples"])
    html = campaign["out"].read_text()
    assert 'id="bugs-table"' in html and 'id="bucket-table"' in html


def test_page_is_self_contained_and_its_links_resolve(campaign):
    out = campaign["out"]
    html = out.read_text()
    assert re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=", html) == []
    assert html.count("<script") == 1 + len(PLOT_IDS) + 1  # plotly.js, one per plot, filter
    for i in PLOT_IDS:
        assert f'id="{i}"' in html
    # the page's own links (plotly.js, inlined in the first script, holds some in its strings)
    own = html[html.index("</script>"):]
    hrefs = [unquote(h) for h in re.findall(r'<a href="([^"#][^"]*)"', own)]
    folders = [h for h in hrefs if "/findings/" in h and not h.endswith(".py")]
    repros = [h for h in hrefs if h.endswith("repro.py")]
    assert folders and repros
    for h in hrefs:
        assert (out.parent / h).exists(), h
    assert all((out.parent / h / "info.json").is_file() for h in folders)


def test_absent_columns_leave_their_feature_out(tmp_path):
    run = tmp_path / "old" / "run1"
    write_run(run, campaign="old", n_tests=60, backends=("ort",), seed=3, repro_scripts=False)
    f = next((run / "results").glob("part-*.parquet"))
    t = pq.read_table(f)
    # an older schema: no n_scan (nor, of course, the in-place columns)
    t = t.drop_columns([c for c in ("n_scan", "n_inplace", "n_view_writes") if c in t.column_names])
    pq.write_table(t, f)
    data = load([tmp_path / "old"])
    assert data.absent_features == ["Scan", "In-place"]
    assert [x["name"] for x in data.feature_yield] == ["If", "Loop", "RNN", "Dynamic shapes",
                                                       "Gradients", "Transforms", "none (static)"]
    out = tmp_path / "r.html"
    res = build_report([tmp_path / "old"], out)
    # no compiler coverage: its section says so, without a plot
    assert res.plot_ids == PLOT_IDS_NO_COVERAGE
    assert "n_scan, n_inplace, n_view_writes are in none of these results" in out.read_text()


def test_entry_points(tmp_path, capsys):
    run = tmp_path / "runs" / "c" / "t1"
    write_run(run, campaign="c", n_tests=30, backends=("ort",), seed=4)
    assert report_main([str(tmp_path / "runs"), "--no-op-registry"]) == 0
    assert (tmp_path / "runs" / "report.html").is_file()
    assert "wrote" in capsys.readouterr().out
    # no results: an error, exit 2
    (tmp_path / "empty").mkdir()
    assert report_main([str(tmp_path / "empty")]) == 2
    assert "no results" in capsys.readouterr().err
    with pytest.raises(ReportError):
        load([tmp_path / "empty"])
    # python run.py report (dispatched before Hydra) and python -m campaign.report
    for cmd, out in ((["run.py", "report"], "a.html"), (["-m", "campaign.report"], "b.html")):
        p = subprocess.run([sys.executable, *cmd, str(run), "-o", str(tmp_path / out),
                            "--no-op-registry"], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        assert (tmp_path / out).is_file() and "1 run(s), 30 tests" in p.stdout


def test_renders_in_headless_chromium(campaign):
    reason = why_unavailable()
    if reason:
        if os.environ.get("DYNSMITH_REQUIRE_BROWSER"):
            pytest.fail(f"DYNSMITH_REQUIRE_BROWSER is set but {reason}")
        pytest.skip(reason)
    res = campaign["res"]
    chk = check_page(res.out, len(res.plot_ids))
    assert chk.plot_ids == PLOT_IDS and chk.n_plots == len(PLOT_IDS)
    assert chk.n_plot_svgs >= len(PLOT_IDS) and chk.n_traces >= 20
    assert chk.problems == []
    assert chk.external_requests == []
    # how long it takes is bench/report.py's to measure (a timed assertion on a shared 2-core
    # machine fails by load, not by a fault)


def test_bugs_tables_of_several_runs_merge_per_bucket(tmp_path):
    import datetime as dt
    tables = []
    for k in range(2):
        start = dt.datetime(2026, 2, 1, 10 + k, tzinfo=dt.timezone.utc)
        d = tmp_path / "c" / f"t{k}"
        write_run(d, campaign="c", n_tests=400, backends=("ort",), seed=10 + k, start=start,
                  bugs_table=True, n_signatures=3)
        tables.append(pq.read_table(d / "bugs.parquet").to_pylist())
    data = load([tmp_path / "c"], op_registry=False)
    want: dict[str, list] = {}
    for t in tables:
        for x in t:
            w = want.setdefault(x["bucket"], [0, 0, x["first_seen"]])
            w[0] += x["count"]
            w[1] += 1
            w[2] = min(w[2], x["first_seen"])
    got = {x["bucket"]: [x["count"], x["n_runs"], x["first_seen"]] for x in data.bugs}
    assert got == {k: [c, n, f"{fs:%Y-%m-%d %H:%M:%S}"] for k, (c, n, fs) in want.items()}
    assert any(n == 2 for _, n, _ in got.values())
    assert data.buckets == []  # every run has a bugs table: nothing derived


def test_a_bug_buckets_configuration_shows_beside_its_backend(tmp_path):
    """The triage keys a bucket on its reduced compiler configuration (bugs-table column
    `backend_config`): the page shows it under the backend; tables without it still load."""
    d = tmp_path / "c" / "t0"
    write_run(d, campaign="c", n_tests=200, backends=("ort",), seed=3, bugs_table=True,
              n_signatures=2)
    t = pq.read_table(d / "bugs.parquet")
    configs = ["disabled_optimizers=ConstantFolding&threads=2"] + [""] * (t.num_rows - 1)
    pq.write_table(t.append_column("backend_config", pa.array(configs, pa.string())),
                   d / "bugs.parquet")
    res = build_report([tmp_path / "c"], tmp_path / "report.html", op_registry=False)
    assert sorted(x["config"] for x in res.data.bugs) == sorted(configs)
    html = (tmp_path / "report.html").read_text()
    assert ("<br><span class=note>disabled_optimizers=ConstantFolding&amp;threads=2</span></td>"
            in html)
    assert html.count("<span class=note>disabled_optimizers") == 1


def test_the_page_says_which_buckets_were_new_in_which_run(tmp_path):
    """The triage's `new` column (not in `triage.known` or the bug database then): a bucket
    the second run's triage knew from the first is new only in the first."""
    import datetime as dt
    for k in range(2):
        d = tmp_path / "c" / f"t{k}"
        write_run(d, campaign="c", n_tests=200, backends=("ort",), seed=5,
                  start=dt.datetime(2026, 3, 1, 10 + k, tzinfo=dt.timezone.utc),
                  bugs_table=True, n_signatures=2)
        t = pq.read_table(d / "bugs.parquet")
        pq.write_table(t.append_column("new", pa.array([k == 0] * t.num_rows)),
                       d / "bugs.parquet")
    res = build_report([tmp_path / "c"], tmp_path / "report.html", op_registry=False)
    labels = [r.label for r in res.data.runs]
    assert res.data.bugs and all(x["new_in"] == [labels[0]] for x in res.data.bugs
                                 if x["n_runs"] == 2)
    html = (tmp_path / "report.html").read_text()
    assert "<th>new in</th>" in html
    assert f"{len(res.data.bugs)} of them new" in html


def test_unconfirmed_bugs_and_environment_faults_are_shown_apart_never_counted(tmp_path):
    """A harness failure is never a compiler bug (docs/triage.md): a bucket the triage found
    `unconfirmed` (its repro.py did not reproduce) or `environment` is not new, not among the
    finding bugs of the headline; it is counted apart and its row says what it is."""
    d = tmp_path / "c" / "t0"
    write_run(d, campaign="c", n_tests=300, backends=("ort",), seed=7, bugs_table=True,
              n_signatures=3)
    t = pq.read_table(d / "bugs.parquet")
    findings = [i for i, v in enumerate(t.column("verdict").to_pylist())
                if v in FINDING_VERDICTS]
    assert len(findings) >= 3
    status = ["new"] * t.num_rows
    status[findings[0]], status[findings[1]] = "unconfirmed", "environment"
    t = t.append_column("new", pa.array([True] * t.num_rows))
    pq.write_table(t.append_column("status", pa.array(status)), d / "bugs.parquet")
    res = build_report([tmp_path / "c"], tmp_path / "report.html", op_registry=False)
    data = res.data
    assert data.n_finding_bugs == len(findings) - 2
    assert (data.n_unconfirmed_bugs, data.n_env_buckets) == (1, 1)
    by = {x["bucket"]: x for x in data.bugs}
    names = t.column("bucket").to_pylist()
    doubtful, env = by[names[findings[0]]], by[names[findings[1]]]
    assert doubtful["new_in"] == [] and doubtful["unconfirmed_in"] == [data.runs[0].label]
    assert env["new_in"] == [] and env["environment"]
    assert by[names[findings[2]]]["new_in"] == [data.runs[0].label]
    html = (tmp_path / "report.html").read_text()
    assert html.count(": its repro.py did not reproduce</span>") == 1
    assert html.count("environment fault: not a compiler bug") == 1
    assert "(1 more unconfirmed: their repro.py did not reproduce)" in html
    assert ('<div class="v">1</div><div class="k">unconfirmed (repro did not reproduce)</div>'
            in html)
    assert (f'<div class="v">{len(findings) - 2}</div><div class="k">finding bugs (triage)'
            in html)


def _cores_rows(html: str, run_idx: int) -> list[list[str]]:
    """The cells of a run's "Where the cores went" table, tags stripped (title attributes kept
    out), one list per stage."""
    m = re.search(rf'<table class="cores" id="cores-{run_idx}">.*?<tbody>(.*?)</tbody>', html,
                  re.S)
    assert m, f"no cores table for run {run_idx}"
    return [[re.sub(r"<br>", " | ", re.sub(r"<(?!br>)[^>]*>", "", c))
             for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", m.group(1), re.S)]


def test_where_the_cores_went(tmp_path):
    """A run with the core scheduler's summary.json fields: one row per stage with its share,
    core-seconds, fraction, tests, tests per core-second and the counts of tests with no row."""
    import html as _html
    import json

    run = tmp_path / "c" / "t1"
    write_run(run, campaign="c", n_tests=40, backends=("ort", "tvm"), seed=5,
              op_names=("add", "loop", "scan"))
    summary = {
        "campaign": "c", "tests": 40, "cores": 8, "testing_s": 590.5, "testing_deadline_s": 600.0,
        "generation": {"share": 0.2, "core_s": 1200.0, "core_frac": 0.25, "calls": 17,
                       "cut_off": 3},
        "backends": {
            "ort": {"target": "cpu", "evaluated": 1500, "share": 0.5, "core_s": 2400.0,
                    "skipped_busy": 7, "not_applicable": {"scan": 80, "loop": 120, "if": 5},
                    "made_for": 11, "held_known": {"ort|crash|<sig>": 9, "ort|mismatch|x": 4},
                    "cut_off": 2, "calls": 90},
            "tvm@cuda": {"target": "cuda", "evaluated": 800, "share": 0.3, "core_s": 1200.0,
                         "skipped_busy": 0, "not_applicable": {}, "made_for": 0,
                         "held_known": {}, "held_env": 12, "cut_off": 0},
        },
        "env_faults": {"tvm@cuda": "environment fault: tvm@cuda held back (no more tests): 9 "
                                   "of its 10 tests in 4 s failed with crash during compile: E"},
    }
    (run / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "r.html"
    res = build_report([tmp_path / "c"], out, op_registry=False)
    (r,) = res.data.runs
    assert (r.summary_state, r.cores, r.testing_s, r.testing_deadline_s) == (
        "scheduler", 8, 590.5, 600.0)
    gen, ort, tvm = r.stages
    assert [s["stage"] for s in r.stages] == ["generate", "ort", "tvm@cuda"]
    # fractions of the 4,800 core-seconds used; tests per core-second
    assert (gen["core_frac"], ort["core_frac"], tvm["core_frac"]) == (0.25, 0.5, 0.25)
    assert ort["per_core_s"] == 1500 / 2400 and gen["per_core_s"] == 40 / 1200
    assert ort["not_applicable"] == 205 and ort["not_applicable_parts"][:2] == [
        ("loop", 120), ("scan", 80)]
    assert ort["held_known"] == 13

    page = out.read_text()
    assert 'href="#s-cores"' in page and "<h2>Where the cores went</h2>" in page
    assert "8 cores; testing 9.8 min of a 10.0 min deadline" in page
    for h in ("share", "core-s", "% of core-s", "tests", "tests/core-s", "not applicable",
              "held back (known bug)", "held back (environment fault)", "skipped busy",
              "cut off at the deadline", "made for it"):
        assert f">{_html.escape(h)}</th>" in page, h
    dash = "–"
    assert _cores_rows(page, 0) == [
        ["generate", "20.0%", "1,200.0", "25.0%", "40", "0.03", dash, dash, dash, dash, "3",
         dash],
        ["ort", "50.0%", "2,400.0", "50.0%", "1,500", "0.62",
         "205 | loop 120, scan 80, … 1 more", "13", dash, "7", "2", "11"],
        ["tvm@cuda", "30.0%", "1,200.0", "25.0%", "800", "0.67", "0", "0", "12", "0", "0", "0"],
    ]
    assert ("8 cores; testing 9.8 min of a 10.0 min deadline; environment fault: tvm@cuda held "
            "back (no more tests): 9 of its 10 tests in 4 s failed with crash during compile: E"
            in page)
    # the tooltips: every op and bucket, HTML escaped
    assert 'title="loop 120, scan 80, if 5">205</span>' in page
    assert 'title="ort|crash|&lt;sig&gt; 9, ort|mismatch|x 4">13</span>' in page
    assert "<sig>" not in page
    assert res.plot_ids == PLOT_IDS_NO_COVERAGE


def test_where_the_cores_went_without_the_scheduler_fields(tmp_path):
    """A summary.json from before the scheduler gives the counts it has, with a note; a run
    without summary.json, or with cores = 0, says so."""
    import json

    old, none, nosched = (tmp_path / "c" / n for n in ("t1", "t2", "t3"))
    for k, d in enumerate((old, none, nosched)):
        write_run(d, campaign="c", n_tests=20, backends=("ort",), seed=20 + k,
                  op_names=("add", "mul"))
    (old / "summary.json").write_text(json.dumps({
        "campaign": "c", "tests": 20, "generation_calls": 4,
        "backends": {"ort": {"target": "cpu", "actors": 1, "evaluated": 20, "skipped_busy": 2,
                             "calls": 5}}}))
    (nosched / "summary.json").write_text(json.dumps({
        "tests": 20, "cores": 0, "testing_s": 12.0, "testing_deadline_s": None,
        "generation": {"calls": 4, "cut_off": 0},
        "backends": {"ort": {"evaluated": 20, "skipped_busy": 0, "share": None, "core_s": None,
                             "not_applicable": {"mul": 3}, "made_for": 0, "held_known": {},
                             "cut_off": 0}}}))
    out = tmp_path / "r.html"
    res = build_report([tmp_path / "c"], out, op_registry=False)
    states = {r.dir.name: r.summary_state for r in res.data.runs}
    assert states == {"t1": "pre-scheduler", "t2": "none", "t3": "no-scheduler"}
    page = out.read_text()
    assert "the run predates the core scheduler: no shares or core-seconds." in page
    assert "no summary.json: no per-stage numbers." in page
    assert ("testing 12.0 s (a test budget, no deadline); no core scheduler in this run "
            "(cores = 0): no shares or core-seconds.") in page
    idx = {r.dir.name: r.idx for r in res.data.runs}
    dash = "–"
    assert _cores_rows(page, idx["t1"]) == [
        ["generate", dash, dash, dash, "20", dash, dash, dash, dash, dash, dash, dash],
        ["ort", dash, dash, dash, "20", dash, dash, dash, dash, "2", dash, dash]]
    assert _cores_rows(page, idx["t3"])[1] == [
        "ort", dash, dash, dash, "20", dash, "3 | mul 3", "0", dash, "0", "0", "0"]
    assert f'id="cores-{idx["t2"]}"' not in page


def test_a_bug_not_checked_and_one_fixed_in_a_newer_release_say_so(tmp_path):
    """The summary's "not checked" (its repro.py written, never run) and "fixed in" (a newer
    release's run did not reproduce it: known upstream) show in the bucket's row too."""
    d = tmp_path / "c" / "t0"
    write_run(d, campaign="c", n_tests=300, backends=("ort",), seed=7, bugs_table=True,
              n_signatures=3)
    t = pq.read_table(d / "bugs.parquet")
    findings = [i for i, v in enumerate(t.column("verdict").to_pylist())
                if v in FINDING_VERDICTS]
    status, fixed = ["new"] * t.num_rows, [None] * t.num_rows
    repro, repro_status = [f"bugs/b{i}/repro.py" for i in range(t.num_rows)], ["reproduced"] * t.num_rows
    repro_status[findings[0]] = None
    status[findings[1]], fixed[findings[1]] = "known-upstream", "torch 2.14.1+cu130"
    for name, col in (("new", [True] * t.num_rows), ("status", status), ("fixed_in", fixed),
                      ("repro_status", repro_status)):
        t = t.append_column(name, pa.array(col, pa.bool_() if name == "new" else pa.string()))
    t = t.set_column(t.schema.get_field_index("repro"), "repro", pa.array(repro)) \
        if "repro" in t.schema.names else t.append_column("repro", pa.array(repro))
    pq.write_table(t, d / "bugs.parquet")
    res = build_report([tmp_path / "c"], tmp_path / "report.html", op_registry=False)
    by = {x["bucket"]: x for x in res.data.bugs}
    names = t.column("bucket").to_pylist()
    assert by[names[findings[0]]]["unchecked_in"] == [res.data.runs[0].label]
    assert by[names[findings[1]]]["fixed_in"] == "torch 2.14.1+cu130"
    assert by[names[findings[2]]]["unchecked_in"] == [] and not by[names[findings[2]]]["fixed_in"]
    html = (tmp_path / "report.html").read_text()
    assert html.count(": its repro.py was not run (no triage time left)</span>") == 1
    assert ("fixed in torch 2.14.1+cu130: its repro.py does not reproduce there (a known bug)"
            in html)
