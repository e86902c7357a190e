"""The triage of a campaign's output: bucket every finding row, reduce the first members of
each new bucket, write a bug folder with a standalone reproducer per bucket, check the
reproducers, and write the `bugs` table.

`triage(path, cfg)` takes a campaign output dir (rows from `results/`, artifacts from
`findings/`), a findings dir alone (rows rebuilt from each folder's info.json), or a single
finding folder (reduced into `<folder>/reduced` or `out`). The campaign driver calls
`triage_campaign(out_dir, cfg)` when a campaign ends.

The work is a pipeline of steps (`campaign.triage.pipeline.steps`, one module each, run by
`campaign.triage.pipeline.driver` on a shared `TriageState` and the budget's `TriageClock`):
recognize (environment faults apart, a note's cause in another form known), reduce, bucket,
confirm (re-run what was not reduced), name (a note's bug in another form, by its reduced
core or its cause), write (the bug folders), ablate, check (the repro.py, and on newer
releases), localize, group (buckets into bugs), table, record (reports and the bug
database). Each step's module doc says what it does; docs/triage.md says why.

Layout: `<out>/bugs.parquet` (`campaign.triage.pipeline.buckets.BUGS_SCHEMA`),
`<out>/bugs/<bucket>/` (`campaign.triage.pipeline.repro`), `<out>/bugs/reduced.json`: every
finding folder reduced so far -> its bucket, so a second triage of the same output reuses the
reductions; `<out>/bugs/steps.json`: the steps the last triage ran and what each left for
lack of time, which a second triage does (the steps are idempotent over what is on disk).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.budget_plan import triage_seconds
from campaign.triage.config import TriageConfig
from campaign.triage.pipeline.buckets import Bucket, crash_key, mismatch_key
from campaign.triage.pipeline.clock import TriageClock
from campaign.triage.pipeline.driver import JOURNAL, Pipeline, StepRecord
from campaign.triage.pipeline.state import TriageState
from campaign.triage.pipeline.steps import campaign_steps, folder_steps

if TYPE_CHECKING:
    from campaign.triage.bugdb.sightings import Recorded
    from campaign.triage.bugdb.store import BugDb

#: verdicts that are not findings; every other one is bucketed
NOT_FINDINGS = ("pass", "skipped")


@dataclass
class TriageReport:
    out_dir: Path
    buckets: list[Bucket]
    table: Path | None
    reductions: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: pieces of work (reductions, re-runs, repro checks) left undone for lack of time
    skipped: int = 0
    #: the pipeline's steps as they ran (`driver.StepRecord`)
    steps: list[StepRecord] = field(default_factory=list)
    #: the bug database written (`triage.db`), and what this triage added to it
    db: Path | None = None
    recorded: Recorded | None = None

    def text(self) -> str:
        """The buckets and the bugs (causes) they group into: a compiler bug of several
        buckets gets a `bug <id>` line with its buckets under it. Unconfirmed bugs (their
        repro.py did not reproduce) and environment faults' buckets are counted and listed
        apart, after the compiler bugs: never among them."""
        groups: dict[str, list[Bucket]] = {}
        for b in self.buckets:
            if b.kind == "bug":
                groups.setdefault(b.bug or b.key.id, []).append(b)
        doubtful = {g: m for g, m in groups.items() if any(b.status == "unconfirmed" for b in m)}
        bugs = {g: m for g, m in groups.items() if g not in doubtful}
        env = [b for b in self.buckets if b.kind == "env"]
        apart = (f"; {len(doubtful)} unconfirmed bugs: their repro.py did not reproduce"
                 if doubtful else "") + (f"; {len(env)} buckets of environment faults"
                                         if env else "")
        lines = [f"triage: {len(self.buckets)} buckets ({sum(map(len, bugs.values()))} "
                 f"compiler-bug buckets in {len(bugs)} bugs{apart}), {self.reductions} "
                 f"reductions in {self.seconds:.0f} s -> {self.table}"]
        if self.skipped:
            lines.append(f"triage: {self.skipped} pieces of work did not fit the budget; continue with "
                         f"`python -m campaign.triage {self.out_dir}`")
        failed = [r for r in self.steps if r.status in ("failed", "not run")]
        if failed:
            lines.append("triage: steps " + ", ".join(f"{r.name} ({r.status}: {r.error})"
                                                      for r in failed)
                         + f"; their work is left for `python -m campaign.triage {self.out_dir}`")
        lines += _group_lines(bugs, "  ")
        if doubtful:
            lines.append("  unconfirmed (their repro.py did not reproduce: not compiler bugs "
                         "until one does; the next triage checks them again):")
            lines += _group_lines(doubtful, "    ")
        if env:
            lines.append("  environment faults (not compiler bugs; the campaign held the "
                         "backend back):")
            lines += [f"    {b.key.id:<34} {b.count:>5}x  {b.env_fault}"
                      for b in sorted(env, key=lambda b: (-b.count, b.key.id))]
        if self.db is not None and self.recorded is not None:
            lines.append(self.recorded.text(self.db))
        return "\n".join(lines)


def _group_lines(groups: dict[str, list[Bucket]], indent: str) -> list[str]:
    """The lines of `groups` (bug -> its buckets), largest first: a bug of several buckets
    gets a `bug <id>` line with its buckets under it."""
    lines = []
    for bug, members in sorted(groups.items(),
                               key=lambda kv: (-sum(b.count for b in kv[1]), kv[0])):
        inner = indent
        if len(members) > 1:
            lines.append(f"{indent}bug {bug}: {len(members)} buckets, "
                         f"{sum(b.count for b in members)} rows")
            inner = indent + "  "
        for b in sorted(members, key=lambda b: (b.key.id != bug, -b.count, b.key.id)):
            size = (f"{b.original_insts}->{b.reduced_insts} insts"
                    if b.reduced_insts is not None else "not reduced")
            what = b.key.error_sig or b.key.pattern or ""
            if b.key.config:
                what = f"[{b.key.config}] {what}"
            if b.finding:
                what = f"known {b.finding.split('-')[0]}: {what}"
            lines.append(f"{inner}{b.key.id:<34} {b.count:>5}x  {size:<16} "
                         f"repro: {b.repro_status or '-':<17} {what[:90]}")
    return lines


# ---- rows ---------------------------------------------------------------------------------------

def _rows_from_results(out_dir: Path) -> list[dict[str, Any]]:
    from campaign.storage import read_results

    table = read_results(out_dir)
    cols = ["test_id", "backend", "target", "verdict", "stage", "error_sig", "ts", "finding_dir",
            "ops", "seed", "backend_config", "error_class"]
    rows = table.select([c for c in cols if c in table.column_names]).to_pylist()
    return [r for r in rows if r["verdict"] not in NOT_FINDINGS]


def _rows_from_folders(findings: Path, root: Path) -> list[dict[str, Any]]:
    rows = []
    for info_path in sorted(findings.glob("*/*/*/info.json")):
        folder = info_path.parent
        if folder.name.startswith("."):
            continue
        try:
            info = json.loads(info_path.read_text())
        except (OSError, ValueError):
            continue
        backend, verdict = folder.parent.parent.name, folder.parent.name
        ops = []
        if (folder / "graph.gir").is_file():
            try:
                from ir.core.text import load

                ops = sorted(load(folder / "graph.gir").op_counts())
            except Exception:
                ops = []
        rows.append({"test_id": info.get("test_id", folder.name), "backend": backend,
                     "target": info.get("target") or "", "verdict": verdict,
                     "stage": info.get("stage"), "error_sig": info.get("error_sig"),
                     "error_class": info.get("error_class"),
                     "ts": None, "finding_dir": folder.relative_to(root).as_posix(),
                     "ops": ops, "seed": info.get("seed"),
                     "backend_config": info.get("backend_config") or ""})
    return rows


def triage(path: Path, cfg: TriageConfig = TriageConfig(), out: Path | None = None,  # noqa: B008 (read, never written)
           log: Callable[[str], None] = print, deadline: float | None = None,
           progress: bool = False) -> TriageReport:
    """Triage a campaign output dir, a findings dir, or one finding folder (module doc).
    `deadline` (monotonic): a hard end for every step (a campaign's wall-clock budget);
    `progress`: a progress bar of the time budget on stderr."""
    path = Path(path)
    t0 = time.monotonic()
    if (path / "graph.gir").is_file() or (path / "info.json").is_file():
        return _triage_one(path, cfg, out, log)
    root = path if (path / "results").is_dir() or (path / "findings").is_dir() else path.parent
    out_dir = Path(out) if out is not None else root
    db = open_db(cfg, out_dir)  # an unusable database fails before any work
    if (path / "results").is_dir():
        rows = _rows_from_results(path)
        if not rows and (path / "findings").is_dir():
            rows = _rows_from_folders(path / "findings", path)
    elif (path / "findings").is_dir():
        rows = _rows_from_folders(path / "findings", path)
    else:  # a findings dir itself
        rows = _rows_from_folders(path, path.parent)
    from campaign.env_fault import read_faults

    clock = TriageClock.of(triage_seconds(cfg.budget, None), deadline)
    state = TriageState.open(out_dir, cfg, log, deadline, db, read_faults(root))
    state.rows = rows
    try:
        if progress and clock.time_left() > 0:
            from tqdm import tqdm

            clock.bar = tqdm(total=round(clock.time_left(), 1), unit="s", desc="triage",
                             disable=None,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s "
                                        "{postfix}")
        records = Pipeline(campaign_steps()).run(state, clock, state.bugs_dir / JOURNAL)
    finally:
        if clock.bar is not None:
            clock.bar.close()
        state.close()
    return TriageReport(out_dir, list(state.buckets.values()), state.table, state.reductions,
                        time.monotonic() - t0, skipped=clock.skipped,
                        db=db.path if db is not None else None, recorded=state.recorded,
                        steps=records)


def open_db(cfg: TriageConfig, out_dir: Path) -> BugDb | None:
    """The bug database of a triage writing to `out_dir`: `cfg.db`, or unset, `runs/bugdb` for
    an output dir under runs/ (`campaign.triage.bugdb.store.resolve`); None for none. Raises
    BugDbError (a one-line message naming the path) when it cannot be used."""
    from campaign.triage.bugdb.store import BugDb, resolve

    path = resolve(cfg.db, out_dir)
    return BugDb.open(path) if path is not None else None


def _triage_one(folder: Path, cfg: TriageConfig, out: Path | None,
                log: Callable[[str], None]) -> TriageReport:
    """One finding folder: reduce it and write its bug folder (and a one-row bugs table)."""
    from campaign.triage.pipeline.reduction import load_finding

    t0 = time.monotonic()
    out_dir = Path(out) if out is not None else folder / "reduced"
    case = load_finding(folder)
    if case is None:
        raise ValueError(f"{folder}: no graph.gir/inputs.npz to reduce")
    state = TriageState.open(out_dir, cfg, log)
    clock = TriageClock.of(max(cfg.max_seconds, triage_seconds(cfg.budget, None)))
    try:
        from campaign.triage.pipeline.reduction import reduce_finding

        red = reduce_finding(case, state.runner(case.backend, state.limit(case.info)),
                             cfg.max_tests, cfg.max_seconds, log=lambda s: log(f"  {s}"))
        state.reductions += 1
        row: dict[str, Any] = {
            "test_id": case.test_id, "backend": case.backend,
            "target": case.info.get("target") or "", "verdict": case.verdict,
            "stage": case.info.get("stage"), "error_sig": case.info.get("error_sig"),
            "backend_config": red.backend_config}
        if case.verdict == "mismatch" and red.status == "reduced":
            key = mismatch_key(case.backend, row["target"], red.graph, red.backend_config)
        else:
            key = crash_key(row)
        state.bucket(key).add(None, case.test_id, str(folder))
        state.best[key] = red
        records = Pipeline(folder_steps(), given={"buckets", "best"}).run(state, clock)
    finally:
        state.close()
    return TriageReport(out_dir, list(state.buckets.values()), state.table, state.reductions,
                        time.monotonic() - t0, steps=records)


def triage_campaign(out_dir: Path, cfg: TriageConfig, log: Callable[[str], None] = print,
                    deadline: float | None = None) -> TriageReport | None:
    """The triage a campaign runs when it ends (`cfg.enabled`), by `deadline` if given (the
    campaign's wall-clock budget), with a progress bar; never raises: a triage failure is
    logged, the campaign's results stay as they are."""
    if not cfg.enabled:
        return None
    from campaign.triage.bugdb.store import BugDbError

    try:
        try:
            report = triage(out_dir, cfg, log=log, deadline=deadline, progress=True)
        except BugDbError as e:  # the database is unusable: triage without it
            log(f"triage: {e}; triaging without the bug database")
            report = triage(out_dir, replace(cfg, db="off"), log=log, deadline=deadline,
                            progress=True)
    except Exception as e:
        import traceback

        log(f"triage failed: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        return None
    log(report.text())
    return report
