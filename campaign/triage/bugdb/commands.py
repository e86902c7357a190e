"""The bug database's commands (`python -m campaign.triage <command> DB ...`):

- `recheck DB [--timeout S] [--bug ID ...]`: run every open bug's repro.py on the compilers
  installed now; a bug whose repro no longer reproduces is marked `fixed`
  (`campaign.triage.bugdb.recheck`);
- `show DB [--all]`: the bugs, open ones first (`--all`: every status);
- `mark DB BUG STATUS [--note TEXT] [--merged-into BUG]`: set a bug's status and note;
- `import-findings DB [NOTES]`: the findings' notes (docs/findings/<bug>.md) as bugs, with
  their statuses (`campaign.triage.bugdb.findings_import`; the database is made if missing);
- `findings [DB] [--notes DIR] [--out FILE] [--check]`: write docs/findings.md from the notes
  (and the database's bugs without notes, when given); `--check` writes nothing and exits 1
  when the file is not what the notes make (`campaign.triage.pages.findings_page`).

Exit status 0; 2 with a one-line `error: ...` naming the file when the database or a notes file
cannot be used (nothing is written then).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from campaign.triage.bugdb.store import OPEN, STATUSES, BugDb, BugDbError
from campaign.triage.pages.findings_page import PAGE
from campaign.triage.pages.notes import NOTES_DIR, NotesError

COMMANDS = ("recheck", "show", "mark", "import-findings", "findings")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m campaign.triage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("recheck", help="re-run every open bug's repro.py; mark the fixed ones")
    r.add_argument("db", help="the bug database (a directory)")
    r.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per repro.py (a timeout bug's: its own wait + 60; default "
                        "%(default)s)")
    r.add_argument("--bug", action="append", default=[], help="only this bug (repeatable)")
    s = sub.add_parser("show", help="list the bugs")
    s.add_argument("db")
    s.add_argument("--all", action="store_true", help="every status, not only open bugs")
    m = sub.add_parser("mark", help="set a bug's status and note")
    m.add_argument("db")
    m.add_argument("bug")
    m.add_argument("status", choices=STATUSES)
    m.add_argument("--note", default=None)
    m.add_argument("--merged-into", default=None, help="with status merged: the other bug")
    i = sub.add_parser("import-findings", help="the findings' notes as bugs")
    i.add_argument("db")
    i.add_argument("notes", nargs="?", default=str(NOTES_DIR))
    f = sub.add_parser("findings", help="write docs/findings.md from the notes (and a database)")
    f.add_argument("db", nargs="?", default=None,
                   help="a bug database: its status beside each note's, its bugs without notes")
    f.add_argument("--notes", default=str(NOTES_DIR), help="the notes (default %(default)s)")
    f.add_argument("--out", default=str(PAGE), help="the page (default %(default)s)")
    f.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when --out is not what the notes make")
    return p


def _findings(a: argparse.Namespace) -> int:
    """The `findings` command."""
    from campaign.triage.pages.findings_page import Page
    from campaign.triage.pages.notes import load_notes

    bugs = BugDb.open(a.db, create=False).read() if a.db is not None else None
    out = Path(a.out)
    notes = load_notes(Path(a.notes))
    text = Page(notes, bugs, Path(a.notes), out).text()
    if a.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print(f"findings: {out} is " + ("up to date" if same else
              f"not what {a.notes} makes: run python -m campaign.triage findings --out {out}"))
        return 0 if same else 1
    out.write_text(text, encoding="utf-8")
    print(f"findings: {out} written from {len(notes)} notes"
          + (f" and {a.db}" if a.db is not None else ""))
    return 0


def run_command(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.command == "findings":
            return _findings(a)
        db = BugDb.open(a.db, create=a.command == "import-findings")
        if a.command == "import-findings":
            from campaign.triage.bugdb.findings_import import import_findings

            added = import_findings(db, Path(a.notes))
            print(f"import-findings: {len(added)} bugs added to {db.path}")
        elif a.command == "recheck":
            from campaign.triage.bugdb.recheck import recheck

            done = recheck(db, a.timeout, a.bug or None, log=lambda s: print(s, flush=True))
            fixed = sum(c.status == "fixed" for c in done)
            print(f"recheck: {len(done)} open bugs re-run, {fixed} fixed")
        elif a.command == "show":
            for b in db.read().values():
                if a.all or b.status in OPEN:
                    print(f"{b.bug:<40} {b.status:<15} {b.tests:>6} tests {b.campaigns:>3} "
                          f"campaigns  {b.title or ''}")
        else:
            b = db.set_status(a.bug, a.status, a.note, a.merged_into)
            print(f"{b.bug}: {b.status}" + (f" (into {b.merged_into})" if b.merged_into else ""))
    except (BugDbError, NotesError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
