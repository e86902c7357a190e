"""Everything the report shows, queried with DuckDB from the campaigns' Parquet datasets.

A *run* is one output dir (`runs/<campaign>/<time>/`, the parent of a `results/` folder); several
runs of one campaign are repeated trials and give the bands of the buckets-over-time plot. Time is
elapsed seconds since the first result of the run, so runs started at different times overlay.

Files of different schema versions are read by column name (`union_by_name`): a column absent
from some files is null there, a column absent from all of them (`n_inplace` before in-place ops
landed) leaves its feature out with a note, never an error.

A run's `summary.json` (campaign/driver/summary.py's `Summary`), where there is one, gives the per-stage
core accounting of the core scheduler (generation and each backend: share, core-seconds, tests
evaluated, tests not applicable, held back, skipped, cut off); older summaries lack those fields
and give what they have.

Compiler coverage (docs/coverage.md), where a run measured it: the union's growth from
`<run>/coverage/growth.parquet` (time there is seconds since the campaign started, `t_s`), its
final size per file from `coverage/union.parquet`, and each row's `cov_new` (new compiler lines
the test added for that backend) summed per mutator the test applied itself and per feature.

Buckets come from the triage `bugs` table of a run (`<run>/bugs.parquet` or
`<run>/bugs/*.parquet`) where there is one; otherwise they are derived from the rows by
(backend, target, verdict, stage, error_sig), the same key triage uses for crashes.
"""
from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

RESULTS_DIR = "results"
#: the run summary the driver writes beside results/
SUMMARY_FILE = "summary.json"
#: the generation stage's name in summary.json (campaign/driver/stages.py `GEN`)
GEN_STAGE = "generate"
#: verdicts that are compiler findings (docs/results-schema.md "counts as")
FINDING_VERDICTS = ("mismatch", "crash", "signal", "timeout")
#: verdicts whose buckets the table lists: findings, and our own bugs
TABLE_VERDICTS = FINDING_VERDICTS + ("invalid",)
#: dynamic features: label -> count columns (a test has the feature when any is > 0)
FEATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("If", ("n_if",)),
    ("Loop", ("n_loop",)),
    ("Scan", ("n_scan",)),
    ("RNN", ("n_rnn",)),
    ("In-place", ("n_inplace", "n_view_writes")),
    ("Dynamic shapes", ("dyn_dims",)),
    ("Gradients", ("grad_leaves",)),
    ("Transforms", ("transform",)),
)
#: feature columns that are lists (a test has the feature when the list is not empty)
LIST_FEATURE_COLUMNS = ("dyn_dims",)
#: feature columns that are strings (a test has the feature when the string is not empty)
STRING_FEATURE_COLUMNS = ("transform",)
#: where a run keeps its compiler coverage (campaign/driver/results.py `COVERAGE_DIR`)
COVERAGE_DIR = "coverage"
#: the union's growth (campaign/compiler_coverage_log.py) and the union, in COVERAGE_DIR
GROWTH_FILE = "growth.parquet"
UNION_FILE = "union.parquet"
#: the group of tests that applied no mutator (generated graphs)
NO_MUTATOR = "(none: generated)"
#: where a run keeps its triage table
BUGS_GLOBS = ("bugs.parquet", "bugs/*.parquet")
#: bugs-table columns, by role, under the names the triage table may give them (first found wins)
BUG_COLUMNS: dict[str, tuple[str, ...]] = {
    "bucket": ("bucket", "bucket_id", "bucket_key", "key"),
    #: the bug (cause) the bucket belongs to: its group's representative bucket
    #: (campaign/triage/pipeline/grouping.py); tables from before grouping: the bucket itself
    "bug": ("bug",),
    "first_seen": ("first_seen", "first_seen_ts", "first_ts", "ts"),
    "count": ("count", "n", "n_rows", "hits", "n_findings"),
    "examples": ("example_test_ids", "examples", "test_ids", "example_tests"),
    "artifact": ("artifact_path", "artifact_dir", "bucket_dir", "path", "dir", "finding_dir"),
    "repro": ("repro", "repro_path", "repro_py"),
    "backend": ("backend",),
    #: the bucket's (reduced) compiler configuration, '' the backend spec's own
    "config": ("backend_config",),
    "target": ("target",),
    "verdict": ("verdict",),
    "stage": ("stage",),
    "signature": ("error_sig", "signature", "sig", "pattern"),
    #: not in `triage.known` / the bug database when the run was triaged (docs/triage.md)
    "new": ("new",),
    #: the finding note (docs/findings) the bucket is a known bug of
    "finding": ("finding",),
    #: what the bucket is to the bug database: `unconfirmed` (its repro.py did not reproduce)
    #: and `environment` (an environment fault's rows) are no compiler bugs (docs/triage.md)
    "status": ("status",),
    #: how its repro.py fared (null: not run, no time left) and the newer release that fixed
    #: it (a known bug: `known-upstream`)
    "repro_status": ("repro_status",),
    "fixed_in": ("fixed_in",),
}
#: bugs-table statuses that are no compiler bugs: shown apart, never counted as bugs
NOT_BUGS = ("unconfirmed", "environment")

# columns read from the results (type used when a column is absent from every file)
_WANTED = {
    "campaign": "VARCHAR", "run_id": "VARCHAR", "test_id": "VARCHAR", "mutators": "VARCHAR[]",
    "ops": "VARCHAR[]", "backend": "VARCHAR", "target": "VARCHAR", "verdict": "VARCHAR",
    "stage": "VARCHAR", "error_class": "VARCHAR", "error_sig": "VARCHAR",
    "finding_dir": "VARCHAR", "ts": "TIMESTAMPTZ", "step_mutators": "VARCHAR[]",
    "cov_new": "INTEGER", "seed_model": "VARCHAR",
    **{c: "VARCHAR[]" if c in LIST_FEATURE_COLUMNS else
       "VARCHAR" if c in STRING_FEATURE_COLUMNS else "INTEGER"
       for _, cols in FEATURES for c in cols},
}


class ReportError(Exception):
    """Nothing to report (no results under the given dirs) or unreadable input."""


def _sql_str(s: str) -> str:
    return "'" + str(s).replace("'", "''") + "'"


def _sql_tuple(items: Sequence[str]) -> str:
    return "(" + ", ".join(_sql_str(i) for i in items) + ")"


def _sql_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(_sql_str(i) for i in items) + "]"


def _parquet_files(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("*.parquet") if not p.name.startswith((".", "_")))


def discover_runs(dirs: Sequence[Path]) -> list[Path]:
    """Run dirs under `dirs`: each given dir that holds `results/*.parquet` itself, else every
    such dir below it (a campaign folder, or `runs/`). Sorted, without duplicates."""
    found: list[Path] = []
    for d in dirs:
        d = Path(d)
        if not d.exists():
            raise ReportError(f"{d}: no such directory")
        if _parquet_files(d / RESULTS_DIR):
            found.append(d.resolve())
            continue
        for res in sorted(d.rglob(RESULTS_DIR)):
            if res.is_dir() and _parquet_files(res) and "findings" not in res.relative_to(d).parts:
                found.append(res.parent.resolve())
    uniq = sorted(set(found))
    if not uniq:
        raise ReportError("no results/*.parquet under " + ", ".join(str(d) for d in dirs))
    return uniq


@dataclass
class Run:
    idx: int
    dir: Path
    label: str
    campaign: str = ""
    run_ids: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    tests: int = 0
    rows: int = 0
    start_ms: float = 0.0
    duration_s: float = 0.0
    findings: int = 0
    invalid: int = 0
    has_bugs_table: bool = False
    #: what summary.json says about the cores: "none" (no summary.json), "unreadable",
    #: "pre-scheduler" (a summary without the scheduler's fields), "no-scheduler" (cores = 0),
    #: "scheduler"
    summary_state: str = "none"
    cores: int | None = None
    testing_s: float | None = None
    testing_deadline_s: float | None = None
    #: one row per stage (generation first, then the backends): see `core_stages`
    stages: list[dict] = field(default_factory=list)
    #: summary.json's environment faults: per backend held back, its one line
    env_faults: dict[str, str] = field(default_factory=dict)


@dataclass
class CoverageData:
    """The runs' compiler coverage, ready to plot: the union's growth per backend over campaign
    time, its final size per run, and the new lines (`cov_new`) per mutator and per feature."""
    #: campaign, backend, t (seconds since the run started), med, lo, hi, n_runs: lines covered
    #: by time t, median / min / max over the campaign's runs that measured the backend and
    #: lasted until t (101 grid points per campaign)
    curves: list[dict] = field(default_factory=list)
    #: run, backend, lines, files: the union at the end of each run (`union.parquet`)
    totals: list[dict] = field(default_factory=list)
    #: name, backend, measured (tests with a `cov_new`), with_new (of them > 0), lines (sum)
    by_mutator: list[dict] = field(default_factory=list)
    by_feature: list[dict] = field(default_factory=list)
    #: the same per model the test's root seed is a window of (`seed_model`; docs/mutation.md)
    by_model: list[dict] = field(default_factory=list)
    #: backends with a measured test or a growth curve, in label order
    backends: list[str] = field(default_factory=list)
    #: runs (idx) that have coverage/growth.parquet
    growth_runs: list[int] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """No run measured compiler coverage (coverage off, or results from before it)."""
        return not self.curves and not self.by_mutator and not self.totals


@dataclass
class ReportData:
    """Query results, ready to plot (plain Python lists and dicts)."""
    runs: list[Run]
    n_rows: int
    n_tests: int
    columns: set[str]
    absent_features: list[str]  # feature labels whose columns are in no file
    progress: list[dict]  # run, t, width, n, cum  (tests per time bin)
    verdicts: list[dict]  # campaign, backend, verdict, n
    bucket_curves: list[dict]  # campaign, backend, t, med, lo, hi, n_runs
    mutator_yield: list[dict]  # name, tests, hits, invalid, buckets
    feature_yield: list[dict]  # name, tests, hits, invalid, buckets
    op_coverage: list[dict]  # op, tests, hits
    registered_ops: list[str] | None  # the op registry, when importable
    buckets: list[dict]  # derived from rows (runs without a bugs table)
    bugs: list[dict]  # from bugs tables
    n_buckets_total: int  # distinct buckets of the derived table (before its row limit)
    n_finding_buckets: int = 0  # distinct finding buckets over all runs
    #: distinct bugs (causes) of the bugs tables' finding buckets (`bug`, else the bucket),
    #: but those no run's triage found to be more than unconfirmed or an environment fault
    #: (`NOT_BUGS`); None without a bugs table
    n_finding_bugs: int | None = None
    #: of the rest: distinct unconfirmed bugs, and distinct environment-fault buckets
    n_unconfirmed_bugs: int = 0
    n_env_buckets: int = 0
    #: compiler coverage (docs/coverage.md); all empty when no run measured it
    coverage: CoverageData = field(default_factory=CoverageData)
    #: name, tests, hits, invalid, buckets per model the tests' seeds came from (`seed_model`;
    #: empty when no test came from a model's window)
    model_yield: list[dict] = field(default_factory=list)
    query_s: float = 0.0


class _Db:
    def __init__(self) -> None:
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")  # timestamps print in UTC whatever the host's

    def q(self, sql: str) -> list[dict]:
        cur = self.con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def x(self, sql: str) -> None:
        self.con.execute(sql)


def _present_columns(db: _Db, files: list[str]) -> dict[str, str]:
    rows = db.q(f"DESCRIBE SELECT * FROM read_parquet({_sql_list(files)}, union_by_name=true)")
    return {r["column_name"]: r["column_type"] for r in rows}


def load(dirs: Sequence[Path], *, max_buckets: int = 500, op_registry: bool = True) -> ReportData:
    import time

    t0 = time.perf_counter()
    run_dirs = discover_runs(dirs)
    db = _Db()
    files: list[str] = []
    file_run: list[tuple[str, int]] = []
    for i, rd in enumerate(run_dirs):
        for f in _parquet_files(rd / RESULTS_DIR):
            files.append(str(f))
            file_run.append((str(f), i))
    present = _present_columns(db, files)
    missing_required = [c for c in ("test_id", "backend", "verdict", "ts") if c not in present]
    if missing_required:
        raise ReportError(f"results lack column(s) {missing_required}: not a dynsmith dataset?")
    db.x("CREATE TABLE files (filename VARCHAR, run INTEGER)")
    db.con.executemany("INSERT INTO files VALUES (?, ?)", file_run)
    sel = []
    for c, typ in _WANTED.items():
        sel.append(f"p.{c}" if c in present else f"CAST(NULL AS {typ}) AS {c}")
    db.x(f"""
        CREATE TABLE raw AS
        SELECT {", ".join(sel)}, f.run
        FROM read_parquet({_sql_list(files)}, union_by_name=true, filename=true,
                          hive_partitioning=false) p
        JOIN files f USING (filename)""")
    fv = _sql_list(FINDING_VERDICTS)
    # r: one row per result; el = seconds since the run's first result; bucket = triage key
    db.x(f"""
        CREATE TABLE r AS
        SELECT *,
          (epoch_ms(ts) - min(epoch_ms(ts)) OVER (PARTITION BY run)) / 1000.0 AS el,
          CASE WHEN coalesce(target, 'cpu') = 'cpu' THEN backend
               ELSE backend || '@' || target END AS blabel,
          concat_ws(' | ', backend, coalesce(target, ''), verdict, coalesce(stage, ''),
                    coalesce(error_sig, '')) AS bucket,
          verdict IN {fv} AS is_finding
        FROM raw""")
    # t: one row per test (a test's backend rows share its graph columns)
    feat_cols = [c for _, cols in FEATURES for c in cols]
    db.x(f"""
        CREATE TABLE t AS
        SELECT run, test_id, any_value(campaign) AS campaign, min(el) AS el,
          any_value(mutators) AS mutators, any_value(step_mutators) AS step_mutators,
          any_value(ops) AS ops, any_value(seed_model) AS seed_model,
          {", ".join(f"max({c}) AS {c}" for c in feat_cols)},
          bool_or(is_finding) AS hit, bool_or(verdict = 'invalid') AS inv
        FROM r GROUP BY run, test_id""")

    n_rows = db.q("SELECT count(*) AS n FROM r")[0]["n"]
    n_tests = db.q("SELECT count(*) AS n FROM t")[0]["n"]
    if n_rows == 0:
        raise ReportError("the results hold no rows")

    runs = _runs(db, run_dirs)
    for run in runs:
        _load_summary(run)
    absent = [lbl for lbl, cols in FEATURES if not any(c in present for c in cols)]
    data = ReportData(
        runs=runs, n_rows=n_rows, n_tests=n_tests, columns=set(present), absent_features=absent,
        progress=_progress(db), verdicts=_verdicts(db), bucket_curves=_bucket_curves(db),
        mutator_yield=_mutator_yield(db), feature_yield=_feature_yield(db, present),
        op_coverage=_op_coverage(db), registered_ops=_registered_ops() if op_registry else None,
        buckets=[], bugs=[], n_buckets_total=0,
    )
    data.n_finding_buckets = db.q(
        "SELECT count(DISTINCT bucket) AS n FROM r WHERE is_finding")[0]["n"]
    bug_runs = _load_bugs(db, runs)
    data.bugs = _bugs_rows(db, runs, max_buckets) if bug_runs else []
    if bug_runs:
        _count_bugs(db, data)
    data.buckets, data.n_buckets_total = _derived_buckets(db, runs, bug_runs, max_buckets)
    data.coverage = _coverage(db, runs, present)
    data.model_yield = _yield(db, _MODEL_GROUPS)
    data.query_s = time.perf_counter() - t0
    return data


def _runs(db: _Db, run_dirs: list[Path]) -> list[Run]:
    rows = db.q("""
        SELECT run, any_value(campaign) AS campaign,
          list(DISTINCT run_id ORDER BY run_id) AS run_ids,
          list(DISTINCT blabel ORDER BY blabel) AS backends, count(DISTINCT test_id) AS tests,
          count(*) AS rows, min(epoch_ms(ts)) AS start_ms, max(el) AS dur,
          count(*) FILTER (WHERE is_finding) AS findings,
          count(*) FILTER (WHERE verdict = 'invalid') AS invalid
        FROM r GROUP BY run ORDER BY run""")
    by_idx = {r["run"]: r for r in rows}
    runs = []
    seen: dict[str, int] = {}
    for i, d in enumerate(run_dirs):
        r = by_idx.get(i)
        if r is None:
            continue
        label = f"{r['campaign'] or '?'}/{d.name}"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label += f"#{seen[label]}"
        runs.append(Run(
            idx=i, dir=d, label=label, campaign=r["campaign"] or "", run_ids=r["run_ids"],
            backends=r["backends"], tests=r["tests"], rows=r["rows"], start_ms=r["start_ms"],
            duration_s=float(r["dur"] or 0.0), findings=r["findings"], invalid=r["invalid"]))
    return runs


def _num(v: object) -> float | None:
    """A finite number from summary.json, else None (null, absent, a string, a bool)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _int(v: object) -> int | None:
    n = _num(v)
    return None if n is None else int(n)


def _tally(v: object) -> tuple[int | None, list[tuple[str, int]]]:
    """A count summary.json gives as an int or as {key: int}: the total and the parts, largest
    first (None: absent)."""
    if isinstance(v, dict):
        parts = [(str(k), n) for k, n in ((k, _int(x)) for k, x in v.items()) if n is not None]
        parts.sort(key=lambda kv: (-kv[1], kv[0]))
        return sum(n for _, n in parts), parts
    return _int(v), []


def core_stages(summary: dict) -> list[dict]:
    """Per stage of a run's summary.json (generation, then each backend in the summary's order):
    stage, share (normalized 0..1), core_s, core_frac (of the core-seconds of all stages),
    evaluated (generation: the run's tests), per_core_s (evaluated per core-second), calls,
    not_applicable / held_known (totals, and `*_parts` as (op or bucket, n), largest first),
    held_env (tests not given to a backend held back for an environment fault), skipped_busy,
    cut_off, made_for. A field the summary lacks is None."""
    gen = summary.get("generation")
    gen = gen if isinstance(gen, dict) else {}
    backends = summary.get("backends")
    backends = backends if isinstance(backends, dict) else {}
    raw = [(GEN_STAGE, gen, True)] + [(str(b), s if isinstance(s, dict) else {}, False)
                                      for b, s in backends.items()]
    stages: list[dict[str, Any]] = []
    for name, s, is_gen in raw:
        na, na_parts = _tally(s.get("not_applicable"))
        held, held_parts = _tally(s.get("held_known"))
        held_env, _ = _tally(s.get("held_env"))
        calls = s.get("calls", summary.get("generation_calls") if is_gen else None)
        stages.append({
            "stage": name, "generation": is_gen, "share": _num(s.get("share")),
            "core_s": _num(s.get("core_s")), "core_frac": _num(s.get("core_frac")),
            "evaluated": _int(summary.get("tests") if is_gen else s.get("evaluated")),
            "calls": _int(calls), "not_applicable": na, "not_applicable_parts": na_parts,
            "held_known": held, "held_known_parts": held_parts, "held_env": held_env,
            "skipped_busy": _int(s.get("skipped_busy")), "cut_off": _int(s.get("cut_off")),
            "made_for": _int(s.get("made_for")),
        })
    used = sum(s["core_s"] for s in stages if s["core_s"] is not None)
    for s in stages:
        if s["core_s"] is not None and used > 0:
            s["core_frac"] = s["core_s"] / used
        s["per_core_s"] = (s["evaluated"] / s["core_s"]
                           if s["evaluated"] is not None and s["core_s"] else None)
    return stages


def _load_summary(run: Run) -> None:
    """Fill the run's core fields from its summary.json (left as they are without one)."""
    import json

    path = run.dir / SUMMARY_FILE
    if not path.is_file():
        return
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        run.summary_state = "unreadable"
        return
    if not isinstance(summary, dict):
        run.summary_state = "unreadable"
        return
    run.stages = core_stages(summary)
    run.cores = _int(summary.get("cores"))
    run.testing_s = _num(summary.get("testing_s"))
    run.testing_deadline_s = _num(summary.get("testing_deadline_s"))
    faults = summary.get("env_faults")
    run.env_faults = ({str(b): str(v) for b, v in faults.items()}
                      if isinstance(faults, dict) else {})
    keys = ("share", "core_s")
    if run.cores or any(s[k] is not None for s in run.stages for k in keys):
        run.summary_state = "scheduler"
    elif run.cores == 0:
        run.summary_state = "no-scheduler"
    else:
        run.summary_state = "pre-scheduler"


def _progress(db: _Db) -> list[dict]:
    """Tests finished per time bin (1 s or longer, at most 60 per run), with the running total."""
    return db.q("""
        WITH span AS (
          SELECT run, max(el) AS dur FROM t GROUP BY run),
        nb AS (
          SELECT run, dur, CAST(least(60, greatest(1, ceil(dur))) AS INTEGER) AS nbins FROM span),
        bins AS (
          SELECT run, dur, nbins, b.i AS bin
          FROM nb, LATERAL (SELECT * FROM range(0, nbins) r(i)) b),
        cnt AS (
          SELECT t.run,
            least(CAST(floor(t.el / greatest(nb.dur, 1e-9) * nb.nbins) AS INTEGER), nb.nbins - 1)
              AS bin,
            count(*) AS n
          FROM t JOIN nb USING (run) GROUP BY ALL)
        SELECT bins.run, greatest(bins.dur, 1e-3) / bins.nbins AS width,
          (bins.bin + 1) * greatest(bins.dur, 1e-3) / bins.nbins AS t,
          coalesce(cnt.n, 0) AS n,
          sum(coalesce(cnt.n, 0)) OVER (PARTITION BY bins.run ORDER BY bins.bin) AS cum
        FROM bins LEFT JOIN cnt USING (run, bin)
        ORDER BY bins.run, bins.bin""")


def _verdicts(db: _Db) -> list[dict]:
    return db.q("""
        SELECT coalesce(campaign, '') AS campaign, blabel AS backend, verdict, count(*) AS n
        FROM r GROUP BY ALL ORDER BY campaign, backend, verdict""")


def _bucket_curves(db: _Db, points: int = 100) -> list[dict]:
    """Distinct finding buckets found by time t, per campaign x backend: median, min and max
    over the campaign's runs that lasted at least t (a single run gives its own curve)."""
    fv = _sql_list(FINDING_VERDICTS)
    return db.q(f"""
        WITH fb AS (
          SELECT run, blabel, bucket, min(el) AS el FROM r WHERE verdict IN {fv} GROUP BY ALL),
        dur AS (
          SELECT run, any_value(coalesce(campaign, '')) AS campaign, max(el) AS d
          FROM r GROUP BY run),
        grp AS (SELECT DISTINCT run, blabel FROM r),
        gmax AS (SELECT campaign, max(d) AS m FROM dur GROUP BY campaign),
        grid AS (
          SELECT campaign, m * i / {points}.0 AS t FROM gmax, range(0, {points + 1}) g(i)),
        pts AS (
          SELECT dur.campaign, grp.blabel, grp.run, grid.t,
            count(fb.bucket) AS n
          FROM grp JOIN dur USING (run) JOIN grid ON grid.campaign = dur.campaign
            AND grid.t <= dur.d + 1e-9
          LEFT JOIN fb ON fb.run = grp.run AND fb.blabel = grp.blabel AND fb.el <= grid.t
          GROUP BY ALL)
        SELECT campaign, blabel AS backend, t, median(n) AS med, min(n) AS lo, max(n) AS hi,
          count(*) AS n_runs
        FROM pts GROUP BY ALL ORDER BY campaign, backend, t""")


def _yield(db: _Db, source: str) -> list[dict]:
    """Per group `name` of tests (`source` selects run, test_id, name): tests, tests with a
    finding, tests with an invalid row, distinct finding buckets hit."""
    return db.q(f"""
        WITH g AS ({source}),
        tt AS (
          SELECT g.name, t.hit, t.inv FROM g JOIN t USING (run, test_id)),
        bb AS (
          SELECT g.name, count(DISTINCT r.bucket) AS buckets
          FROM g JOIN r USING (run, test_id) WHERE r.is_finding GROUP BY g.name)
        SELECT tt.name, count(*) AS tests, count(*) FILTER (WHERE hit) AS hits,
          count(*) FILTER (WHERE inv) AS invalid, coalesce(any_value(bb.buckets), 0) AS buckets
        FROM tt LEFT JOIN bb USING (name) GROUP BY tt.name ORDER BY tests DESC, tt.name""")


def _mutator_yield(db: _Db) -> list[dict]:
    return _yield(db, _mutator_groups("mutators"))


def _has_feature(col: str) -> str:
    """SQL: the test (table t) has the feature counted by `col`."""
    if col in LIST_FEATURE_COLUMNS:
        return f"len(coalesce({col}, [])) > 0"
    if col in STRING_FEATURE_COLUMNS:
        return f"coalesce({col}, '') <> ''"
    return f"coalesce({col}, 0) > 0"


def _feature_groups(present: dict[str, str]) -> tuple[str, list[str]]:
    """SQL selecting (run, test_id, name) of each test per feature it has (`none (static)`
    for none), and the names in order: the features whose columns exist, then `none (static)`."""
    parts, any_feature, order = [], [], []
    for label, cols in FEATURES:
        have = [c for c in cols if c in present]
        if not have:
            continue
        cond = " OR ".join(_has_feature(c) for c in have)
        any_feature.append(f"({cond})")
        parts.append(f"SELECT run, test_id, {_sql_str(label)} AS name FROM t WHERE {cond}")
        order.append(label)
    none = " OR ".join(any_feature) or "false"
    parts.append(f"SELECT run, test_id, 'none (static)' AS name FROM t WHERE NOT ({none})")
    return " UNION ALL ".join(parts), order + ["none (static)"]


def _mutator_groups(column: str) -> str:
    """SQL selecting (run, test_id, name) of each test per distinct mutator in its list
    `column` of table t (NO_MUTATOR for an empty list)."""
    return f"""
        SELECT run, test_id, unnest(CASE WHEN len(coalesce({column}, [])) = 0
                                         THEN [{_sql_str(NO_MUTATOR)}]
                                         ELSE list_distinct({column}) END) AS name
        FROM t"""


#: SQL selecting (run, test_id, name) of each test whose root seed is a model's window, name
#: the model (`seed_model`): what findings and coverage are credited to
_MODEL_GROUPS = "SELECT run, test_id, seed_model AS name FROM t WHERE coalesce(seed_model, '') <> ''"


def _feature_yield(db: _Db, present: dict[str, str]) -> list[dict]:
    source, order = _feature_groups(present)
    rows = {r["name"]: r for r in _yield(db, source)}
    # every feature whose columns exist gets a bar, even with no test
    return [rows.get(n, {"name": n, "tests": 0, "hits": 0, "invalid": 0, "buckets": 0})
            for n in order]


def _op_coverage(db: _Db) -> list[dict]:
    return db.q("""
        WITH o AS (SELECT unnest(list_distinct(ops)) AS op, hit FROM t)
        SELECT op, count(*) AS tests, count(*) FILTER (WHERE hit) AS hits
        FROM o GROUP BY op ORDER BY tests DESC, op""")


#: the columns a coverage file must have to be read (campaign/compiler_coverage_log.py's schemas)
_COVERAGE_COLUMNS = {GROWTH_FILE: ("backend", "t_s", "lines"), UNION_FILE: ("backend", "file")}


def _coverage(db: _Db, runs: list[Run], present: dict[str, str]) -> CoverageData:
    """The runs' compiler coverage: growth curves, final unions, `cov_new` per mutator (those
    the test applied itself, `step_mutators`, each credited in full, as the seed pool credits
    them) and per feature. Empty where no run measured any."""
    cov = CoverageData()
    cov.growth_runs = _load_coverage_file(db, runs, GROWTH_FILE, "growth")
    if cov.growth_runs:
        cov.curves = _coverage_curves(db, runs)
    if _load_coverage_file(db, runs, UNION_FILE, "cunion"):
        cov.totals = db.q("""
            SELECT run, backend, count(*) AS lines, count(DISTINCT file) AS files
            FROM cunion GROUP BY ALL ORDER BY run, backend""")
    if "cov_new" in present:
        by_mut = _coverage_by(db, _mutator_groups("step_mutators"))
        total: dict[str, int] = {}
        for row in by_mut:
            total[row["name"]] = total.get(row["name"], 0) + row["lines"]
        cov.by_mutator = sorted(by_mut, key=lambda r: (-total[r["name"]], r["name"],
                                                       r["backend"]))
        source, order = _feature_groups(present)
        cov.by_feature = sorted(_coverage_by(db, source),
                                key=lambda r: (order.index(r["name"]), r["backend"]))
        cov.by_model = sorted(_coverage_by(db, _MODEL_GROUPS),
                              key=lambda r: (r["name"], r["backend"]))
    cov.backends = sorted({p["backend"] for p in cov.curves} | {r["backend"] for r in cov.totals}
                          | {r["backend"] for r in cov.by_mutator})
    return cov


def _load_coverage_file(db: _Db, runs: list[Run], name: str, table: str) -> list[int]:
    """Load `coverage/<name>` of every run that has a readable one into `table` (run, backend
    labelled as in the rows, the file's columns, rn = row number in the file); return the runs
    it has rows of (an empty file: a run that measured nothing)."""
    need = _COVERAGE_COLUMNS[name]
    files: list[tuple[str, int]] = []
    for run in runs:
        path = run.dir / COVERAGE_DIR / name
        if not path.is_file():
            continue
        try:
            cols = _present_columns(db, [str(path)])
        except duckdb.Error:  # damaged: that run shows no coverage of this kind
            continue
        if all(c in cols for c in need):
            files.append((str(path), run.idx))
    if not files:
        return []
    db.x(f"CREATE TABLE {table}_files (filename VARCHAR, run INTEGER)")
    db.con.executemany(f"INSERT INTO {table}_files VALUES (?, ?)", files)
    rest = ", ".join(f"p.{c}" for c in need if c != "backend")
    db.x(f"""
        CREATE TABLE {table} AS
        SELECT f.run, coalesce(b.blabel, p.backend) AS backend, {rest},
          p.file_row_number AS rn
        FROM read_parquet({_sql_list([f for f, _ in files])}, union_by_name=true,
                          filename=true, file_row_number=true, hive_partitioning=false) p
        JOIN {table}_files f USING (filename)
        LEFT JOIN (SELECT run, backend, any_value(blabel) AS blabel FROM r GROUP BY ALL) b
          ON b.run = f.run AND b.backend = p.backend""")
    return sorted(r["run"] for r in db.q(f"SELECT DISTINCT run FROM {table}"))


def _coverage_curves(db: _Db, runs: list[Run], points: int = 100) -> list[dict]:
    """Lines covered by campaign time t, per campaign x backend: median, min and max over the
    campaign's runs whose growth has that backend and that lasted at least t. A run's end is
    its testing time from summary.json, else its span of results (never before its last
    growth row). A resumed run's growth.parquet holds the earlier runs' rows first (t_s
    restarts at 0): its curve is the last run's, starting from what the earlier ones left."""
    last_t = {r["run"]: r["t"] for r in db.q("SELECT run, max(t_s) AS t FROM growth GROUP BY run")}
    ends = [(run.idx, run.campaign, max(run.testing_s if run.testing_s is not None
                                        else run.duration_s, last_t[run.idx]))
            for run in runs if run.idx in last_t]
    if not ends:
        return []
    db.x("CREATE TABLE cov_end (run INTEGER, campaign VARCHAR, d DOUBLE)")
    db.con.executemany("INSERT INTO cov_end VALUES (?, ?, ?)", ends)
    return db.q(f"""
        WITH lagged AS (
          SELECT *, lag(t_s) OVER (PARTITION BY run, backend ORDER BY rn) AS prev FROM growth),
        seg AS (
          SELECT *, sum(CASE WHEN t_s < prev THEN 1 ELSE 0 END)
                      OVER (PARTITION BY run, backend ORDER BY rn) AS seg
          FROM lagged),
        last AS (SELECT run, backend, max(seg) AS seg FROM seg GROUP BY ALL),
        base AS (
          SELECT seg.run, seg.backend,
            coalesce(max(seg.lines) FILTER (WHERE seg.seg < last.seg), 0) AS base
          FROM seg JOIN last USING (run, backend) GROUP BY ALL),
        cur AS (
          SELECT seg.run, seg.backend, seg.t_s, seg.lines
          FROM seg JOIN last USING (run, backend) WHERE seg.seg = last.seg),
        gmax AS (SELECT campaign, max(d) AS m FROM cov_end GROUP BY campaign),
        grid AS (
          SELECT campaign, m * i / {points}.0 AS t FROM gmax, range(0, {points + 1}) g(i)),
        pts AS (
          SELECT e.campaign, base.backend, base.run, grid.t,
            greatest(any_value(base.base), coalesce(max(cur.lines), 0)) AS n
          FROM base JOIN cov_end e USING (run)
          JOIN grid ON grid.campaign = e.campaign AND grid.t <= e.d + 1e-9
          LEFT JOIN cur ON cur.run = base.run AND cur.backend = base.backend
            AND cur.t_s <= grid.t
          GROUP BY e.campaign, base.backend, base.run, grid.t)
        SELECT campaign, backend, t, median(n) AS med, min(n) AS lo, max(n) AS hi,
          count(*) AS n_runs
        FROM pts GROUP BY ALL ORDER BY campaign, backend, t""")


def _coverage_by(db: _Db, source: str) -> list[dict]:
    """Per group `name` of tests (`source` selects run, test_id, name) and backend: tests
    measured (a `cov_new`), those with new lines, and the sum of their new lines."""
    return db.q(f"""
        WITH g AS ({source})
        SELECT g.name, r.blabel AS backend, count(*) AS measured,
          count(*) FILTER (WHERE r.cov_new > 0) AS with_new,
          CAST(sum(r.cov_new) AS BIGINT) AS lines
        FROM g JOIN r USING (run, test_id) WHERE r.cov_new IS NOT NULL
        GROUP BY ALL ORDER BY g.name, backend""")


def _registered_ops() -> list[str] | None:
    """Names in the GraphIR op registry, or None if `ir` cannot be imported here."""
    try:
        import ir  # noqa: F401  (registers the op library)
        from ir.core.op import OP_REGISTRY
        return sorted(OP_REGISTRY)
    except Exception:  # the report must not depend on the IR importing
        return None


def _ms_to_iso(ms: float | None) -> str:
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return ""
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _derived_buckets(db: _Db, runs: list[Run], skip_runs: set[int],
                     limit: int) -> tuple[list[dict], int]:
    tv = _sql_list(TABLE_VERDICTS)
    skip = f"AND run NOT IN ({', '.join(str(i) for i in sorted(skip_runs))})" if skip_runs else ""
    base = f"FROM r WHERE verdict IN {tv} {skip}"
    total = db.q(f"SELECT count(DISTINCT bucket) AS n {base}")[0]["n"]
    rows = db.q(f"""
        SELECT backend, target, verdict, stage, error_sig AS signature, bucket,
          count(*) AS count, count(DISTINCT test_id) AS tests, count(DISTINCT run) AS n_runs,
          min(epoch_ms(ts)) AS first_ms, arg_min(el, epoch_ms(ts)) AS first_el,
          arg_min(run, epoch_ms(ts)) AS first_run,
          list(test_id ORDER BY ts)[1:3] AS examples,
          list(DISTINCT {{'run': run, 'dir': finding_dir}}) FILTER (WHERE finding_dir IS NOT NULL)
            AS dirs
        {base}
        GROUP BY backend, target, verdict, stage, error_sig, bucket
        ORDER BY CASE verdict WHEN 'invalid' THEN 1 ELSE 0 END, count DESC, bucket
        LIMIT {int(limit)}""")
    by_idx = {r.idx: r for r in runs}
    for row in rows:
        row["first_seen"] = _ms_to_iso(row.pop("first_ms"))
        row["first_run"] = by_idx[row["first_run"]].label if row["first_run"] in by_idx else ""
        dirs = sorted(row.pop("dirs") or [], key=lambda d: (d["run"], d["dir"]))[:3]
        row["artifacts"] = [_resolve(by_idx[d["run"]].dir, d["dir"]) for d in dirs
                            if d["run"] in by_idx]
        row["repros"] = [a / "repro.py" for a in row["artifacts"] if (a / "repro.py").is_file()]
    return rows, total


def _resolve(run_dir: Path, p: str) -> Path:
    path = Path(p)
    return path if path.is_absolute() else run_dir / path


def _load_bugs(db: _Db, runs: list[Run]) -> set[int]:
    """Load every run's bugs table into table `bugs` (role-named columns); return the runs that
    have one."""
    files: list[tuple[str, int]] = []
    for run in runs:
        for pat in BUGS_GLOBS:
            for f in sorted(run.dir.glob(pat)):
                if not f.name.startswith((".", "_")):
                    files.append((str(f), run.idx))
    if not files:
        return set()
    try:
        present = _present_columns(db, [f for f, _ in files])
    except duckdb.Error:
        return set()
    sel = []
    for role, names in BUG_COLUMNS.items():
        col = next((n for n in names if n in present), None)
        sel.append(f'p."{col}" AS {role}' if col else f"NULL AS {role}")
    db.x("CREATE TABLE bugfiles (filename VARCHAR, run INTEGER)")
    db.con.executemany("INSERT INTO bugfiles VALUES (?, ?)", files)
    db.x(f"""
        CREATE TABLE bugs AS SELECT {", ".join(sel)}, f.run
        FROM read_parquet({_sql_list([f for f, _ in files])}, union_by_name=true, filename=true,
                          hive_partitioning=false) p
        JOIN bugfiles f USING (filename)""")
    used = {r["run"] for r in db.q("SELECT DISTINCT run FROM bugs")}
    for run in runs:
        run.has_bugs_table = run.idx in used
    return used


def _count_bugs(db: _Db, data: ReportData) -> None:
    """The bugs tables' distinct finding bugs, unconfirmed bugs and environment-fault buckets
    into `data`: a bug any run's triage found to be a compiler bug counts as one, whatever
    another run said of it."""
    rows = db.q(
        "SELECT DISTINCT coalesce(CAST(bug AS VARCHAR), CAST(bucket AS VARCHAR)) AS g, "
        "coalesce(CAST(status AS VARCHAR), '') AS s "
        f"FROM bugs WHERE verdict IN ({', '.join(_sql_str(v) for v in FINDING_VERDICTS)})")
    bugs = {r["g"] for r in rows if r["s"] not in NOT_BUGS}
    data.n_finding_bugs = len(bugs)
    data.n_unconfirmed_bugs = len({r["g"] for r in rows if r["s"] == "unconfirmed"} - bugs)
    data.n_env_buckets = len({r["g"] for r in rows if r["s"] == "environment"} - bugs)


def _bugs_rows(db: _Db, runs: list[Run], limit: int) -> list[dict]:
    """The bugs tables' rows, one per bucket: a bucket in several runs' tables is merged (counts
    summed, earliest first-seen, examples and artifact folders of each run)."""
    rows = db.q(f"""
        WITH b AS (
          SELECT *, coalesce(CAST(bucket AS VARCHAR),
                             nullif(concat_ws(' | ', backend, target, verdict, stage,
                                              CAST(signature AS VARCHAR)), ''),
                             'row ' || CAST(row_number() OVER () AS VARCHAR)) AS key
          FROM bugs)
        SELECT key AS bucket, any_value(CAST(bug AS VARCHAR)) AS bug,
          any_value(CAST(finding AS VARCHAR)) AS finding,
          any_value(backend) AS backend,
          any_value(CAST(config AS VARCHAR)) AS config, any_value(target) AS target,
          any_value(verdict) AS verdict, any_value(stage) AS stage,
          any_value(CAST(signature AS VARCHAR)) AS signature, sum(count) AS count,
          count(DISTINCT run) AS n_runs, left(CAST(min(first_seen) AS VARCHAR), 19) AS first_seen,
          list(examples ORDER BY run) AS examples,
          list({{'run': run, 'artifact': CAST(artifact AS VARCHAR),
                 'repro': CAST(repro AS VARCHAR)}} ORDER BY run) AS locs,
          list(DISTINCT run ORDER BY run) AS runs,
          list(DISTINCT run ORDER BY run) FILTER (
            WHERE CAST(new AS BOOLEAN) AND coalesce(CAST(status AS VARCHAR), '')
                  NOT IN {_sql_tuple(NOT_BUGS)}) AS new_runs,
          list(DISTINCT run ORDER BY run) FILTER (
            WHERE CAST(status AS VARCHAR) = 'unconfirmed') AS unconfirmed_runs,
          list(DISTINCT run ORDER BY run) FILTER (
            WHERE CAST(new AS BOOLEAN) AND coalesce(CAST(status AS VARCHAR), '') = 'new'
                  AND repro IS NOT NULL AND repro_status IS NULL) AS unchecked_runs,
          any_value(CAST(fixed_in AS VARCHAR)) AS fixed_in,
          bool_or(coalesce(CAST(status AS VARCHAR), '') = 'environment') AS environment
        FROM b GROUP BY key
        ORDER BY CASE WHEN any_value(verdict) = 'invalid' THEN 1 ELSE 0 END,
          sum(count) DESC NULLS LAST, key
        LIMIT {int(limit)}""")
    by_idx = {r.idx: r for r in runs}
    for row in rows:
        row["run_labels"] = [by_idx[i].label for i in row.pop("runs")]
        # the runs whose triage found this bucket new (not known before them), and those
        # whose triage found it unconfirmed (its bug's repro.py did not reproduce)
        row["new_in"] = [by_idx[i].label for i in row.pop("new_runs") or []]
        row["unconfirmed_in"] = [by_idx[i].label for i in row.pop("unconfirmed_runs") or []]
        # the runs whose triage wrote its repro.py and had no time left to run it
        row["unchecked_in"] = [by_idx[i].label for i in row.pop("unchecked_runs") or []]
        row["first_seen"] = row["first_seen"] or ""
        examples: list[str] = []
        for ex in row["examples"]:
            examples += [ex] if isinstance(ex, str) else list(ex or [])
        row["examples"] = examples[:3]
        row["artifacts"], row["repros"] = [], []
        for loc in row.pop("locs"):
            run = by_idx[loc["run"]]
            art = _resolve(run.dir, loc["artifact"]) if loc["artifact"] else None
            repro = _resolve(run.dir, loc["repro"]) if loc["repro"] else None
            if repro is None and art is not None and (art / "repro.py").is_file():
                repro = art / "repro.py"
            if art is not None and len(row["artifacts"]) < 3:
                row["artifacts"].append(art)
            if repro is not None and len(row["repros"]) < 3:
                row["repros"].append(repro)
    return rows
