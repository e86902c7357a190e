"""The triage of a campaign's output: bucket every finding row, reduce the first members of
each new bucket, write a bug folder with a standalone reproducer per bucket, check the
reproducers, and write the `bugs` table.

`triage(path, cfg)` takes a campaign output dir (rows from `results/`, artifacts from
`findings/`), a findings dir alone (rows rebuilt from each folder's info.json), or a single
finding folder (reduced into `<folder>/reduced` or `out`). The campaign driver calls
`triage_campaign(out_dir, cfg)` when a campaign ends.

Layout: `<out>/bugs.parquet` (`campaign.triage.pipeline.buckets.BUGS_SCHEMA`), `<out>/bugs/<bucket>/`
(`campaign.triage.pipeline.repro`), `<out>/bugs/reduced.json`: every finding folder reduced so far ->
its bucket, so a second triage of the same output reuses the reductions.

Order of work: mismatch folders first (up to `reduce_mismatches` per backend, oldest first:
their bucket is only known once reduced), then `reduce_first` folders of each new
crash/signal failure, within the total `budget`. A reduction also reduces the finding's
compiler configuration (`campaign.triage.pipeline.reduction`), and the bucket keys on the reduced one
(`campaign.triage.pipeline.buckets`).

A *failure* here is (backend, target, verdict, stage, signature) in any configuration. Of its
rows, the first reduced is the oldest; each further one (up to `reduce_first`) is the oldest
that no reduced configuration so far explains (whose options it does not hold), else the next
oldest. Then every row joins the bucket of its own reduction, else that of the most specific
reduced (or known) configuration its own holds (`config_covers`), else a bucket of its
configuration as drawn. Mismatch rows that were not reduced join the reduced bucket of the same
backend whose pattern's ops all occur in the row's ops (the most specific such pattern) and
whose configuration the row's holds, else the backend's `unreduced` bucket of the row's
configuration. Without configurations (every `backend_config` '') this is: one bucket per
failure, its first `reduce_first` folders reduced.

A crash-like failure that no note trigger keys exactly but whose *cause* one of them has (the
same compiler, target, verdict and stage, and the same cause signature,
`campaign.signature.cause_signature`: the innermost exception, the grouping's rule 3,
docs/triage.md) is that note's bug in another form: F21's If-branch tuple fails in every
consumer of the tuple, each consumer's name in its message; F40 fails behind as many
`LoweringException:` layers as its HOPs are nested. Its buckets are known, named by the
finding, and not reduced (unless `reduce_known`). A new bucket whose reduced graph has a
note trigger's core (compiler, verdict and stage too: `note_known.NoteForms.by_core`) is
that note's bug as well, named once reduced: a consumer no message ties to the note (F21's
Slice). A cause or core two notes share names neither.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from campaign.budget_plan import triage_seconds
from campaign.triage.config import TriageConfig
from campaign.triage.pipeline.buckets import (
    BUGS_FILE,
    UNREDUCED,
    Bucket,
    BucketKey,
    config_covers,
    crash_key,
    known_bucket_ids,
    known_bucket_keys,
    mismatch_key,
    pattern_ops,
    write_bugs_table,
)
from campaign.triage.pipeline.localization import Localization, localize_folder
from campaign.triage.pipeline.note_known import NoteForms

if TYPE_CHECKING:
    from campaign.env_fault import EnvFault
    from campaign.triage.bugdb.sightings import Recorded
    from campaign.triage.bugdb.store import BugDb
    from campaign.triage.pipeline.reduction import Reduction

#: verdicts that are not findings; every other one is bucketed
NOT_FINDINGS = ("pass", "skipped")
#: seconds a timeout's repro.py is given beyond its own wait when checked (its imports, the
#: watchdog's grace)
REPRO_IMPORT_S = 60.0
BUGS_DIR = "bugs"
INDEX = "reduced.json"


@dataclass
class TriageReport:
    out_dir: Path
    buckets: list[Bucket]
    table: Path | None
    reductions: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: steps (reductions, re-runs, repro checks) left undone for lack of time
    skipped: int = 0
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
            lines.append(f"triage: {self.skipped} steps did not fit the budget; continue with "
                         f"`python -m campaign.triage {self.out_dir}`")
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


# ---- the triage ---------------------------------------------------------------------------------

#: under a hard deadline: a reduction starts only with this many seconds left, and a repro.py
#: is checked only with this many (a fresh Python importing torch takes a few)
MIN_REDUCTION_S = 5.0
#: under a hard deadline a reduction takes at most 1/this of the time left
HARD_REDUCTION_SHARE = 3.0
MIN_REPRO_S = 10.0

class _Triage:
    def __init__(self, out_dir: Path, cfg: TriageConfig, log: Callable[[str], None],
                 deadline: float | None = None, db: BugDb | None = None,
                 env_faults: list[EnvFault] | None = None):
        self.out = out_dir
        #: the environment faults the campaign named (`campaign.env_fault`): their rows are
        #: bucketed apart (kind `env`), never reduced nor taken for compiler bugs
        self.env_faults = list(env_faults or [])
        self.cfg = cfg
        self.log = log
        self.bugs_dir = out_dir / BUGS_DIR
        self.buckets: dict[BucketKey, Bucket] = {}
        self.known = known_bucket_ids(list(cfg.known))
        #: the known buckets' keys: a row whose configuration holds a known bucket's (reduced)
        #: options is that bucket's
        self.known_keys = known_bucket_keys(list(cfg.known))
        #: the bug database: its buckets are known too
        self.db = db
        if db is not None:
            keys = db.known_keys(str(out_dir.resolve()))
            self.known |= {k.id for k in keys}
            self.known_keys += keys
        #: the findings' notes (`triage.findings`): their triggers' buckets are known too,
        #: and named by the finding (bucket id -> note id)
        self.note_forms = NoteForms({}, {})
        #: the notes' causes (`cause_probe`) and, per note, the trigger still failing here
        #: (None: none does), once re-run
        self.note_probes: list[Any] = []
        self.live_triggers: dict[str, str | None] = {}
        self.findings = self._note_keys(cfg)
        self.runners: dict[tuple[str, float], Any] = {}
        self.deadline = time.monotonic() + triage_seconds(cfg.budget, None)
        #: a hard deadline (a campaign's wall-clock budget): every step, re-runs and repro
        #: checks included, ends by it; what does not fit is left for a later triage
        self.hard = deadline is not None
        if deadline is not None:
            self.deadline = deadline
        self.skipped = 0  #: steps left undone for lack of time (hard deadline)
        self.bar: Any = None
        self.reductions = 0
        #: bucket key -> the Reduction that represents it (smallest reduced graph)
        self.best: dict[BucketKey, Any] = {}
        self.index: dict[str, dict[str, Any]] = self._load_index()

    def _note_keys(self, cfg: TriageConfig) -> dict[str, str]:
        """The notes' trigger keys into `known`/`known_keys`; bucket id -> finding. A notes
        dir that cannot be read costs its keys (a line in the log), not the triage."""
        from campaign.triage.pages.notes import NotesError
        from campaign.triage.pipeline.note_known import findings_dir, known_note_keys, note_probes

        try:
            notes = known_note_keys(findings_dir(cfg.findings))
            self.note_probes = note_probes(findings_dir(cfg.findings))
        except (NotesError, OSError, ValueError) as e:
            self.log(f"triage: the findings' notes are not used: {e}")
            return {}
        self.known |= {k.key.id for k in notes}
        self.known_keys += [k.key for k in notes if k.key not in self.known_keys]
        self.note_forms = NoteForms.of(notes)
        return {k.key.id: k.finding for k in notes}

    def _load_index(self) -> dict[str, dict[str, Any]]:
        path = self.bugs_dir / INDEX
        if path.is_file():
            try:
                return json.loads(path.read_text())
            except ValueError:
                return {}
        return {}

    def bucket(self, key: BucketKey) -> Bucket:
        if key not in self.buckets:
            self.buckets[key] = Bucket(key, new=key.id not in self.known,
                                       finding=self.findings.get(key.id))
        return self.buckets[key]

    def limit(self, info: dict[str, Any]) -> float:
        """The sandbox limit a finding is re-run at: a timeout's, the limit the campaign
        confirmed it at (still no result after it reproduces it); else `triage.timeout_s`."""
        from campaign.triage.pipeline.reduction import confirmed_limit

        if info.get("verdict") == "timeout":
            return confirmed_limit(info, self.cfg.timeout_s)
        return self.cfg.timeout_s

    def runner(self, spec: str, timeout_s: float | None = None):
        """The runner of backend `spec` at `timeout_s` (default `triage.timeout_s`)."""
        from campaign.triage.pipeline.reduction import BackendRunner

        limit = self.cfg.timeout_s if timeout_s is None else timeout_s
        if (spec, limit) not in self.runners:
            self.runners[(spec, limit)] = BackendRunner(spec, timeout_s=limit)
            if self.hard:
                self.runners[(spec, limit)].deadline = self.deadline
        return self.runners[(spec, limit)]

    def fits(self, seconds: float) -> bool:
        """Whether a step that may take `seconds` can still start: any time left, or under a
        hard deadline, that much (a step that does not fit is counted as skipped)."""
        left = self.time_left()
        ok = left > 0 and (not self.hard or left >= seconds)
        if not ok and self.hard:
            self.skipped += 1
        return ok

    def tick(self, what: str) -> None:
        """Advance the progress bar (seconds of the budget used) and say what is running."""
        if self.bar is not None:
            used = max(0.0, self.bar.total - max(self.time_left(), 0.0))
            self.bar.update(round(used - self.bar.n, 1))
            self.bar.set_postfix_str(what[:40], refresh=True)

    def close(self) -> None:
        for r in self.runners.values():
            r.close()

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    # ---- reducing --------------------------------------------------------------------------
    def reduce(self, finding_dir: str):
        """Reduce the finding in `finding_dir` (relative to the output dir); None when it has
        no graph or the budget is spent."""
        from campaign.triage.pipeline.reduction import Reduction, load_finding, reduce_finding

        case = load_finding(self.out / finding_dir)
        if case is None:
            return None
        left = self.time_left()
        # under a hard deadline a timeout's reduction must fit a few of its candidate runs
        need = 3 * self.limit(case.info) if case.verdict == "timeout" else MIN_REDUCTION_S
        if not self.fits(need):
            return None
        self.tick(f"reducing {case.backend} {case.verdict}")
        self.log(f"triage: reducing {finding_dir} ({case.graph.num_insts()} insts) on "
                 f"{case.spec}")
        t0 = time.monotonic()
        try:
            # under a hard deadline one slow reduction (the exporter's: seconds a candidate)
            # must not take all the time the other buckets need
            share = max(MIN_REDUCTION_S, left / HARD_REDUCTION_SHARE) if self.hard else left
            red = reduce_finding(case, self.runner(case.backend, self.limit(case.info)),
                                 self.cfg.max_tests, min(self.cfg.max_seconds, share))
        except Exception as e:  # a triage bug must not lose the campaign's results
            import traceback

            self.log(f"triage: reducing {finding_dir} failed: {type(e).__name__}: {e}")
            red = Reduction(case, "error", case.graph, case.values, case.extra_sets,
                            note=f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        red.summary["total_seconds"] = round(time.monotonic() - t0, 2)  # confirmation included
        self.reductions += 1
        configured = (f", configuration {case.config!r} -> {red.backend_config!r}"
                      if case.config else "")
        self.log(f"triage:   {red.status}: {red.original_insts} -> {red.reduced_insts} insts"
                 f"{configured} in {time.monotonic() - t0:.1f} s")
        return red

    def offer(self, key: BucketKey, red) -> None:
        """Keep `red` as the bucket's representative if it is the smallest so far."""
        from ir.shrink.reducer import size_of

        cur = self.best.get(key)
        if cur is None or (red.status == "reduced" and (cur.status != "reduced" or
                                                       size_of(red.graph) < size_of(cur.graph))):
            self.best[key] = red

    def index_entry(self, finding_dir: str, key: BucketKey, red) -> None:
        self.index[finding_dir] = {
            "bucket": key.id, "key": json.loads(key.text()), "status": red.status,
            "original_insts": red.original_insts, "reduced_insts": red.reduced_insts,
            "tests": red.summary.get("tests"),
            "seconds": red.summary.get("total_seconds", red.summary.get("seconds"))}

    # ---- the passes ------------------------------------------------------------------------
    def run(self, rows: list[dict[str, Any]]) -> None:
        rows = sorted(rows, key=lambda r: (r.get("ts") is None, r.get("ts") or 0, r["test_id"]))
        reducible = set(self.cfg.reduce_verdicts)
        failures: dict[BucketKey, list[dict[str, Any]]] = {}
        if self.env_faults:
            rows = [r for r in rows if not self.environment(r)]
        for row in rows:
            if row["verdict"] != "mismatch":
                failures.setdefault(crash_key(row).base(), []).append(row)
        self.mismatches([r for r in rows if r["verdict"] == "mismatch"], "mismatch" in reducible)
        for base, members in failures.items():
            if base.kind != "bug":  # ours or a known gap: the first finding folder says enough
                for row in members:
                    self.bucket(crash_key(row)).add(row.get("ts"), row["test_id"],
                                                    row.get("finding_dir"))
                continue
            self.failure(base, members, base.verdict in reducible)

    def environment(self, row: dict[str, Any]) -> bool:
        """Bucket `row` apart (its bucket's `env_fault`, not reduced) if it is the row of an
        environment fault the campaign named; whether it was."""
        fault = next((f for f in self.env_faults if f.holds(row["backend"], row)), None)
        if fault is None:
            return False
        b = self.bucket(crash_key(row))
        b.env_fault = fault.line()
        b.add(row.get("ts"), row["test_id"], row.get("finding_dir"))
        return True

    def explained(self, row: dict[str, Any], keys: list[BucketKey]) -> BucketKey | None:
        """The most specific of `keys` whose configuration the row's holds, or None."""
        config = row.get("backend_config") or ""
        fits = [k for k in keys if config_covers(k.config, config)]
        return max(fits, key=lambda k: (k.config.count("&") + bool(k.config), k.config),
                   default=None)

    def failure(self, base: BucketKey, rows: list[dict[str, Any]], reducible: bool) -> None:
        """Reduce and bucket the rows of one crash-like failure (`base`: its key in the
        backend's own configuration; the module doc says how)."""
        note = None if self.cfg.reduce_known else self.note_forms.by_cause(base)
        if note is not None:  # a note's cause in another form: known, named, not reduced
            for row in rows:
                key = crash_key(row)
                if key.id not in self.known:
                    self.known.add(key.id)
                    self.findings[key.id] = note
        known = [k for k in self.known_keys if k.base() == base]
        reduced: list[BucketKey] = []
        chosen: dict[str, BucketKey] = {}  # reduced finding folder -> its bucket
        pending = [r for r in rows if r.get("finding_dir") and (self.cfg.reduce_known or (
            self.explained(r, known) is None and crash_key(r).id not in self.known))]
        for _ in range(max(self.cfg.reduce_first, 1) if reducible else 0):
            pick = next((r for r in pending if self.explained(r, reduced) is None),
                        pending[0] if pending else None)
            if pick is None:
                break
            pending.remove(pick)
            d = pick["finding_dir"]
            red = self.cached(d) or self.reduce(d)
            if red is None:
                continue
            if red.status in ("reduced", "cached"):
                key = replace(base, config=red.backend_config)
                reduced.append(key)
                if red.status == "reduced":
                    self.index_entry(d, key, red)
            else:
                key = crash_key(pick)
            chosen[d] = key
            self.offer(key, red)
        keys: list[BucketKey] = []
        for row in rows:
            d = row.get("finding_dir")
            key = (chosen.get(d) if d else None) or self.explained(row, reduced + known) \
                or crash_key(row)
            self.bucket(key).add(row.get("ts"), row["test_id"], d)
            keys.append(key)
        for key in dict.fromkeys(keys):  # a bucket no reduction represents: its first finding
            b = self.buckets[key]
            dirs = [d for _, _, d in sorted(b.members, key=lambda m: (m[0] is None, m[0] or 0))
                    if d]
            if dirs and key not in self.best and not self.reuse(key, dirs):
                self.unreduced(key, dirs[0])

    def reuse(self, key: BucketKey, dirs: list[str]) -> bool:
        """Represent a bucket by a reduction an earlier triage of this output made of one of
        its findings, if any (a known bucket's is not reduced again, and its bug folder must
        not be overwritten by an unreduced one)."""
        for d in dirs:
            if (self.index.get(d) or {}).get("bucket") == key.id:
                red = self.cached(d)
                if red is not None:
                    self.offer(key, red)
                    return True
        return False

    def cached(self, finding_dir: str):
        """A reduction done by an earlier triage of this output, rebuilt from its bug folder."""
        entry = self.index.get(finding_dir)
        if entry is None:
            return None
        folder = self.bugs_dir / entry["bucket"]
        if not (folder / "graph.gir").is_file():
            return None
        from campaign.triage.pipeline.reduction import Reduction, load_finding
        from ir.core.text import load

        case = load_finding(self.out / finding_dir)
        if case is None:
            return None
        # the bug folder holds the reduced test (its inputs, leaves, cotangents) as a finding
        reduced = load_finding(folder)
        red = Reduction(case, "cached", load(folder / "graph.gir"),
                        reduced.values if reduced is not None else {},
                        reduced.extra_sets if reduced is not None else [],
                        config=BucketKey(*entry["key"]).config, folder_case=reduced)
        red.summary = {"tests": entry.get("tests"), "seconds": entry.get("seconds")}
        return red

    def unreduced(self, key: BucketKey, finding_dir: str) -> None:
        """Represent a bucket by a finding as it is; a new compiler-bug bucket's finding is
        re-run first (within the budget) to confirm it still fails the same way."""
        from campaign.triage.pipeline.reduction import Reduction, load_finding, same_failure

        if key in self.best:
            return
        case = load_finding(self.out / finding_dir)
        if case is None:
            return
        red = Reduction(case, "not reduced", case.graph, case.values, case.extra_sets)
        b = self.buckets.get(key)
        if key.kind == "bug" and b is not None and b.new and self.fits(
                min(self.limit(case.info), MIN_REDUCTION_S)):
            self.tick(f"re-running {case.backend} {case.verdict}")
            try:
                row, finding, tc = self.runner(case.backend, self.limit(case.info)).run(
                    case.test_id, case.seed, case.graph, case.values, case.extra_sets,
                    config=case.config, grad=case.grad, transform=case.transform,
                    drawn_for=case.graph, dynshape=case.dynshape)
            except Exception as e:
                red.note = f"re-run failed: {type(e).__name__}: {e}"
            else:
                if same_failure(case.info, row):
                    red.status, red.row, red.tc = "confirmed", row, tc
                    red.files = dict(finding.files) if finding is not None else {}
                else:
                    red.status = "not reproducible"
                    red.note = f"re-run gave {row.get('verdict')}: {row.get('error_sig')}"
        self.best[key] = red

    def mismatches(self, rows: list[dict[str, Any]], reduce: bool) -> None:
        per_backend: dict[str, int] = {}
        rest = []
        for row in rows:
            d = row.get("finding_dir")
            n = per_backend.get(row["backend"], 0)
            red = None
            if d and reduce and n < self.cfg.reduce_mismatches:
                entry = self.index.get(d)
                known = None if self.cfg.reduce_known else self.known_mismatch(row)
                if known is not None and entry is None:  # a known bug: not reduced again
                    self.bucket(known).add(row.get("ts"), row["test_id"], d)
                    continue
                if entry is not None and entry.get("key", [None] * 6)[5]:
                    key = BucketKey(*entry["key"])
                    self.bucket(key).add(row.get("ts"), row["test_id"], d)
                    red = self.cached(d)
                    if red is not None:
                        self.offer(key, red)
                        per_backend[row["backend"]] = n + 1
                        continue
                red = self.reduce(d)
            if red is None or red.status == "error":
                rest.append(row)
                continue
            assert d  # `red` is the reduction of finding `d`
            per_backend[row["backend"]] = n + 1
            target = row.get("target") or ""
            key = mismatch_key(row["backend"], target, red.graph, red.backend_config)
            b = self.bucket(key)
            b.add(row.get("ts"), row["test_id"], d)
            if red.status != "reduced":
                b.note = f"mismatch {red.status}: {red.note}"[:500]
            else:
                self.index_entry(d, key, red)
            self.offer(key, red)
        for row in rest:
            ops = set(row.get("ops") or [])
            config = row.get("backend_config") or ""
            fits = [k for k in self.buckets if k.verdict == "mismatch" and k.backend == row["backend"]
                    and k.pattern not in (None, UNREDUCED) and pattern_ops(k.pattern) <= ops
                    and config_covers(k.config, config)]
            if fits:
                # (their patterns are set: `fits` keeps reduced ones only)
                key = max(fits, key=lambda k: (len(pattern_ops(cast(str, k.pattern))),
                                               -len(cast(str, k.pattern)),
                                               k.config.count("&") + bool(k.config)))
            else:
                key = BucketKey(row["backend"], row.get("target") or "", "mismatch", "compare",
                                None, UNREDUCED, config)
            self.bucket(key).add(row.get("ts"), row["test_id"], row.get("finding_dir"))
            if row.get("finding_dir") and key.pattern == UNREDUCED:
                self.unreduced(key, row["finding_dir"])

    # ---- grouping buckets into bugs --------------------------------------------------------
    def group(self) -> None:
        """Set each bucket's bug (`campaign.triage.pipeline.grouping`): evidence from the reduced graphs
        (`best`), the signatures, and cross re-runs of reduced graphs while time is left."""
        from campaign.backends.base import frontend_of
        from campaign.triage.pipeline.grouping import BucketEvidence, group

        evidence = []
        for key, b in self.buckets.items():
            red = self.best.get(key)
            graph = red.graph if red is not None and red.status in ("reduced", "cached") else None
            evidence.append(BucketEvidence(key.id, key.backend, key.verdict, b.kind, key.stage,
                                           key.error_sig, key.config, b.first_seen, b.count,
                                           graph, frontend_of(key.backend, key.stage)))
        grouping = group(evidence, self.cross_rerun, self.cfg.group_reruns)
        reasons: dict[str, str] = {}
        for link in grouping.links:
            for me, other in ((link.a, link.b), (link.b, link.a)):
                if grouping.bug[me] != me:
                    reasons.setdefault(me, f"{link.rule} with {other}")
        for key, b in self.buckets.items():
            b.bug = grouping.bug[key.id]
            b.bug_reason = reasons.get(key.id)
        n = len(set(grouping.bug.values()))
        if n < len(self.buckets):
            self.log(f"triage: {len(self.buckets)} buckets are {n} bugs "
                     f"({len(grouping.links)} links, {grouping.reruns} cross re-runs)")

    def cross_rerun(self, a: Any, b: Any) -> tuple[str, str | None, str | None] | None:
        """Re-run bucket `a`'s reduced graph (its bug folder) on bucket `b`'s compiler and
        configuration: (verdict, stage, error_sig), or None when there is no time left or it
        could not run."""
        from campaign.triage.pipeline.reduction import load_finding

        if self.time_left() < MIN_REDUCTION_S:
            return None
        case = load_finding(self.bugs_dir / a.bucket)
        if case is None:
            return None
        self.tick(f"re-running {a.bucket} on {b.bucket}")
        try:
            row, _, _ = self.runner(b.backend).run(case.test_id, case.seed, case.graph,
                                                   case.values, case.extra_sets, config=b.config)
        except Exception as e:
            self.log(f"triage: cross re-run of {a.bucket} on {b.bucket} failed: "
                     f"{type(e).__name__}: {e}")
            return None
        return row.get("verdict"), row.get("stage"), row.get("error_sig")

    def known_mismatch(self, row: dict[str, Any]) -> BucketKey | None:
        """The known (`triage.known`, the database) mismatch bucket of the row's backend
        whose pattern's ops all occur in the row's ops and whose configuration the row's holds
        (the most specific), or None: such a row joins it without being reduced."""
        ops = set(row.get("ops") or [])
        config = row.get("backend_config") or ""
        fits = [k for k in self.known_keys if k.verdict == "mismatch"
                and k.backend == row["backend"] and k.pattern not in (None, UNREDUCED)
                and pattern_ops(k.pattern) <= ops and config_covers(k.config, config)]
        return max(fits, key=lambda k: (len(pattern_ops(cast(str, k.pattern))),
                                        -len(cast(str, k.pattern)),
                                        k.config.count("&") + bool(k.config)), default=None)

    def seen_sources(self) -> tuple[Any, Any]:
        """The bug database's bugs and the version matrix (next to the findings' notes), for
        the versions a bug was seen on (`campaign.triage.pages.environment`); read once, None
        for one that is not there or cannot be read."""
        if not hasattr(self, "_seen_sources"):
            from campaign.triage.bugdb.matrix import MATRIX_FILE, Matrix
            from campaign.triage.pipeline.note_known import findings_dir

            bugs = matrix = None
            try:
                bugs = self.db.read() if self.db is not None else None
                notes = findings_dir(self.cfg.findings)
                matrix = Matrix.read(notes / MATRIX_FILE) if notes is not None else None
            except Exception as e:  # versions are a report's detail, never the triage's end
                self.log(f"triage: the versions seen are this run's only: {e}")
            self._seen_sources = (bugs, matrix)
        return self._seen_sources

    def seen(self, key: BucketKey) -> Any:
        """The versions bucket `key`'s bug was seen failing on (its repro.py's header)."""
        from campaign.triage.pages.environment import seen_versions

        return seen_versions(key.backend, [{"bucket": key.id, "finding": self.findings.get(key.id)}],
                             *self.seen_sources())

    def record(self) -> Recorded | None:
        """report.md per bug, then this triage's buckets into the bug database (if any);
        returns what the database got (`campaign.triage.bugdb.sightings.Recorded`) or None."""
        from campaign.triage.pages.upstream_report import write_reports
        from campaign.triage.pipeline.buckets import read_bugs_table

        rows = read_bugs_table(self.out / BUGS_FILE).to_pylist()
        reports = write_reports(self.out, rows, *self.seen_sources())
        if self.db is None:
            return None
        from campaign.triage.bugdb.sightings import record

        return record(self.db, self.out, rows, reports=reports)

    # ---- writing ---------------------------------------------------------------------------
    def ablate(self, key: BucketKey, b: Bucket, red: Any) -> Any:
        """A new training bug's ablation (`campaign.triage.pipeline.training_ablation`), into `b`; None
        when it is no such bug, or no time is left for two more runs of it."""
        from campaign.triage.pipeline.training_ablation import ablate

        if (key.kind != "bug" or not b.new or red.status not in ("reduced", "confirmed")
                or red.tc is None or not red.tc.mode.differentiates
                or not self.fits(2 * min(self.limit(red.case.info), MIN_REPRO_S))):
            return None
        self.tick(f"ablating {key.id}")
        try:
            res = ablate(red, lambda spec: self.runner(spec, self.limit(red.case.info)))
        except Exception as e:  # a triage bug must not lose the campaign's results
            self.log(f"triage: ablating {key.id} failed: {type(e).__name__}: {e}")
            return None
        if res is not None:
            b.wrong_part, b.aot_eager = res.part, res.aot_eager
            self.log(f"triage:   {key.id}: wrong part {res.part}; aot_eager {res.aot_eager}")
        return res

    def check_written(self, key: BucketKey, b: Bucket, red: Reduction, dest: Path) -> None:
        """Run the repro.py an earlier triage of this output wrote and did not check (the
        campaign's, out of time: "continue with python -m campaign.triage"), as a fresh one is
        checked; its outcome into `b.repro_status` and info.json."""
        from campaign.triage.pipeline.repro import check_repro

        info_path = dest / "info.json"
        info = json.loads(info_path.read_text()) if info_path.is_file() else {}
        wait = info.get("repro_wait_s") or {}
        limit = (float(wait.get("confirmed_limit_s", self.cfg.timeout_s))
                 + float(wait.get("cold_start_s", 0.0)) + REPRO_IMPORT_S
                 if key.verdict == "timeout" else self.cfg.repro_timeout_s)
        if self.hard and key.verdict != "timeout":
            limit = min(limit, self.time_left())
        if not (self.cfg.check_repro and key.kind == "bug" and (
                (b.new and not self.hard) or self.fits(
                    limit if key.verdict == "timeout" else MIN_REPRO_S))):
            return
        self.tick(f"checking repro {key.id}")
        error_class = (red.row or {}).get("error_class") or (info.get("row") or {}).get("error_class")
        outcome, tail = check_repro(dest, key.verdict, error_class, limit)
        b.repro_status = outcome
        if outcome != "reproduced":
            self.log(f"triage: repro of {key.id}: {outcome}\n{tail}")
        self.check_newer(key, b, dest, error_class, limit)
        if info:
            info["repro_status"] = outcome
            info_path.write_text(json.dumps(info, indent=2, default=str) + "\n")

    def check_newer(self, key: BucketKey, b: Bucket, dest: Path, error_class: str | None,
                    limit: float) -> None:
        """A new bug whose repro.py reproduced here, run under each newer interpreter
        (`TriageConfig.newer_pythons`) while time is left: the first under which it does not
        reproduce names the release that fixed it (`b.fixed_in`; a bug fixed after the
        installed release is known). One that errors there (a package missing) says nothing."""
        from campaign.triage.pipeline.repro import fixed_release

        if not (self.cfg.newer_pythons and b.new and key.kind == "bug"
                and b.repro_status == "reproduced"):
            return
        if self.hard and not self.fits(MIN_REPRO_S * len(self.cfg.newer_pythons)):
            return
        self.tick(f"checking repro {key.id} on newer releases")
        b.fixed_in = fixed_release(dest, key.verdict, error_class, limit,
                                   self.cfg.newer_pythons, self.log)
        if b.fixed_in:
            self.log(f"triage: {key.id} is fixed in {b.fixed_in}: its repro.py does not "
                     "reproduce there (a known bug)")

    def localize(self, key: BucketKey, b: Bucket, dest: Path) -> Localization | None:
        """A new compiler bug's localization (`repro.py --localize`), into `b.culprit`; None
        when its repro did not reproduce, or it is off, or no time is left for it."""
        if not (self.cfg.localize and key.kind == "bug" and b.new
                and b.repro_status == "reproduced"):
            return None
        budget = self.cfg.localize_budget_s
        if self.hard:
            budget = min(budget, self.time_left())
        if budget < 2 * MIN_REPRO_S or not self.fits(budget):
            return None
        self.tick(f"localizing {key.id}")
        loc = localize_folder(dest, budget)
        b.culprit = loc.text
        self.log(f"triage:   {key.id}: {loc.text}")
        return loc

    def name_by_core(self, key: BucketKey, b: Bucket, red: Any) -> None:
        """A new bucket whose reduced graph has a note trigger's core is that note's bug
        (module doc): named by it, no longer new."""
        if not b.new or b.finding is not None or red.status not in ("reduced", "cached"):
            return
        note = self.note_forms.by_core(key, red.graph)
        if note is not None:
            b.new, b.finding = False, note
            self.log(f"triage: {key.id} is {note} in another form (its reduced graph's core)")

    def name_by_cause(self, key: BucketKey, b: Bucket, red: Any) -> None:
        """A new bucket whose failure goes away with a note's cause taken out, the note's
        bug still failing here, is that note's bug (`cause_probe`): named by it, no longer
        new. Up to three runs of its test and one of a trigger per note, while time is left."""
        from campaign.triage.pipeline.cause_probe import probe, trigger_live

        if (not b.new or b.finding is not None or key.kind != "bug" or red.graph is None
                or red.status not in ("reduced", "cached", "confirmed", "not reduced")
                or not self.fits(3 * min(self.limit(red.case.info), MIN_REPRO_S))):
            return
        def runner_for(spec: str) -> Any:
            return self.runner(spec, self.limit(red.case.info))

        def live(note: Any) -> str | None:
            if note.finding not in self.live_triggers:
                self.live_triggers[note.finding] = trigger_live(note, runner_for)
            return self.live_triggers[note.finding]

        self.tick(f"probing {key.id}")
        try:
            match = probe(red, red.spec, key.verdict, self.note_probes, runner_for, live)
        except Exception as e:  # a triage bug must not lose the campaign's results
            self.log(f"triage: probing {key.id} failed: {type(e).__name__}: {e}")
            return
        if match is not None:
            b.new, b.finding = False, match.finding
            b.note = match.why[:500]
            self.log(f"triage: {key.id} is {match.finding} in another form ({match.why})")

    def write(self) -> Path:
        from campaign.triage.pipeline.repro import check_repro, write_bug_folder

        self.bugs_dir.mkdir(parents=True, exist_ok=True)
        # naming first, for every bucket: a bucket named by a note needs no repro check of a
        # new bug, nor a localization, which would otherwise spend the time its probe needs
        for key, red in self.best.items():
            self.name_by_core(key, self.buckets[key], red)
            if self.note_probes:
                self.name_by_cause(key, self.buckets[key], red)
        for key, red in self.best.items():
            b = self.buckets[key]
            b.original_insts = red.original_insts
            b.reduced_insts = red.reduced_insts if red.status in ("reduced", "cached") else None
            if red.status in ("reduced", "cached"):
                from campaign.triage.pipeline.buckets import op_pattern

                b.reduced_pattern = op_pattern(red.graph)
            b.confirmed = (True if red.status in ("reduced", "cached", "confirmed") else
                           False if red.status == "not reproducible" else None)
            b.reduction_tests = red.summary.get("tests")
            b.reduction_s = red.summary.get("total_seconds", red.summary.get("seconds"))
            if red.status not in ("reduced", "cached", "confirmed") and not b.note:
                b.note = f"{red.status}: {red.note}"[:500] if red.note else red.status
            dest = self.bugs_dir / key.id
            b.artifact_path = dest.relative_to(self.out).as_posix()
            if red.status == "cached":
                info = dest / "info.json"
                if info.is_file():
                    earlier = json.loads(info.read_text())
                    b.repro_status = earlier.get("repro_status")
                    b.wrong_part = (earlier.get("training_ablation") or {}).get("part")
                    b.aot_eager = (earlier.get("training_ablation") or {}).get("aot_eager")
                    if earlier.get("localization"):
                        b.culprit = Localization.from_json(earlier["localization"]).text
                if (dest / "repro.py").is_file():
                    b.repro = (dest / "repro.py").relative_to(self.out).as_posix()
                    if b.repro_status is None:  # written by a triage out of time, never run
                        self.check_written(key, b, red, dest)
                continue
            key_fields = {"backend": key.backend, "target": key.target, "verdict": key.verdict,
                          "stage": key.stage, "error_sig": key.error_sig,
                          "pattern": key.pattern, "backend_config": key.config}
            # a timeout's repro.py reproduces when there is still no result after the limit
            # the campaign confirmed it at, plus a fresh process's cold start
            wait: dict[str, Any] = ({"timeout_s": self.limit({**red.case.info,
                                                              "verdict": "timeout"}),
                     "cold_start_s": self.cfg.repro_cold_start_s}
                    if key.verdict == "timeout" else {})
            try:
                # the compiler the representative failed on: the reduced configuration (or,
                # not reduced, the one it ran)
                written = write_bug_folder(dest, red.spec, key.id, key_fields, red,
                                           red.case.seed, seen=self.seen(key), **wait)
            except Exception as e:
                b.note = f"writing the bug folder failed: {type(e).__name__}: {e}"[:500]
                self.log(f"triage: {b.note}")
                continue
            ablation = self.ablate(key, b, red)
            if not written.get("repro"):
                b.repro_status = "none"
                if written.get("codegen_error"):
                    b.note = f"no repro.py: {written['codegen_error']}"[:500]
            else:
                b.repro = (dest / "repro.py").relative_to(self.out).as_posix()
                # a timeout's repro ends itself once its wait is over (a watchdog); the
                # check leaves it the time to import its libraries and to say so
                limit = (written.get("timeout_s", self.cfg.timeout_s) + REPRO_IMPORT_S
                         if key.verdict == "timeout" else self.cfg.repro_timeout_s)
                if self.hard and key.verdict != "timeout":
                    limit = min(limit, self.time_left())
                if self.cfg.check_repro and key.kind == "bug" and (
                        (b.new and not self.hard) or self.fits(
                            limit if key.verdict == "timeout" else MIN_REPRO_S)):
                    self.tick(f"checking repro {key.id}")
                    error_class = (red.row or {}).get("error_class") if red.row else None
                    outcome, tail = check_repro(dest, key.verdict, error_class, limit)
                    b.repro_status = outcome
                    if outcome != "reproduced":
                        self.log(f"triage: repro of {key.id}: {outcome}\n{tail}")
                    self.check_newer(key, b, dest, error_class, limit)
            localized = self.localize(key, b, dest)
            info_path = dest / "info.json"
            if info_path.is_file():
                info = json.loads(info_path.read_text())
                info["repro_status"] = b.repro_status
                if ablation is not None:
                    info["training_ablation"] = {"part": ablation.part,
                                                 "aot_eager": ablation.aot_eager}
                if localized is not None:
                    info["localization"] = localized.to_json()
                info_path.write_text(json.dumps(info, indent=2, default=str) + "\n")
        for b in self.buckets.values():
            if b.artifact_path is None:  # no bug folder (no graph, dynamic shapes): the finding's
                dirs = [d for _, _, d in sorted(b.members, key=lambda m: (m[0] is None, m[0] or 0))
                        if d]
                b.artifact_path = dirs[0] if dirs else None
        (self.bugs_dir / INDEX).write_text(json.dumps(self.index, indent=2) + "\n")
        self.group()
        self.confirm()
        return write_bugs_table(self.out / BUGS_FILE, list(self.buckets.values()))

    def confirm(self) -> None:
        """Mark the buckets of each bug whose repro.py was run and did not reproduce, none of
        its buckets' having reproduced, `unconfirmed` (`buckets.unconfirmed`): a harness or
        environment failure is never a compiler bug."""
        from campaign.triage.pipeline.buckets import rows_by_bug, unconfirmed

        bugs = rows_by_bug([{"bucket": b.key.id, "bug": b.bug, "b": b}
                            for b in self.buckets.values() if b.kind == "bug"])
        for members in bugs.values():
            if unconfirmed(m["b"].repro_status for m in members):
                for m in members:
                    m["b"].unconfirmed = True


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

    t = _Triage(out_dir, cfg, log, deadline, db, read_faults(root))
    try:
        if progress and t.time_left() > 0:
            from tqdm import tqdm

            t.bar = tqdm(total=round(t.time_left(), 1), unit="s", desc="triage", disable=None,
                         bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s "
                                    "{postfix}")
        t.run(rows)
        table = t.write()
        recorded = t.record()
    finally:
        if t.bar is not None:
            t.bar.close()
        t.close()
    return TriageReport(out_dir, list(t.buckets.values()), table, t.reductions,
                        time.monotonic() - t0, skipped=t.skipped,
                        db=db.path if db is not None else None, recorded=recorded)


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
    t = _Triage(out_dir, cfg, log)
    t.deadline = time.monotonic() + max(cfg.max_seconds, triage_seconds(cfg.budget, None))
    try:
        from campaign.triage.pipeline.reduction import reduce_finding

        red = reduce_finding(case, t.runner(case.backend, t.limit(case.info)), cfg.max_tests,
                             cfg.max_seconds, log=lambda s: log(f"  {s}"))
        t.reductions += 1
        row: dict[str, Any] = {
            "test_id": case.test_id, "backend": case.backend,
            "target": case.info.get("target") or "", "verdict": case.verdict,
            "stage": case.info.get("stage"), "error_sig": case.info.get("error_sig"),
            "backend_config": red.backend_config}
        if case.verdict == "mismatch" and red.status == "reduced":
            key = mismatch_key(case.backend, row["target"], red.graph, red.backend_config)
        else:
            key = crash_key(row)
        t.bucket(key).add(None, case.test_id, str(folder))
        t.best[key] = red
        table = t.write()
    finally:
        t.close()
    return TriageReport(out_dir, list(t.buckets.values()), table, t.reductions,
                        time.monotonic() - t0)


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
