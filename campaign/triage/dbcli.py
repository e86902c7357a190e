"""The bug database's commands (`python -m campaign.triage <command> DB ...`):

- `recheck DB [--timeout S] [--bug ID ...]`: run every open bug's repro.py on the compilers
  installed now; a bug whose repro no longer reproduces is marked `fixed`
  (`campaign.triage.recheck`);
- `show DB [--all]`: the bugs, open ones first (`--all`: every status);
- `mark DB BUG STATUS [--note TEXT] [--merged-into BUG]`: set a bug's status and note;
- `import-findings DB [FILE]`: the rows of the hand-written docs/findings.md as bugs, with
  their statuses and notes (`campaign.triage.findings_import`; made if missing).

Exit status 0; 2 with a one-line `error: ...` naming the file when the database cannot be used
(nothing is written then).
"""
from __future__ import annotations

import argparse
import sys

from campaign.triage.bugdb import OPEN, STATUSES, BugDb, BugDbError

COMMANDS = ("recheck", "show", "mark", "import-findings")


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
    i = sub.add_parser("import-findings", help="the rows of docs/findings.md as bugs")
    i.add_argument("db")
    i.add_argument("file", nargs="?", default="docs/findings.md")
    return p


def run_command(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    try:
        db = BugDb.open(a.db, create=a.command == "import-findings")
        if a.command == "import-findings":
            from campaign.triage.findings_import import import_findings

            added = import_findings(db, a.file)
            print(f"import-findings: {len(added)} bugs added to {db.path}")
        elif a.command == "recheck":
            from campaign.triage.recheck import recheck

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
    except BugDbError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
