"""The report's compiler-coverage section (campaign/report: `CoverageData`, the coverage figure
and tables): the curves' median and min-max band and the new lines per mutator and per feature
against the same coverage files and rows counted with pyarrow and Python; a resumed run; runs
without coverage data, old or damaged, rendering a section that says so.
"""
from __future__ import annotations

import datetime as dt
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.compiler_coverage_log import CampaignCoverage
from campaign.report import build_report
from campaign.report.data import FEATURES, NO_MUTATOR, load
from campaign.report.page import NO_COVERAGE, NO_CURVES, NOT_IN_CURVES
from campaign.report.synthetic import COVERAGE_WARMUP_S, write_run

BACKENDS = ("ort", "tvm", "inductor")
T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.timezone.utc)
INPLACE = {"n_inplace": pa.int32(), "n_view_writes": pa.int32()}
#: the testing time run 0's summary.json gives: longer than its results span
RUN0_TESTING_S = 400.0


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three runs of one campaign of different lengths, 60% of the tvm and inductor tests
    measured; run 0 has a summary.json whose testing time ends its curves."""
    root = tmp_path_factory.mktemp("cov") / "camp"
    dirs = []
    for k, dur in enumerate((300.0, 240.0, 180.0)):
        d = root / f"run{k}"
        write_run(d, campaign="camp", n_tests=300, backends=BACKENDS, seed=40 + k,
                  start=T0 + dt.timedelta(hours=k), duration_s=dur, coverage_rate=0.6,
                  op_names=("add", "if", "loop", "scan", "lstm", "add_", "relu"),
                  extra_columns=INPLACE)
        dirs.append(d)
    (dirs[0] / "summary.json").write_text(json.dumps({"testing_s": RUN0_TESTING_S}))
    return {"root": root, "dirs": dirs, "data": load([root], op_registry=False)}


def _rows(d: Path) -> list[dict]:
    return pq.read_table(d / "results").to_pylist()


def _run_end(d: Path) -> float:
    """A run's end on the campaign clock, as the report takes it: summary.json's testing time,
    else its results' span; never before its last growth row."""
    rows = _rows(d)
    t0 = min(r["ts"] for r in rows)
    span = max((r["ts"] - t0).total_seconds() for r in rows)
    summary = d / "summary.json"
    end = json.loads(summary.read_text())["testing_s"] if summary.is_file() else span
    growth = pq.read_table(d / "coverage" / "growth.parquet").to_pylist()
    return max([end] + [g["t_s"] for g in growth])


def test_curves_are_median_and_band_over_the_runs(three_runs):
    cov = three_runs["data"].coverage
    dirs = three_runs["dirs"]
    growth = {k: pq.read_table(d / "coverage" / "growth.parquet").to_pylist()
              for k, d in enumerate(dirs)}
    ends = {k: _run_end(d) for k, d in enumerate(dirs)}
    assert ends[0] == RUN0_TESTING_S
    assert cov.backends == ["inductor", "tvm"]  # ORT is not measured
    assert cov.growth_runs == [0, 1, 2]
    grid = [RUN0_TESTING_S * i / 100 for i in range(101)]
    for backend in ("inductor", "tvm"):
        pts = [p for p in cov.curves if p["backend"] == backend]
        assert [p["t"] for p in pts] == pytest.approx(grid)
        for p in pts:
            values = [max([g["lines"] for g in growth[k]
                           if g["backend"] == backend and g["t_s"] <= p["t"]], default=0)
                      for k in growth if ends[k] >= p["t"] - 1e-9]
            assert (p["n_runs"], p["lo"], p["hi"]) == (len(values), min(values), max(values))
            assert p["med"] == pytest.approx(statistics.median(values))
        # every run is in the band up to the shortest run's end, run 0 alone after the others'
        assert [p["n_runs"] for p in pts].count(3) == sum(t <= ends[2] + 1e-9 for t in grid)
        assert pts[-1]["n_runs"] == 1
        # the last point: run 0's whole union
        assert pts[-1]["med"] == len([1 for g in _union(dirs[0]) if g["backend"] == backend])
        assert pts[0]["hi"] == 0  # nothing covered before the first result (the warm-up)
    first_t = min(g["t_s"] for g in growth[0])
    assert first_t >= COVERAGE_WARMUP_S


def _union(d: Path) -> list[dict]:
    return pq.read_table(d / "coverage" / "union.parquet").to_pylist()


def test_totals_are_the_unions_and_the_sum_of_cov_new(three_runs):
    cov = three_runs["data"].coverage
    want = []
    for k, d in enumerate(three_runs["dirs"]):
        union = _union(d)
        rows = _rows(d)
        for b in ("inductor", "tvm"):
            lines = [u for u in union if u["backend"] == b]
            # the union is what the measured rows brought
            assert len(lines) == sum(r["cov_new"] or 0 for r in rows if r["backend"] == b)
            want.append({"run": k, "backend": b, "lines": len(lines),
                         "files": len({u["file"] for u in lines})})
    assert cov.totals == want


def _expected_by(dirs: list[Path], groups) -> dict[tuple[str, str], list[int]]:
    """(group, backend) -> [measured, with new, lines] from the rows, `groups(row)` naming
    the groups a row's test is credited to."""
    want: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for d in dirs:
        for r in _rows(d):
            if r["cov_new"] is None:
                continue
            for g in groups(r):
                w = want[(g, r["backend"])]
                w[0] += 1
                w[1] += r["cov_new"] > 0
                w[2] += r["cov_new"]
    return dict(want)


def test_new_lines_per_mutator_credit_each_mutator_the_test_applied(three_runs):
    cov = three_runs["data"].coverage
    want = _expected_by(three_runs["dirs"],
                        lambda r: sorted(set(r["step_mutators"])) or [NO_MUTATOR])
    got = {(r["name"], r["backend"]): [r["measured"], r["with_new"], r["lines"]]
           for r in cov.by_mutator}
    assert got == want
    # a test of two mutators counts for both: the groups' measured tests exceed the tests
    measured = sum(r["cov_new"] is not None for d in three_runs["dirs"] for r in _rows(d))
    assert sum(r["measured"] for r in cov.by_mutator) > measured
    # the step's mutators, not the whole chain's
    chain = _expected_by(three_runs["dirs"], lambda r: sorted(set(r["mutators"])) or [NO_MUTATOR])
    assert chain != want
    # most new lines first (summed over the backends)
    totals = [sum(r["lines"] for r in cov.by_mutator if r["name"] == n)
              for n in dict.fromkeys(r["name"] for r in cov.by_mutator)]
    assert totals == sorted(totals, reverse=True)


def test_new_lines_per_feature(three_runs):
    cov = three_runs["data"].coverage
    cols = dict(FEATURES)

    def features(r: dict) -> list[str]:
        has = [lbl for lbl, cs in cols.items() if any(r.get(c) for c in cs)]
        return has or ["none (static)"]

    want = _expected_by(three_runs["dirs"], features)
    got = {(r["name"], r["backend"]): [r["measured"], r["with_new"], r["lines"]]
           for r in cov.by_feature}
    assert got == want
    assert {n for n, _ in got} == {"If", "Loop", "Scan", "RNN", "In-place", "Dynamic shapes",
                                   "Gradients", "Transforms", "none (static)"}
    order = [lbl for lbl, _ in FEATURES] + ["none (static)"]
    assert [order.index(r["name"]) for r in cov.by_feature] == sorted(
        order.index(r["name"]) for r in cov.by_feature)


def test_page_draws_the_curves_and_tables(three_runs, tmp_path):
    out = tmp_path / "r.html"
    res = build_report([three_runs["root"]], out, op_registry=False)
    assert "fig-coverage" in res.plot_ids
    page = out.read_text()
    section = page[page.index('id="s-fig-coverage"'):page.index('id="s-fig-ops"')]
    for table in ("cov-totals", "cov-mutators", "cov-features"):
        assert f'id="{table}"' in section
    assert NO_COVERAGE not in section and NO_CURVES not in section
    assert NOT_IN_CURVES not in section
    # the union of run 0 for tvm, as its totals row shows it
    n = len([1 for u in _union(three_runs["dirs"][0]) if u["backend"] == "tvm"])
    assert f"<td>camp/run0</td><td>tvm</td><td class=num>{n:,}</td>" in section
    assert "median of the runs, band min–max (up to 3 runs)" in page
    assert '"text":"tvm (3 runs)"' in page and '"text":"inductor (3 runs)"' in page


def test_a_resumed_runs_curve_starts_from_what_the_earlier_run_left(tmp_path):
    """`campaign.resume=true` loads the union and its growth, then appends with t_s from 0
    again: the curve is the last run's, starting at the earlier union's size."""
    d = tmp_path / "c" / "run"
    write_run(d, campaign="c", n_tests=60, backends=("tvm",), seed=7, start=T0,
              duration_s=100.0, coverage_rate=1.0)
    cc = CampaignCoverage.load(d / "coverage")
    before = cc.totals()["tvm"]
    assert cc.add("tvm", "resumed-1", {"tvm/new.py": frozenset({1, 2, 3})}, 10.0) == 3
    assert cc.add("tvm", "resumed-2", {"tvm/new.py": frozenset({4})}, 20.0) == 1
    cc.write(d / "coverage")
    cov = load([tmp_path / "c"], op_registry=False).coverage
    pts = [p for p in cov.curves if p["backend"] == "tvm"]
    at = {round(p["t"], 6): p["med"] for p in pts}
    assert pts[0]["med"] == before  # t = 0: what the earlier run left
    assert all(v == before for t, v in at.items() if t < 10.0)
    assert all(v == before + 3 for t, v in at.items() if 10.0 <= t < 20.0)
    assert all(v == before + 4 for t, v in at.items() if t >= 20.0)
    assert pts[-1]["med"] == before + 4 == cov.totals[0]["lines"]


def test_runs_without_coverage_render_a_section_that_says_so(tmp_path):
    d = tmp_path / "c" / "run"
    write_run(d, campaign="c", n_tests=40, backends=("ort", "tvm"), seed=8, start=T0)
    out = tmp_path / "r.html"
    res = build_report([tmp_path / "c"], out, op_registry=False)
    assert res.data.coverage.empty and res.data.coverage.backends == []
    assert "fig-coverage" not in res.plot_ids
    page = out.read_text()
    assert ('<section id="s-fig-coverage"><h2>Compiler coverage</h2>' in page
            and f'<p id="cov-none">{NO_COVERAGE}</p>' in page)
    # coverage files that hold nothing (a campaign whose measured backends ran no test)
    CampaignCoverage().write(d / "coverage")
    res = build_report([tmp_path / "c"], out, op_registry=False)
    assert res.data.coverage.empty and res.data.coverage.growth_runs == []
    assert f'<p id="cov-none">{NO_COVERAGE}</p>' in out.read_text()
    # results from before coverage: no cov_new nor step_mutators column at all
    f = next((d / "results").glob("part-*.parquet"))
    pq.write_table(pq.read_table(f).drop_columns(["cov_new", "step_mutators"]), f)
    data = load([tmp_path / "c"], op_registry=False)
    assert "cov_new" not in data.columns and data.coverage.empty
    build_report([tmp_path / "c"], out, op_registry=False)
    assert f'<p id="cov-none">{NO_COVERAGE}</p>' in out.read_text()


def test_a_run_without_a_growth_file_is_left_out_of_the_curves(tmp_path):
    """One run with coverage, one without (coverage off), one whose growth file is damaged:
    the curves are the first run's alone, and the page names the others."""
    dirs = []
    for k, rate in enumerate((0.5, 0.0, 0.5)):
        d = tmp_path / "c" / f"run{k}"
        write_run(d, campaign="c", n_tests=80, backends=("ort", "tvm"), seed=20 + k,
                  start=T0 + dt.timedelta(hours=k), coverage_rate=rate)
        dirs.append(d)
    (dirs[2] / "coverage" / "growth.parquet").write_bytes(b"not parquet")
    out = tmp_path / "r.html"
    res = build_report([tmp_path / "c"], out, op_registry=False)
    cov = res.data.coverage
    assert cov.growth_runs == [0]
    assert {p["n_runs"] for p in cov.curves} == {1}
    assert [t["run"] for t in cov.totals] == [0, 2]  # run 2's union is readable
    page = out.read_text()
    assert NOT_IN_CURVES + "c/run1, c/run2." in page
    # run 2's rows still count in the tables
    want = _expected_by([dirs[0], dirs[2]], lambda r: sorted(set(r["step_mutators"]))
                        or [NO_MUTATOR])
    assert {(r["name"], r["backend"]): [r["measured"], r["with_new"], r["lines"]]
            for r in cov.by_mutator} == want


def test_measured_rows_without_any_growth_file_say_there_is_no_curve(tmp_path):
    """A run killed before the end has cov_new in its rows but no coverage/ folder: the tables,
    and a line saying there is no curve."""
    import shutil

    d = tmp_path / "c" / "run"
    write_run(d, campaign="c", n_tests=60, backends=("tvm",), seed=9, start=T0,
              coverage_rate=1.0)
    shutil.rmtree(d / "coverage")
    out = tmp_path / "r.html"
    res = build_report([tmp_path / "c"], out, op_registry=False)
    cov = res.data.coverage
    assert not cov.empty and cov.curves == [] and cov.totals == [] and cov.backends == ["tvm"]
    assert "fig-coverage" not in res.plot_ids
    page = out.read_text()
    assert f'<p class="note">{NO_CURVES}</p>' in page and 'id="cov-mutators"' in page
    # a signal's or timeout's row lost its lines (cov_new None): it adds none
    assert sum(r["lines"] for r in cov.by_mutator if r["name"] == NO_MUTATOR) == sum(
        r["cov_new"] or 0 for r in _rows(d) if not r["step_mutators"])
