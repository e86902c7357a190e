"""Re-check: run every open bug's repro.py on the compilers installed now and mark the bugs
that no longer reproduce `fixed` (`python -m campaign.triage recheck DB`; what a team runs after
upgrading TVM or torch).

Each repro.py runs in a fresh process where importing dynsmith fails
(`campaign.triage.pipeline.repro.check_repro`), with a timeout (a timeout bug's own wait plus its
imports). A bug imported from the findings' notes (no repro.py) runs its note's `repro:` script
as the version matrix does (`campaign.triage.bugdb.matrix.run_note`: `reproduces` is
`reproduced`, `fixed` is `not reproduced`, `errors` is `error`). Both go through
`campaign.triage.bugdb.runner` (a process group of its own, killed past its limit), under this
interpreter or `python` (then the versions recorded are that interpreter's, `runner.probe`).
The outcome and the versions are written to the bug (`checked`, `checked_versions`,
`check_outcome`), one bug at a time under the database's lock, so a re-check cut short keeps
what it checked. A bug is marked fixed only when its repro.py had reproduced it (the triage's
check, `repro_status`, or an earlier re-check) and now says `NOT REPRODUCED` (the compiler
agrees with the reference) twice in a row (a flaky failure is no fix); a repro that never
reproduced tells nothing, and a different failure or an error leaves the bug open, with that
outcome.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from campaign.triage.bugdb.store import OPEN, Bug, BugDb, now
from campaign.triage.bugdb.versions import installed

if TYPE_CHECKING:
    from campaign.triage.pages.notes import Note

#: seconds a timeout bug's repro.py gets beyond its own wait (imports, the watchdog's grace)
IMPORT_S = 60.0
#: a note repro's outcome (`matrix.Cell.outcome`) as a repro.py's (`check_repro`)
NOTE_OUTCOMES = {"reproduces": "reproduced", "fixed": "not reproduced", "errors": "error"}


@dataclass
class Checked:
    """One bug's re-check: the repro's outcome (`check_repro`'s, or `no repro`), the versions
    it ran on, and the bug's status after it."""

    bug: str
    outcome: str
    versions: list[str]
    status: str
    tail: str = ""

    def line(self) -> str:
        return f"{self.bug:<40} {self.status:<15} {self.outcome:<18} {', '.join(self.versions)}"


def recheck(db: BugDb, timeout_s: float = 300.0, bugs: list[str] | None = None,
            log: Callable[[str], None] = print, notes_dir: Path | None = None,
            python: str | None = None) -> list[Checked]:
    """Re-check the open bugs of `db` (those named in `bugs`, when given), under `python`
    (None: this interpreter); a bug without repro.py runs the `repro:` of its note in
    `notes_dir`, when there is one."""
    from campaign.triage.bugdb.runner import probe
    from campaign.triage.pipeline.repro import check_repro

    todo = [b for b in db.read().values() if b.status in OPEN and (not bugs or b.bug in bugs)]
    notes = _notes(notes_dir) if notes_dir is not None else {}
    stack = probe(python).stack() if python is not None else None
    out = []
    for bug in todo:
        folder = Path(bug.repro).parent if bug.repro else None
        backend = bug.graph_backend or (bug.buckets[0]["backend"] if bug.buckets else "")
        versions = stack if stack is not None else installed(backend)
        note = notes.get(bug.bug)
        if (folder is None or not (folder / "repro.py").is_file()) and note is not None \
                and note.repro is not None:
            outcome, tail = _run_note(note, notes_dir, python, timeout_s)
            if outcome == "not reproduced" and bug.repro_status == "reproduced":
                outcome, tail = _run_note(note, notes_dir, python, timeout_s)
            out.append(_save(db, bug.bug, outcome, versions, tail))
            log(out[-1].line())
            continue
        if folder is None or not (folder / "repro.py").is_file():
            out.append(_save(db, bug.bug, "no repro", versions, ""))
            log(out[-1].line())
            continue
        info = _info(folder)
        row = info.get("row") or {}
        verdict = info.get("verdict") or row.get("verdict") or bug.buckets[0]["verdict"]
        limit = timeout_s
        if verdict == "timeout":
            wait = info.get("repro_wait_s") or {}
            limit = (float(wait.get("confirmed_limit_s", 60.0)) + float(wait.get("cold_start_s", 0.0))
                     + IMPORT_S)
        outcome, tail = check_repro(folder, verdict, row.get("error_class"), limit, python)
        if outcome == "not reproduced" and bug.repro_status == "reproduced":
            # fixed only when it stays away twice (a flaky failure is not a fix)
            outcome, tail = check_repro(folder, verdict, row.get("error_class"), limit, python)
        out.append(_save(db, bug.bug, outcome, versions, tail))
        log(out[-1].line())
    return out


def _notes(notes_dir: Path) -> dict[str, Note]:
    """The notes of `notes_dir` ({} when there is no such directory)."""
    from campaign.triage.pages.notes import load_notes

    return load_notes(notes_dir) if Path(notes_dir).is_dir() else {}


def _run_note(note: Note, notes_dir: Path | None, python: str | None,
              timeout_s: float) -> tuple[str, str]:
    """A note's repro run once (`matrix.run_note`), as (`check_repro`'s outcome, why)."""
    from campaign.triage.bugdb.matrix import run_note
    from campaign.triage.bugdb.runner import this_interpreter

    cell = run_note(note, Path(notes_dir or "."), python or this_interpreter(), timeout_s)
    return NOTE_OUTCOMES[cell.outcome], cell.why


def _info(folder: Path) -> dict:
    try:
        return json.loads((folder / "info.json").read_text())
    except (OSError, ValueError):
        return {}


def _save(db: BugDb, bug_id: str, outcome: str, versions: list[str], tail: str) -> Checked:
    """Write one bug's outcome (under the lock: a triage may have changed it meanwhile)."""
    when = now()

    def change(bugs: dict[str, Bug]) -> Checked:
        b = bugs.get(bug_id)
        if b is None:  # removed meanwhile
            return Checked(bug_id, outcome, versions, "gone", tail)
        b.checked, b.checked_versions, b.check_outcome = when, versions, outcome
        if outcome == "reproduced":
            b.repro_status = outcome
        elif outcome == "not reproduced" and b.status in OPEN and b.repro_status == "reproduced":
            b.status = "fixed"
            b.note = ((b.note + "\n") if b.note else "") + (
                f"fixed: not reproduced on {', '.join(versions) or 'unknown versions'} "
                f"({when:%Y-%m-%d %H:%M} UTC)")
        return Checked(bug_id, outcome, versions, b.status, tail)

    return db.update(change)
