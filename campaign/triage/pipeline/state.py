"""What the triage's steps share: the output, the known bugs, the buckets and their
representatives, and the sandboxed runners the steps re-run findings on.

`TriageState` is the blackboard of the pipeline (`campaign.triage.pipeline.driver`): each
step reads the fields it `needs` and fills the ones it `gives`. It owns three invariants:
a bucket is made once per key (`bucket`), and knows at birth whether it is new (not a known
bug's, the database's or a note trigger's); a bucket's representative is the smallest
reduction offered for it (`offer`); and one runner serves each (backend, limit) pair until
`close`.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.triage.config import TriageConfig
from campaign.triage.pipeline.buckets import (
    Bucket,
    BucketKey,
    config_covers,
    known_bucket_ids,
    known_bucket_keys,
)
from campaign.triage.pipeline.note_known import NoteForms

if TYPE_CHECKING:
    from campaign.env_fault import EnvFault
    from campaign.triage.bugdb.sightings import Recorded
    from campaign.triage.bugdb.store import BugDb
    from campaign.triage.pipeline.reduction import Reduction

BUGS_DIR = "bugs"
#: every finding folder reduced so far -> its bucket (`bugs/reduced.json`): a second triage of
#: the same output reuses the reductions
INDEX = "reduced.json"


@dataclass(frozen=True)
class Decision:
    """What the reduce step made of one finding folder: the bucket it belongs to, and its
    reduction (None: a known bug's, not reduced)."""

    key: BucketKey
    red: Reduction | None


@dataclass
class Folder:
    """A bucket's bug folder as the write step left it: `cached` when an earlier triage of
    this output wrote it (its repro checked or not, its localization done or not)."""

    dest: Path
    cached: bool


class Runners:
    """The sandboxed runners of the backends the triage re-runs findings on, one per
    (backend spec, limit); under a hard deadline each ends its runs by it."""

    def __init__(self, cfg: TriageConfig, deadline: float | None):
        self.cfg = cfg
        self.deadline = deadline
        self._runners: dict[tuple[str, float], Any] = {}

    def limit(self, info: dict[str, Any]) -> float:
        """The sandbox limit a finding is re-run at: a timeout's, the limit the campaign
        confirmed it at (still no result after it reproduces it); else `triage.timeout_s`."""
        from campaign.triage.pipeline.reduction import confirmed_limit

        if info.get("verdict") == "timeout":
            return confirmed_limit(info, self.cfg.timeout_s)
        return self.cfg.timeout_s

    def get(self, spec: str, timeout_s: float | None = None) -> Any:
        """The runner of backend `spec` at `timeout_s` (default `triage.timeout_s`)."""
        from campaign.triage.pipeline.reduction import BackendRunner

        limit = self.cfg.timeout_s if timeout_s is None else timeout_s
        if (spec, limit) not in self._runners:
            runner = BackendRunner(spec, timeout_s=limit)
            if self.deadline is not None:
                runner.deadline = self.deadline
            self._runners[(spec, limit)] = runner
        return self._runners[(spec, limit)]

    def close(self) -> None:
        for r in self._runners.values():
            r.close()
        self._runners.clear()


@dataclass
class TriageState:
    """The triage's shared state (module doc). Built by `TriageState.open`."""

    out: Path
    cfg: TriageConfig
    log: Callable[[str], None]
    runners: Runners
    #: the finding rows to triage, oldest first (the recognize step takes the environment
    #: faults' out)
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: the environment faults the campaign named (`campaign.env_fault`): their rows are
    #: bucketed apart (kind `env`), never reduced nor taken for compiler bugs
    env_faults: list[EnvFault] = field(default_factory=list)
    db: BugDb | None = None
    buckets: dict[BucketKey, Bucket] = field(default_factory=dict)
    #: ids of the known buckets, and their keys: a row whose configuration holds a known
    #: bucket's (reduced) options is that bucket's
    known: set[str] = field(default_factory=set)
    known_keys: list[BucketKey] = field(default_factory=list)
    #: the findings' notes (`triage.findings`): bucket id -> the note whose trigger it is
    findings: dict[str, str] = field(default_factory=dict)
    note_forms: NoteForms = field(default_factory=lambda: NoteForms({}, {}))
    #: the notes' causes (`cause_probe`) and, per note, the trigger still failing here (None:
    #: none does), once re-run
    note_probes: list[Any] = field(default_factory=list)
    live_triggers: dict[str, str | None] = field(default_factory=dict)
    #: finding folder -> what the reduce step made of it
    decisions: dict[str, Decision] = field(default_factory=dict)
    reductions: int = 0
    #: bucket key -> the Reduction that represents it (the smallest reduced graph)
    best: dict[BucketKey, Any] = field(default_factory=dict)
    #: bucket key -> its bug folder (the write step)
    folders: dict[BucketKey, Folder] = field(default_factory=dict)
    #: finding folder -> its reduction's entry (`INDEX`), this triage's and earlier ones'
    index: dict[str, dict[str, Any]] = field(default_factory=dict)
    table: Path | None = None
    recorded: Recorded | None = None
    _seen: tuple[Any, Any] | None = None

    @property
    def bugs_dir(self) -> Path:
        return self.out / BUGS_DIR

    @classmethod
    def open(cls, out: Path, cfg: TriageConfig, log: Callable[[str], None],
             deadline: float | None = None, db: BugDb | None = None,
             env_faults: list[EnvFault] | None = None) -> TriageState:
        """The state of a triage writing to `out`: the known bugs of `triage.known`, the
        database and the notes, and the reductions an earlier triage of it made."""
        s = cls(out, cfg, log, Runners(cfg, deadline), env_faults=list(env_faults or []),
                db=db)
        s.known = known_bucket_ids(list(cfg.known))
        s.known_keys = known_bucket_keys(list(cfg.known))
        if db is not None:
            keys = db.known_keys(str(out.resolve()))
            s.known |= {k.id for k in keys}
            s.known_keys += keys
        s.findings = s._note_keys()
        s.index = s._load_index()
        return s

    def _note_keys(self) -> dict[str, str]:
        """The notes' trigger keys into `known`/`known_keys`; bucket id -> finding. A notes
        dir that cannot be read costs its keys (a line in the log), not the triage."""
        from campaign.triage.pages.notes import NotesError
        from campaign.triage.pipeline.note_known import findings_dir, known_note_keys, note_probes

        try:
            notes = known_note_keys(findings_dir(self.cfg.findings))
            self.note_probes = note_probes(findings_dir(self.cfg.findings))
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

    def add(self, key: BucketKey, row: dict[str, Any]) -> Bucket:
        """Put `row` into the bucket of `key`."""
        b = self.bucket(key)
        b.add(row.get("ts"), row["test_id"], row.get("finding_dir"))
        return b

    def offer(self, key: BucketKey, red: Any) -> None:
        """Keep `red` as the bucket's representative if it is the smallest so far."""
        from ir.shrink.reducer import size_of

        cur = self.best.get(key)
        if cur is None or (red.status == "reduced" and (cur.status != "reduced" or
                                                       size_of(red.graph) < size_of(cur.graph))):
            self.best[key] = red

    def limit(self, info: dict[str, Any]) -> float:
        return self.runners.limit(info)

    def runner(self, spec: str, timeout_s: float | None = None) -> Any:
        return self.runners.get(spec, timeout_s)

    def explained(self, row: dict[str, Any], keys: list[BucketKey]) -> BucketKey | None:
        """The most specific of `keys` whose configuration the row's holds, or None."""
        config = row.get("backend_config") or ""
        fits = [k for k in keys if config_covers(k.config, config)]
        return max(fits, key=lambda k: (k.config.count("&") + bool(k.config), k.config),
                   default=None)

    def index_entry(self, finding_dir: str, key: BucketKey, red: Any) -> None:
        self.index[finding_dir] = {
            "bucket": key.id, "key": json.loads(key.text()), "status": red.status,
            "original_insts": red.original_insts, "reduced_insts": red.reduced_insts,
            "tests": red.summary.get("tests"),
            "seconds": red.summary.get("total_seconds", red.summary.get("seconds"))}

    def cached(self, finding_dir: str) -> Reduction | None:
        """A reduction an earlier triage of this output made, rebuilt from its bug folder."""
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

    def _info_path(self, key: BucketKey) -> Path:
        folder = self.folders.get(key)
        return (folder.dest if folder else self.bugs_dir / key.id) / "info.json"

    def info(self, key: BucketKey) -> dict[str, Any]:
        """The info.json of bucket `key`'s bug folder ({} when there is none)."""
        path = self._info_path(key)
        return json.loads(path.read_text()) if path.is_file() else {}

    def update_info(self, key: BucketKey, **fields: Any) -> None:
        """Set `fields` in the info.json of bucket `key`'s bug folder, if it has one: what a
        step found there stays for the next triage of this output."""
        path = self._info_path(key)
        if not path.is_file():
            return
        info = json.loads(path.read_text())
        info.update(fields)
        path.write_text(json.dumps(info, indent=2, default=str) + "\n")

    def seen_sources(self) -> tuple[Any, Any]:
        """The bug database's bugs and the version matrix (next to the findings' notes), for
        the versions a bug was seen on (`campaign.triage.pages.environment`); read once, None
        for one that is not there or cannot be read."""
        if self._seen is None:
            from campaign.triage.bugdb.matrix import MATRIX_FILE, Matrix
            from campaign.triage.pipeline.note_known import findings_dir

            bugs = matrix = None
            try:
                bugs = self.db.read() if self.db is not None else None
                notes = findings_dir(self.cfg.findings)
                matrix = Matrix.read(notes / MATRIX_FILE) if notes is not None else None
            except Exception as e:  # versions are a report's detail, never the triage's end
                self.log(f"triage: the versions seen are this run's only: {e}")
            self._seen = (bugs, matrix)
        return self._seen

    def close(self) -> None:
        self.runners.close()
