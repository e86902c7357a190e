"""The bug database: one record per bug across campaigns (`triage.db`, docs/triage.md).

A *bug* is a set of bucket ids (`BucketKey.id`): the buckets a triage's bugs table groups
under one value of its `bug` column, or, in a table without that column, each bucket alone.
Buckets are matched across campaigns by id: a triage's group whose buckets hold one already in
the database adds its other buckets to that bug; a group of unseen buckets is a new bug.

Layout: a directory (a Parquet dataset) holding
  - `bugdb.parquet`: one row per bug (`DB_SCHEMA`), replaced whole on every change: written to
    a temporary file in the same directory, flushed to disk, then renamed over the old one
    (`os.replace` is atomic), so a reader (a campaign starting, the report) always sees a whole
    table, the last complete one, and a writer killed mid-write loses nothing but its own
    change;
  - `.lock`: writers hold an exclusive `flock` on it for the whole read-change-write, so
    concurrent triages (a sweep's jobs) each add their buckets and none overwrites another's.
    Readers take no lock.

Each bug row keeps its *sightings* (one per bucket and run: the run's output dir, the earliest
time its rows were seen, how many result rows, the compiler versions installed when it was
triaged); first and last seen, the test and campaign counts and the versions seen are derived
from them on every write, so they never disagree. A triage of a run already recorded replaces
that run's sightings (triaging a run twice counts it once).

Statuses (`STATUSES`): `new` (seen in one campaign, not looked at), `unconfirmed` (a new
compiler-bug bucket whose repro.py was run and did not reproduce: a harness or environment
failure until it does; not re-checked, holds back no tests, and not known to the next triage,
which reduces and checks it again: `new` once its repro.py reproduces), `known` (seen again in a
later campaign, or looked at), `fixed` (its repro.py stopped reproducing on a re-check:
`campaign.triage.bugdb.recheck`), `ours` (a bug of dynsmith: `invalid` buckets), `known-upstream`
(already in the compiler's tracker), `limitation` (documented behaviour, not a bug:
`unsupported` buckets start there), `merged` (the same bug as `merged_into`). A `new` bug seen
by a later campaign becomes `known`; a `fixed` one seen again becomes `known` (a regression,
said in its note); the others are kept as a person set them (`set_status`). Open bugs, the ones
a re-check runs, are `OPEN`.
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from campaign.triage.pipeline.buckets import BucketKey

STATUSES = ("new", "unconfirmed", "known", "fixed", "ours", "known-upstream", "limitation",
            "merged")
#: the statuses a re-check runs (a bug still to be fixed upstream)
OPEN = ("new", "known", "known-upstream")
#: the table inside the database directory, and the lock writers hold
TABLE = "bugdb.parquet"
LOCK = ".lock"
#: where a campaign's database goes when `triage.db` is unset and its output dir lies under
#: the runs folder (Hydra's `runs/<campaign>/<time>`, relative to the working directory)
RUNS = Path("runs")
DEFAULT_NAME = "bugdb"
#: `triage.db` values that turn the database off
OFF = ("", "off", "none", "false")

_TS = pa.timestamp("ms", tz="UTC")
_BUCKET = pa.struct([
    ("bucket", pa.string()), ("backend", pa.string()), ("target", pa.string()),
    ("verdict", pa.string()), ("stage", pa.string()), ("error_sig", pa.string()),
    ("pattern", pa.string()), ("backend_config", pa.string()), ("kind", pa.string())])
_SIGHTING = pa.struct([
    ("run", pa.string()), ("bucket", pa.string()), ("time", _TS), ("triaged", _TS),
    ("count", pa.int64()), ("versions", pa.list_(pa.string()))])
DB_SCHEMA = pa.schema([
    ("bug", pa.string()), ("status", pa.string()), ("merged_into", pa.string()),
    ("note", pa.string()), ("title", pa.string()),
    ("buckets", pa.list_(_BUCKET)),
    ("first_run", pa.string()), ("first_seen", _TS), ("last_run", pa.string()),
    ("last_seen", _TS), ("tests", pa.int64()), ("campaigns", pa.int32()),
    ("versions", pa.list_(pa.string())),
    ("graph", pa.string()), ("graph_insts", pa.int32()), ("graph_backend", pa.string()),
    ("repro", pa.string()), ("repro_status", pa.string()), ("report", pa.string()),
    ("checked", _TS), ("checked_versions", pa.list_(pa.string())),
    ("check_outcome", pa.string()),
    ("sightings", pa.list_(_SIGHTING)),
])
#: columns a table must have to be a bug database (others missing are filled with nulls:
#: a table from an older dynsmith)
_REQUIRED = ("bug", "status", "buckets")


class BugDbError(Exception):
    """The database cannot be used: a one-line message naming the path."""


@dataclass
class Sighting:
    """One bucket of a bug in one run: `time` the earliest row, `triaged` when recorded."""

    run: str
    bucket: str
    time: datetime
    triaged: datetime
    count: int
    versions: list[str] = field(default_factory=list)


@dataclass
class Bug:
    """One bug: its buckets (key fields, `bucket` the id), status, sightings, and what a
    developer needs (the smallest reduced graph seen, its repro.py, report.md). The fields
    from `first_run` to `versions` are derived from `sightings` (`derive`)."""

    bug: str
    status: str = "new"
    merged_into: str | None = None
    note: str | None = None
    title: str | None = None
    buckets: list[dict[str, Any]] = field(default_factory=list)
    first_run: str | None = None
    first_seen: datetime | None = None
    last_run: str | None = None
    last_seen: datetime | None = None
    tests: int = 0
    campaigns: int = 0
    versions: list[str] = field(default_factory=list)
    graph: str | None = None
    graph_insts: int | None = None
    graph_backend: str | None = None
    repro: str | None = None
    #: how `repro` fared when last run (the triage's check, or a re-check): a re-check marks
    #: the bug fixed only when it had reproduced
    repro_status: str | None = None
    report: str | None = None
    checked: datetime | None = None
    checked_versions: list[str] = field(default_factory=list)
    check_outcome: str | None = None
    sightings: list[Sighting] = field(default_factory=list)

    @property
    def bucket_ids(self) -> list[str]:
        return [b["bucket"] for b in self.buckets]

    def keys(self) -> list[BucketKey]:
        return [BucketKey(b["backend"], b["target"] or "", b["verdict"], b["stage"],
                          b["error_sig"], b["pattern"], b["backend_config"] or "")
                for b in self.buckets]

    def derive(self) -> None:
        """Recompute first/last seen, counts and versions from the sightings."""
        s = sorted(self.sightings, key=lambda x: (x.time, x.run))
        self.first_run, self.first_seen = (s[0].run, s[0].time) if s else (None, None)
        self.last_run, self.last_seen = (s[-1].run, s[-1].time) if s else (None, None)
        self.tests = sum(x.count for x in s)
        self.campaigns = len({x.run for x in s})
        self.versions = sorted({v for x in s for v in x.versions})

    def row(self) -> dict[str, Any]:
        self.derive()
        return asdict(self)

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Bug:
        row = dict(row)
        row["sightings"] = [Sighting(**s) for s in row.get("sightings") or []]
        for k in ("buckets", "versions", "checked_versions"):
            row[k] = row.get(k) or []
        given: dict[str, Any] = {k: row[k] for k in cls.__dataclass_fields__ if k in row}
        return cls(**given)


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


# ---- where ---------------------------------------------------------------------------------------

def resolve(db: str | None, out_dir: Path | None = None) -> Path | None:
    """The database a campaign writing to `out_dir` uses: `db` when set (an `OFF` value: none);
    unset (None), `runs/bugdb` when `out_dir` lies under the runs folder, else none."""
    if db is not None:
        return None if str(db).strip().lower() in OFF else Path(db)
    if out_dir is None:
        return None
    runs = RUNS.resolve()
    out = Path(out_dir).resolve()
    return RUNS / DEFAULT_NAME if out != runs and out.is_relative_to(runs) else None


# ---- the database --------------------------------------------------------------------------------

T = TypeVar("T")


@dataclass
class BugDb:
    """The database at directory `path` (module doc). `open` checks it; `read` takes no lock;
    `update` is the only way to change it (locked, atomic)."""

    path: Path

    @property
    def table(self) -> Path:
        return self.path / TABLE

    @classmethod
    def open(cls, path: str | Path, create: bool = True) -> BugDb:
        """The database at `path`, its directory made when `create`; BugDbError when the path
        is not a directory, cannot be made, or holds an unreadable table."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise BugDbError(f"triage.db: {path} is a file, not a bug database directory")
        if not path.exists():
            if not create:
                raise BugDbError(f"triage.db: {path}: no such bug database")
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise BugDbError(f"triage.db: cannot create {path}: {e.strerror or e}") from None
        db = cls(path)
        db.read()  # an unreadable table fails here, before any work is done
        return db

    def read(self) -> dict[str, Bug]:
        """Every bug by id (empty for a new database). BugDbError when the table is
        unreadable; the file is left as it is."""
        if not self.table.is_file():
            return {}
        try:
            # one open file: a writer's rename mid-read cannot mix two tables (a path read
            # twice, for its size and then its pages, could)
            with open(self.table, "rb") as f:
                table = pq.ParquetFile(f).read()
        except (OSError, pa.ArrowException) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise BugDbError(f"triage.db: {self.table} is not a readable bug database "
                             f"({reason}); it was left as it is") from None
        missing = [c for c in _REQUIRED if c not in table.column_names]
        if missing:
            raise BugDbError(f"triage.db: {self.table} is not a bug database (no column "
                             f"{missing[0]!r}); it was left as it is")
        return {r["bug"]: Bug.of_row(r) for r in table.to_pylist()}

    def write(self, bugs: dict[str, Bug]) -> None:
        """Replace the table with `bugs` (temporary file, fsync, rename; a killed writer's
        temporary files go). Call under `lock`."""
        rows = [b.row() for b in sorted(bugs.values(), key=_order)]
        table = pa.Table.from_pylist(rows, schema=DB_SCHEMA)
        for stale in self.path.glob(f".{TABLE}.tmp-*"):  # of a writer killed mid-write
            stale.unlink(missing_ok=True)
        tmp = self.path / f".{TABLE}.tmp-{os.getpid()}"
        try:
            pq.write_table(table, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, self.table)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        try:  # the rename itself on disk
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive: one writer at a time (other processes wait)."""
        with open(self.path / LOCK, "a") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def update(self, change: Callable[[dict[str, Bug]], T]) -> T:
        """Read, `change` the bugs in place, write: under the lock, so no concurrent update is
        lost. Returns what `change` returns."""
        with self.lock():
            bugs = self.read()
            out = change(bugs)
            self.write(bugs)
            return out

    # ---- what a triage reads -------------------------------------------------------------
    def known_keys(self, run: str | None = None) -> list[BucketKey]:
        """The keys of the buckets known before run `run` (an output dir, resolved): every
        bucket but those seen only in that run (a second triage of one run finds its own
        buckets new again, and reuses its reductions) and those of unconfirmed bugs (checked
        again)."""
        out = []
        for b in self.read().values():
            if b.status == "unconfirmed":
                continue
            for key, ref in zip(b.keys(), b.buckets, strict=True):
                runs = {s.run for s in b.sightings if s.bucket == ref["bucket"]}
                if not runs or runs - {run}:
                    out.append(key)
        return out

    def set_status(self, bug: str, status: str, note: str | None = None,
                   merged_into: str | None = None) -> Bug:
        """Set a bug's status (and note; `merged` needs `merged_into`, another bug)."""
        if status not in STATUSES:
            raise BugDbError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        if (status == "merged") != (merged_into is not None):
            raise BugDbError("status merged needs --merged-into (and only merged takes it)")

        def change(bugs: dict[str, Bug]) -> Bug:
            if bug not in bugs:
                raise BugDbError(f"triage.db: {self.table}: no bug {bug!r}")
            if merged_into is not None and (merged_into not in bugs or merged_into == bug):
                raise BugDbError(f"triage.db: {self.table}: cannot merge {bug!r} into "
                                 f"{merged_into!r} (no such other bug)")
            b = bugs[bug]
            b.status, b.merged_into = status, merged_into
            if note is not None:
                b.note = note
            return b

        return self.update(change)


def _order(b: Bug) -> tuple[Any, ...]:
    return (b.status not in OPEN, b.first_seen is None, b.first_seen or now(), b.bug)
