"""The findings' notes into the bug database (`python -m campaign.triage import-findings DB
[docs/findings]`): each note (`campaign.triage.pages.notes`, docs/findings/<bug>.md) becomes a bug of
the same id, so a triage and a re-check know them.

A note's bug has no buckets or sightings (the findings predate the database, or were written up
by hand), its status and `merged_into` the note's, title the compiler and what, and note the
notes file and what the tracker held. A docs/bugs script does not follow repro.py's exit-code
protocol, so an imported bug has no `repro` (a re-check skips it). Importing again adds only
the notes not imported yet: a bug already in the database is left as it is (the generated page
shows where its status and the note's differ: `findings DB`).
"""
from __future__ import annotations

from pathlib import Path

from campaign.triage.bugdb.store import Bug, BugDb
from campaign.triage.pages.notes import Note, load_notes


def note_bug(note: Note, notes_dir: Path) -> Bug:
    """The database's bug of `note` (without buckets or sightings)."""
    text = f"notes: {notes_dir / note.path.name}\ntracker: {note.tracker.text()}"
    return Bug(note.bug, note.status, merged_into=note.merged_into, note=text,
               title=note.title[:160])


def import_findings(db: BugDb, notes_dir: Path) -> list[str]:
    """Add the notes of `notes_dir` not in `db` yet; returns the ids added (NotesError for a
    bad note: nothing is written then)."""
    notes = load_notes(Path(notes_dir))

    def change(bugs: dict[str, Bug]) -> list[str]:
        added = [n for n in notes if n not in bugs]
        for bug in added:
            bugs[bug] = note_bug(notes[bug], Path(notes_dir))
        return added

    return db.update(change)
