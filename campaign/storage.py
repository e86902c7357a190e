"""The results dataset: Parquet files of RESULT_SCHEMA rows under `<root>/results/`.

Invariant: every file named `part-*.parquet` in `results/` is complete. A batch is written to a
temp file whose name starts with "." (pyarrow.dataset ignores names starting with "." or "_")
and then `os.replace`d into place, so a kill at any moment leaves only whole files plus, at
worst, an ignored temp file. A single long-lived ParquetWriter would not do: killed, it leaves
nothing readable.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from campaign.schema import RESULT_SCHEMA

RESULTS_DIR = "results"
#: columns the sink fills; rows from workers must not set campaign/run_id (finding_dir may be set)
_SINK_COLUMNS = ("campaign", "run_id")
_REQUIRED = tuple(f.name for f in RESULT_SCHEMA if not f.nullable and f.name not in _SINK_COLUMNS)
_KNOWN = frozenset(RESULT_SCHEMA.names)
#: bytes per row assumed before any file was written (for "free at least ..." messages)
ROW_BYTES_GUESS = 2048
#: seconds between retries of a failed flush
RETRY_S = 1.0
#: where rows go that could not be written when the campaign stopped (`spill`), per run
SPILL_ROOT = Path(tempfile.gettempdir()) / "dynsmith-spill"

log = logging.getLogger(__name__)


def write_table(table: pa.Table, path: Path) -> None:
    """Write one Parquet file (the sink's only write; tests wrap it to fail like a full disk)."""
    pq.write_table(table, path)


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


class RowError(ValueError):
    """A result row that does not fit RESULT_SCHEMA (a harness bug: fail loudly)."""


def check_row(row: Mapping[str, Any]) -> None:
    """Raise RowError unless `row` has only schema columns and every non-nullable one set."""
    tid = row.get("test_id", "?")
    unknown = sorted(set(row) - _KNOWN)
    if unknown:
        raise RowError(f"result row {tid}: unknown column {unknown[0]!r}")
    for name in _REQUIRED:
        if _value(row, name) is None:
            raise RowError(f"result row {tid}: column {name!r} is missing or null")


def _value(row: Mapping[str, Any], name: str) -> Any:
    """Column `name` of `row`: an attribute of a `ResultRow` (what the campaign writes: read
    as one, thousands of rows a second cost the driver little), else a mapping's key."""
    return row.get(name) if isinstance(row, dict) else getattr(row, name)


class ResultSink:
    """Buffers result rows of one run and writes each batch as one complete Parquet file
    `results/part-<run_id>-<seq>.parquet`; fills the `campaign` and `run_id` columns (and a null
    `finding_dir` where the row has none).

    `add` flushes by itself once `flush_rows` rows are buffered; `maybe_flush` also flushes when
    `flush_every_s` passed since the last flush; `close` flushes what is left.

    A flush that fails (a full disk, a quota, an I/O error) loses nothing: the rows stay
    buffered, the partial temp file is removed, `blocked` says since when, a one-line warning
    names the directory and the space needed, and `maybe_flush` retries every RETRY_S seconds
    (the driver pauses generation meanwhile). `spill` writes what is still buffered elsewhere
    when the campaign must stop; `recover_spilled` brings it back on resume.
    """

    def __init__(
        self,
        root: Path,
        run_id: str,
        campaign: str,
        *,
        flush_rows: int = 2000,
        flush_every_s: float = 30.0,
        seq_start: int = 0,
    ) -> None:
        self.dir = Path(root) / RESULTS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id
        self.campaign = campaign
        self.flush_rows = flush_rows
        self.flush_every_s = flush_every_s
        self.rows_written = 0
        self.files: list[Path] = []
        self._buffer: list[Mapping[str, Any]] = []
        self._seq = seq_start  #: a resumed run goes on after the files already there
        self._last_flush = time.monotonic()
        self.bytes_written = 0
        #: the error of the flush that failed, and since when writing fails (None: it works)
        self.error: OSError | None = None
        self.blocked_since: float | None = None
        self.failed_flushes = 0
        self.rows_spilled = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def blocked(self) -> bool:
        """Writing fails (the last flush failed): rows wait in memory."""
        return self.blocked_since is not None

    def bytes_needed(self) -> int:
        """About how much free space the buffered rows need (twice their estimated size)."""
        per_row = self.bytes_written / self.rows_written if self.rows_written else ROW_BYTES_GUESS
        return int(2 * per_row * max(len(self._buffer), 1)) + 64 * 1024

    def add(self, row: Mapping[str, Any]) -> None:
        """Buffer `row`: a `campaign.row.ResultRow` as the judge or the driver made it (the
        form it keeps until `flush` writes it to Arrow), or a mapping of its columns (a row
        read back from Parquet)."""
        check_row(row)
        self._buffer.append(row)
        if len(self._buffer) >= self.flush_rows and not self.blocked:
            self.flush()

    def add_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.add(row)

    def _table(self) -> pa.Table:
        """The buffered rows as one Arrow table, the sink's columns filled (`_SINK_COLUMNS`)."""
        rows = self._buffer
        n = len(rows)
        sink = {"campaign": [self.campaign] * n, "run_id": [self.run_id] * n}
        # rows of the campaign are ResultRows (attributes, read in C); a mapping (a row read
        # back from Parquet, a test's) by its keys
        objects = not any(isinstance(row, dict) for row in rows)

        def column(name: str) -> list[Any]:
            if name in sink:
                return sink[name]
            if objects:
                return list(map(attrgetter(name), rows))
            return [_value(row, name) for row in rows]

        return pa.Table.from_pydict({name: column(name) for name in RESULT_SCHEMA.names},
                                    schema=RESULT_SCHEMA)

    def maybe_flush(self) -> Path | None:
        wait = RETRY_S if self.blocked else self.flush_every_s
        if self._buffer and time.monotonic() - self._last_flush >= wait:
            return self.flush()
        return None

    def flush(self) -> Path | None:
        """Write the buffered rows as one file; return its path (None if nothing was buffered,
        or the write failed: then the rows stay buffered and `blocked` is set)."""
        self._last_flush = time.monotonic()
        if not self._buffer:
            return None
        table = self._table()
        final = self.dir / f"part-{self.run_id}-{self._seq:06d}.parquet"
        tmp = self.dir / f".tmp-{final.name}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            write_table(table, tmp)
            os.replace(tmp, final)
        except OSError as e:
            self._failed(e, tmp)
            return None
        if self.blocked:
            log.warning("results: writing to %s works again after %.0f s; %d rows written",
                        self.dir, time.monotonic() - (self.blocked_since or 0.0),
                        len(self._buffer))
        self.error = self.blocked_since = None
        self._seq += 1
        self.rows_written += len(self._buffer)
        try:
            self.bytes_written += final.stat().st_size
        except OSError:
            pass
        self._buffer.clear()
        self.files.append(final)
        return final

    def _failed(self, e: OSError, tmp: Path) -> None:
        try:  # the partial file only takes space
            tmp.unlink()
        except OSError:
            pass
        self.failed_flushes += 1
        first = not self.blocked
        self.error = e
        if first:
            self.blocked_since = time.monotonic()
            free = shutil.disk_usage(self.dir).free if self.dir.is_dir() else 0
            log.warning("results: cannot write to %s (%s): %d rows kept in memory, generation "
                        "paused; free at least %s there (%s free now), retrying",
                        self.dir, describe_error(e), len(self._buffer), _mb(self.bytes_needed()),
                        _mb(free))

    def spill(self, root: Path | None = None) -> Path | None:
        """Write the rows still buffered (writing to `dir` failing) to `root/<run_id>/`, from
        where `recover_spilled` moves them into the results on resume; returns the file, None
        when nothing was buffered. Raises OSError when that fails too."""
        if not self._buffer:
            return None
        d = Path(root or SPILL_ROOT) / self.run_id
        d.mkdir(parents=True, exist_ok=True)
        (d / "origin").write_text(str(self.dir.parent.resolve()))  # for `recover_spilled`
        final = d / f"part-{self.run_id}-{self._seq:06d}.parquet"
        tmp = d / f".tmp-{final.name}"
        write_table(self._table(), tmp)
        os.replace(tmp, final)
        self._seq += 1
        self.rows_spilled = len(self._buffer)
        self._buffer.clear()
        return final

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> ResultSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe_error(e: OSError) -> str:
    """"disk full" for ENOSPC/EDQUOT, else the error's own words (one line)."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk full"
    return e.strerror or str(e).splitlines()[0]


def recover_spilled(root: Path, spill_root: Path | None = None) -> int:
    """Move the files `ResultSink.spill` wrote for the campaign in `root` into
    `<root>/results/` (resume); returns how many. Raises OSError when they cannot be moved
    (the disk still full)."""
    base = Path(spill_root or SPILL_ROOT)
    origin = str(Path(root).resolve())
    n = 0
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        try:
            if (d / "origin").read_text() != origin:
                continue
        except OSError:
            continue
        dest = Path(root) / RESULTS_DIR
        dest.mkdir(parents=True, exist_ok=True)
        for f in sorted(d.glob("part-*.parquet")):
            tmp = dest / f".tmp-{f.name}"
            shutil.copyfile(f, tmp)
            os.replace(tmp, dest / f.name)
            f.unlink()
            n += 1
        shutil.rmtree(d, ignore_errors=True)
    return n


def results_dataset(root: Path) -> pads.Dataset:
    """The results of every run under `root` as a pyarrow dataset (temp files are ignored)."""
    return pads.dataset(Path(root) / RESULTS_DIR, format="parquet", schema=RESULT_SCHEMA,
                        ignore_prefixes=[".", "_"])


def read_results(root: Path) -> pa.Table:
    """All result rows under `root` (an empty table with the schema if there are none)."""
    if not (Path(root) / RESULTS_DIR).is_dir():
        return RESULT_SCHEMA.empty_table()
    return results_dataset(root).to_table()


_PART = re.compile(r"part-(?P<run>.+)-(?P<seq>\d{6})\.parquet")


@dataclass
class ExistingRun:
    """What a results dir already holds (for `campaign.resume`)."""

    run_id: str | None  #: the run id of its rows (None: no rows)
    rows: int
    test_ids: set[str]
    next_seq: int  #: the first file sequence number not used yet


def existing_run(root: Path) -> ExistingRun:
    """Scan `<root>/results/` (complete files only). Raises ValueError if it holds rows of
    several runs (resume continues one run)."""
    d = Path(root) / RESULTS_DIR
    seqs = [int(m.group("seq")) for p in (d.iterdir() if d.is_dir() else [])
            if (m := _PART.fullmatch(p.name))]
    table = read_results(root).select(["run_id", "test_id"])
    runs = set(table.column("run_id").to_pylist())
    if len(runs) > 1:
        raise ValueError(f"{d} holds rows of {len(runs)} runs ({', '.join(sorted(runs))})")
    return ExistingRun(next(iter(runs), None), table.num_rows,
                       set(table.column("test_id").to_pylist()), max(seqs, default=-1) + 1)


def sweep_files(root: Path) -> list[str]:
    """Every complete results file of every campaign under `root` (a campaign's output dir, a
    Hydra multirun dir, or any dir above them), sorted."""
    return sorted(str(p) for p in Path(root).rglob(f"{RESULTS_DIR}/part-*.parquet"))


def read_sweep(root: Path) -> pa.Table:
    """The results of every campaign under `root` as one table (they share RESULT_SCHEMA)."""
    files = sweep_files(root)
    if not files:
        return RESULT_SCHEMA.empty_table()
    return pads.dataset(files, format="parquet", schema=RESULT_SCHEMA).to_table()
