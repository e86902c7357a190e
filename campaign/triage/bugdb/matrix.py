"""The version matrix: every open finding's standalone reproducer run under each interpreter
given (a venv per torch), one cell per finding and version: `reproduces`, `fixed` or
`errors` (`python -m campaign.triage matrix --python PY [--python PY ...]`).

A finding is a note of docs/findings (`campaign.triage.pages.notes`) whose status is `MATRIX`
and that has a `repro:` field (`campaign.triage.pages.note_repro`: the script, how its output
reads). Each interpreter is probed once for its versions (`runner.probe`: torch, onnxruntime,
tvm, as it imports them); its column is named by its torch (`torch 2.14.1`). Each repro runs
in a fresh process of that interpreter, in a temporary directory of its own, killed with its
process group past its time limit (`runner.run_script`), `jobs` at a time.

The matrix is data, `MATRIX_FILE` (JSON, beside the notes): one column per version, each with
the interpreter, its versions, when it ran, and its cells (outcome, the deciding line, the
seconds). A run replaces the columns of the versions it ran and the cells of the findings it
ran in them (a run of one finding keeps the others' cells); the file is rewritten whole under
a lock (read, merge, write to a temporary file, rename), so concurrent runs lose nothing.
docs/findings.md shows one column per version (`campaign.triage.pages.findings_page`).

A version *fixed* a finding when its cell is `fixed` and the cell of an older version (by
torch version) is `reproduces` (`Matrix.fixed_in`).
"""
from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from campaign.triage.bugdb.runner import Interpreter, parallel, probe, run_script, tail
from campaign.triage.pages.note_repro import judge
from campaign.triage.pages.notes import Note

#: the note statuses the matrix runs: the open ones, and the fixed ones (a regression shows)
MATRIX = ("new", "known", "known-upstream", "fixed")
#: the matrix's file name, in the notes directory
MATRIX_FILE = "matrix.json"
#: seconds one repro may run by default (Inductor's first compile in a process takes ~20)
TIMEOUT_S = 600.0
#: the output kept per cell: its last lines, at most this many characters
TAIL_LINES, TAIL_CHARS = 8, 800


@dataclass(frozen=True)
class Cell:
    """One finding under one version: `outcome` (`note_repro.OUTCOMES`), `why` the output line
    that decided it, `seconds` the run's, `tail` the run's last lines (the evidence)."""

    outcome: str
    why: str = ""
    seconds: float = 0.0
    tail: str = ""


@dataclass
class Column:
    """One version's runs: the interpreter, its versions (`runner.Interpreter`), when its
    last run started (ISO time, UTC), and a cell per finding run (the latest of each)."""

    label: str
    python: str
    versions: dict[str, str | None]
    errors: dict[str, str] = field(default_factory=dict)
    ran: str = ""
    cells: dict[str, Cell] = field(default_factory=dict)

    def torch_key(self) -> tuple[Any, ...]:
        """The column's sort key: its torch version, oldest first (unparsable ones last)."""
        from packaging.version import InvalidVersion, Version

        try:
            return (0, Version(self.versions.get("torch") or ""), self.label)
        except InvalidVersion:
            return (1, self.label)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cells"] = {k: asdict(c) for k, c in sorted(self.cells.items())}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Column:
        cells = {k: Cell(**c) for k, c in (d.get("cells") or {}).items()}
        return cls(d["label"], d.get("python", ""), dict(d.get("versions") or {}),
                   dict(d.get("errors") or {}), d.get("ran", ""), cells)


@dataclass
class Matrix:
    """The columns, oldest torch first (`Column.torch_key`)."""

    columns: list[Column] = field(default_factory=list)

    def merge(self, new: Column) -> None:
        """Put in (a copy of) `new`: a column of its label keeps its other findings' cells."""
        old = next((c for c in self.columns if c.label == new.label), None)
        cells = dict(new.cells)
        if old is not None:
            self.columns.remove(old)
            cells = {**old.cells, **cells}
        self.columns.append(replace(new, cells=cells))
        self.columns.sort(key=Column.torch_key)

    def cell(self, label: str, bug: str) -> Cell | None:
        col = next((c for c in self.columns if c.label == label), None)
        return col.cells.get(bug) if col is not None else None

    def fixed_in(self, bug: str) -> list[str]:
        """The versions that fixed `bug`: its cell `fixed` where an older version's is
        `reproduces`."""
        out, seen = [], False
        for col in self.columns:
            c = col.cells.get(bug)
            if c is None:
                continue
            if c.outcome == "fixed" and seen:
                out.append(col.label)
            seen = c.outcome == "reproduces" or (seen and c.outcome != "fixed")
        return out

    def versions_seen(self, bug: str) -> list[str]:
        """The labels of the versions whose cell of `bug` is `reproduces`."""
        return [c.label for c in self.columns
                if (cell := c.cells.get(bug)) is not None and cell.outcome == "reproduces"]

    def dumps(self) -> str:
        return json.dumps({"columns": [c.as_dict() for c in self.columns]}, indent=1,
                          sort_keys=False) + "\n"

    @classmethod
    def loads(cls, text: str) -> Matrix:
        data = json.loads(text)
        m = cls([Column.from_dict(c) for c in data.get("columns") or []])
        m.columns.sort(key=Column.torch_key)
        return m

    @classmethod
    def read(cls, path: Path) -> Matrix:
        """The matrix at `path`; an empty one when there is no file."""
        path = Path(path)
        return cls.loads(path.read_text(encoding="utf-8")) if path.is_file() else cls()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on the directory of `path` (no lock file left among the notes)."""
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def save(path: Path, columns: list[Column]) -> Matrix:
    """Merge `columns` into the matrix at `path` (made if missing) under its lock; returns
    what was written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        m = Matrix.read(path)
        for col in columns:
            m.merge(col)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(m.dumps(), encoding="utf-8")
        os.replace(tmp, path)
    return m


def findings(notes: dict[str, Note], only: list[str] | None = None) -> list[Note]:
    """The notes the matrix runs (`MATRIX` statuses, a `repro:`), those in `only` when given
    (an id or its `F<nn>` prefix), by id."""
    def wanted(bug: str) -> bool:
        return not only or any(bug == o or bug.startswith(o + "-") for o in only)

    return [n for _, n in sorted(notes.items())
            if n.status in MATRIX and n.repro is not None and wanted(n.bug)]


def run_note(note: Note, notes_dir: Path, python: str, timeout_s: float = TIMEOUT_S) -> Cell:
    """Run `note`'s repro once under `python` and judge it (`note_repro.judge`)."""
    assert note.repro is not None
    try:
        run = run_script(python, note.repro.path(notes_dir), note.repro.argv(), None, timeout_s)
    except OSError as e:  # no such interpreter, not executable
        return Cell("errors", f"{python}: {type(e).__name__}: {e.strerror or e}")
    outcome, why = judge(note.repro, run, timeout_s)
    return Cell(outcome, why, round(run.seconds, 1), tail(run.text(), TAIL_LINES)[-TAIL_CHARS:])


def run_column(interp: Interpreter, todo: list[Note], notes_dir: Path,
               timeout_s: float = TIMEOUT_S, jobs: int = 1,
               log: Callable[[str], None] = print) -> Column:
    """One interpreter's column over the findings `todo`."""
    col = Column(interp.label, interp.python, dict(interp.versions), dict(interp.errors),
                 datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def one(note: Note) -> tuple[str, Cell]:
        cell = run_note(note, notes_dir, interp.python, timeout_s)
        log(f"{interp.label:<22} {note.bug:<50} {cell.outcome:<10} {cell.seconds:>6.1f}s  "
            f"{cell.why[:100]}")
        return note.bug, cell

    col.cells = dict(parallel(one, todo, jobs))
    return col


def run_matrix(notes: dict[str, Note], notes_dir: Path, pythons: list[str],
               out: Path | None, only: list[str] | None = None, timeout_s: float = TIMEOUT_S,
               jobs: int = 1, log: Callable[[str], None] = print) -> Matrix:
    """Every finding (`findings`) under each of `pythons`; each column is saved into `out`
    (None: not saved) as soon as it is done. Returns the columns run (a `Matrix`)."""
    todo = findings(notes, only)
    ran = Matrix()
    for python in pythons:
        interp = probe(python)
        log(f"matrix: {python}: {interp.label}; "
            + ", ".join(f"{k} {v}" if v else f"{k} missing ({interp.errors.get(k, '?')})"
                        for k, v in interp.versions.items())
            + (f"; {interp.errors['python']}" if "python" in interp.errors else ""))
        col = run_column(interp, todo, notes_dir, timeout_s, jobs, log)
        ran.merge(col)
        if out is not None:
            save(out, [col])
    return ran
