"""The bug database's commands (`python -m campaign.triage <command> DB ...`):

- `recheck DB [--timeout S] [--bug ID ...] [--notes DIR] [--python PY]`: run every open bug's
  repro.py (a finding's note's `repro:` script for a bug imported from the notes) on the
  compilers installed now; a bug whose repro no longer reproduces is marked `fixed`
  (`campaign.triage.bugdb.recheck`);
- `matrix [--python PY ...] [--bug ID ...] [--notes DIR] [--out FILE] [--jobs N] [--timeout S]`:
  every open finding's repro under each interpreter, one column per torch version, into the
  matrix file (default docs/findings/matrix.json; `campaign.triage.bugdb.matrix`); then
  regenerate docs/findings.md with `findings`;
- `show DB [--all]`: the bugs, open ones first (`--all`: every status), then the unconfirmed
  ones apart (their repro.py did not reproduce: no compiler bug yet);
- `mark DB BUG STATUS [--note TEXT] [--merged-into BUG]`: set a bug's status and note;
- `import-findings DB [NOTES]`: the findings' notes (docs/findings/<bug>.md) as bugs, with
  their statuses (`campaign.triage.bugdb.findings_import`; the database is made if missing);
- `findings [DB] [--notes DIR] [--out FILE] [--check]`: write docs/findings.md from the notes
  (and the database's bugs without notes, when given), with a column per version of the
  matrix (`--matrix FILE`, default the notes dir's matrix.json); `--check` writes nothing and
  exits 1 when the file is not what the notes make (`campaign.triage.pages.findings_page`).

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

COMMANDS = ("recheck", "show", "mark", "import-findings", "findings", "matrix")


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
    r.add_argument("--notes", default=str(NOTES_DIR),
                   help="the findings' notes: a bug without repro.py runs its note's repro "
                        "(default %(default)s)")
    r.add_argument("--python", default=None, help="the interpreter to run the repros with "
                                                  "(default this one)")
    x = sub.add_parser("matrix", help="every open finding's repro under each interpreter")
    x.add_argument("--python", action="append", default=[],
                   help="an interpreter (repeatable; default this one)")
    x.add_argument("--bug", action="append", default=[],
                   help="only this finding (its id or F<nn>; repeatable)")
    x.add_argument("--notes", default=str(NOTES_DIR), help="the notes (default %(default)s)")
    x.add_argument("--out", default=None,
                   help="the matrix file (default: the notes dir's matrix.json)")
    x.add_argument("--jobs", type=int, default=1, help="repros at once (default %(default)s)")
    x.add_argument("--timeout", type=float, default=600.0,
                   help="seconds per repro (default %(default)s)")
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
    f.add_argument("--matrix", default=None,
                   help="the version matrix (default: the notes dir's matrix.json, if any)")
    f.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when --out is not what the notes make")
    return p


def _findings(a: argparse.Namespace) -> int:
    """The `findings` command."""
    from campaign.triage.bugdb.matrix import MATRIX_FILE, Matrix
    from campaign.triage.pages.findings_page import Page
    from campaign.triage.pages.notes import load_notes

    bugs = BugDb.open(a.db, create=False).read() if a.db is not None else None
    out = Path(a.out)
    notes = load_notes(Path(a.notes))
    matrix = Matrix.read(Path(a.matrix) if a.matrix else Path(a.notes) / MATRIX_FILE)
    text = Page(notes, bugs, Path(a.notes), out, matrix).text()
    if a.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print(f"findings: {out} is " + ("up to date" if same else
              f"not what {a.notes} makes: run python -m campaign.triage findings --out {out}"))
        return 0 if same else 1
    out.write_text(text, encoding="utf-8")
    print(f"findings: {out} written from {len(notes)} notes"
          + (f" and {a.db}" if a.db is not None else ""))
    return 0


def _matrix(a: argparse.Namespace) -> int:
    """The `matrix` command."""
    from campaign.triage.bugdb.matrix import MATRIX_FILE, findings, run_matrix
    from campaign.triage.bugdb.runner import this_interpreter
    from campaign.triage.pages.notes import load_notes

    notes_dir = Path(a.notes)
    notes = load_notes(notes_dir)
    out = Path(a.out) if a.out else notes_dir / MATRIX_FILE
    pythons = a.python or [this_interpreter()]
    todo = findings(notes, a.bug or None)
    print(f"matrix: {len(todo)} findings x {len(pythons)} interpreters, {a.jobs} at a time, "
          f"{a.timeout:g} s each", flush=True)
    ran = run_matrix(notes, notes_dir, pythons, out, a.bug or None, a.timeout, a.jobs,
                     log=lambda s: print(s, flush=True))
    for col in ran.columns:
        counts = {o: sum(c.outcome == o for c in col.cells.values())
                  for o in ("reproduces", "fixed", "errors")}
        print(f"matrix: {col.label}: {len(col.cells)} run: "
              + ", ".join(f"{n} {o}" for o, n in counts.items()))
    print(f"matrix: {out} written; run python -m campaign.triage findings to update the page")
    return 0


def run_command(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.command == "findings":
            return _findings(a)
        if a.command == "matrix":
            return _matrix(a)
        db = BugDb.open(a.db, create=a.command == "import-findings")
        if a.command == "import-findings":
            from campaign.triage.bugdb.findings_import import import_findings

            added = import_findings(db, Path(a.notes))
            print(f"import-findings: {len(added)} bugs added to {db.path}")
        elif a.command == "recheck":
            from campaign.triage.bugdb.recheck import recheck

            done = recheck(db, a.timeout, a.bug or None, log=lambda s: print(s, flush=True),
                           notes_dir=Path(a.notes), python=a.python)
            fixed = sum(c.status == "fixed" for c in done)
            print(f"recheck: {len(done)} open bugs re-run, {fixed} fixed")
        elif a.command == "show":
            bugs = list(db.read().values())
            doubtful = [b for b in bugs if b.status == "unconfirmed"]
            for b in bugs:
                if b.status != "unconfirmed" and (a.all or b.status in OPEN):
                    print(f"{b.bug:<40} {b.status:<15} {b.tests:>6} tests {b.campaigns:>3} "
                          f"campaigns  {b.title or ''}")
            if doubtful:
                print(f"unconfirmed ({len(doubtful)}: their repro.py did not reproduce):")
            for b in doubtful:
                print(f"  {b.bug:<38} {b.tests:>6} tests {b.campaigns:>3} campaigns  "
                      f"{b.title or ''}")
        else:
            b = db.set_status(a.bug, a.status, a.note, a.merged_into)
            print(f"{b.bug}: {b.status}" + (f" (into {b.merged_into})" if b.merged_into else ""))
    except (BugDbError, NotesError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
