"""docs/findings.md, generated (`python -m campaign.triage findings [DB] [--notes DIR] [--out
FILE] [--check]`): the page of the real bugs dynsmith found, made from the hand-written notes
(`campaign.triage.pages.notes`, docs/findings/<bug>.md) and, when given, a bug database.

The page: a header saying it is generated and how to regenerate it, then one table per status
group, each ordered by compiler project, compiler and bug id: the bugs (`new`, `known`), those
already reported upstream (`known-upstream`), the fixed ones, the limitations (not bugs), and
dynsmith's own (`ours`); empty groups are left out. A `merged` note is folded into the row of
the bug it repeats (its compiler, what, how found and reproducer in that row's cells), so no
row is lost and none is listed twice. Each row links its notes file and says what the
compiler's tracker held.

With the version matrix (`campaign.triage.bugdb.matrix`, docs/findings/matrix.json: each
finding's repro run under each torch tested), every table has one column per version, the
finding's outcome there (`reproduces`, `fixed`, `errors: why`; **fixed** where that version
fixed it: an older one reproduces), and a section says what each column ran on.

Without a database the page is the notes (and the matrix) alone: that is the committed docs/findings.md
(tests/campaign/test_triage_findings.py checks it equals what this module makes). With one,
the page also says, for a noted bug whose database status differs from its note, the database's
status (the note is not changed: a person settles it), and lists apart the database's bugs
that have no notes yet: the open and fixed ones one row each, the `unconfirmed` ones (their
repro.py did not reproduce: nothing to write up yet) in a table of their own, the `ours`,
`limitation` and `merged` ones counted. That page is for reading locally; it is not the committed one.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from campaign.triage.bugdb.matrix import Matrix
from campaign.triage.bugdb.store import Bug
from campaign.triage.pages.notes import NOTES_DIR, Note

PAGE = Path("docs/findings.md")
#: status groups in page order: (statuses, heading, a line under it, how the summary counts it)
GROUPS: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    (("new", "known"), "Bugs", "Open, not found in the compiler's tracker (or not looked up).",
     "open bugs"),
    (("known-upstream",), "Already reported upstream",
     "Real bugs the compiler's tracker already had.", "already reported upstream"),
    (("fixed",), "Fixed", "Their reproducer no longer fails on a later version.", "fixed"),
    (("limitation",), "Limitations, not bugs",
     "Documented behaviour of the compiler (its spec, its source), so not reported.",
     "limitations"),
    (("ours",), "dynsmith's own bugs", "False alarms whose cause was dynsmith.", "ours"),
)
_COLUMNS = ("bug", "compiler", "what", "how found", "reproducer", "tracker")
#: characters of an `errors` cell's reason
_WHY = 80
#: database statuses of bugs without notes that are counted, not listed
_COUNTED = ("ours", "limitation", "merged")


def _bug_table(bugs: list[Bug]) -> Iterable[str]:
    """A table of database bugs without notes, one row each (nothing for none)."""
    if bugs:
        yield ("| bug | status | title | campaigns | tests | last seen |\n"
               "|---|---|---|---|---|---|\n")
    for b in bugs:
        seen = b.last_seen.date().isoformat() if b.last_seen else ""
        cells = (b.bug, b.status, b.title or "", str(b.campaigns), str(b.tests), seen)
        yield "| " + " | ".join(_cell(c) for c in cells) + " |\n"
    yield "\n"


def _cell(text: str) -> str:
    """`text` safe in a table cell (one line, no column break)."""
    return " ".join(text.split()).replace("|", "\\|")


@dataclass
class Page:
    """What the page is made of: the notes by id, and the database's bugs (None: no database)."""

    notes: dict[str, Note]
    bugs: dict[str, Bug] | None = None
    #: the notes directory as the page names it (links are relative to the page)
    notes_dir: Path = NOTES_DIR
    page: Path = PAGE
    #: the version matrix (None or empty: no version columns)
    matrix: Matrix | None = None

    @property
    def versions(self) -> list[str]:
        """The version columns, oldest first."""
        return [c.label for c in self.matrix.columns] if self.matrix is not None else []

    def _header(self) -> str:
        cols = [*_COLUMNS, *self.versions]
        return "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"

    def _version_cells(self, note: Note) -> list[str]:
        if self.matrix is None:
            return []
        fixed = self.matrix.fixed_in(note.bug)
        out = []
        for label in self.versions:
            cell = self.matrix.cell(label, note.bug)
            if cell is None:
                out.append("")
            elif cell.outcome == "fixed" and label in fixed:
                out.append("**fixed**")
            elif cell.outcome == "errors":
                why = cell.why if len(cell.why) <= _WHY else cell.why[:_WHY - 3] + "..."
                out.append(f"errors: `{why.replace('`', chr(39))}`")
            else:
                out.append(cell.outcome)
        return out

    def _link(self, note: Note) -> str:
        rel = Path(os.path.relpath(self.notes_dir / note.path.name, self.page.parent))
        return f"[{note.bug}]({rel.as_posix()})"

    def _row(self, note: Note, merged: list[Note]) -> str:
        what, how, repro = note.what, note.how_found, note.reproducer
        for m in merged:  # a repeat's cells go into the row of the bug it repeats
            what += f"<br>**The same bug, listed as** {self._link(m)} ({m.compiler}): {m.what}"
            how += f"<br>**{m.bug}:** {m.how_found}"
            repro += f"<br>**{m.bug}:** {m.reproducer}"
        tracker = note.tracker.text()
        db = (self.bugs or {}).get(note.bug)
        if db is not None and db.status != note.status:
            tracker += f"<br>**Database status:** {db.status} (the note says {note.status})"
        cells = (self._link(note), note.compiler, what, how, repro, tracker,
                 *self._version_cells(note))
        return "| " + " | ".join(_cell(c) for c in cells) + " |\n"

    def _group(self, statuses: tuple[str, ...]) -> list[Note]:
        return sorted((n for n in self.notes.values() if n.status in statuses),
                      key=lambda n: (n.project, n.compiler, n.bug))

    def _unnoted(self) -> Iterable[str]:
        bugs = [b for b in (self.bugs or {}).values() if b.bug not in self.notes]
        listed = [b for b in bugs if b.status not in (*_COUNTED, "unconfirmed")]
        doubtful = [b for b in bugs if b.status == "unconfirmed"]
        counted = {s: sum(b.status == s for b in bugs) for s in _COUNTED}
        yield "## In the bug database, without notes\n\n"
        yield (f"{len(listed)} bugs to write up (a note in {self.notes_dir}/<bug>.md), "
               + (f"{len(doubtful)} unconfirmed (below), " if doubtful else "") + "and "
               + ", ".join(f"{n} {s}" for s, n in counted.items()) + " not listed.\n\n")
        yield from _bug_table(listed)
        if doubtful:
            yield "### Unconfirmed\n\n"
            yield ("Their repro.py did not reproduce the failure when the triage ran it: a "
                   "harness or environment failure until it does, so nothing to write up yet "
                   "(a later triage that sees one again checks it again).\n\n")
            yield from _bug_table(doubtful)

    def text(self) -> str:
        """The page."""
        merged: dict[str, list[Note]] = {}
        for n in sorted(self.notes.values(), key=lambda n: n.bug):
            if n.merged_into is not None:
                merged.setdefault(n.merged_into, []).append(n)
        counts = {c: len(self._group(s)) for s, _, _, c in GROUPS}
        out = [
            "# Findings: real bugs dynsmith found\n\n",
            "<!-- Generated: do not edit. Edit the notes, then regenerate. -->\n",
            f"*Generated from the notes in [{self.notes_dir}/]({self._rel(self.notes_dir)}/) "
            "(one file per bug, named by its id in the bug database) by "
            f"`python -m campaign.triage findings --out {self.page}`; add a bug database "
            "(`findings DB`) to see its bugs without notes. Edit the notes, not this file: "
            "`tests/campaign/test_triage_findings.py` checks it is up to date.*\n\n",
            "Each entry was reduced by hand from a campaign finding and checked outside dynsmith. "
            "A reproducer is a self-contained script in `docs/bugs/` where one exists. The "
            "tracker column says whether the bug was looked up in the compiler's tracker, and "
            "what was found there. A bug that repeats another is listed in that one's row.\n\n",
            ", ".join(f"{n} {c}" for c, n in counts.items() if n)
            + f"; {sum(len(v) for v in merged.values())} more repeat one of these (merged).\n\n",
        ]
        out += list(self._matrix())
        for statuses, heading, line, _ in GROUPS:
            notes = self._group(statuses)
            if not notes:
                continue
            out += [f"## {heading}\n\n", f"{line}\n\n", self._header()]
            out += [self._row(n, merged.get(n.bug, [])) for n in notes]
            out.append("\n")
        if self.bugs is not None:
            out += list(self._unnoted())
        return "".join(out).rstrip("\n") + "\n"

    def _matrix(self) -> Iterable[str]:
        """The version matrix's section: what each column ran on, its counts, what it fixed."""
        if self.matrix is None or not self.matrix.columns:
            return
        yield "## Versions tested\n\n"
        yield ("Each open finding's reproducer (its note's `repro:`: the script and how its "
               "output reads) run under each interpreter by `python -m campaign.triage matrix "
               "--python PY ...`; the data is [docs/findings/matrix.json]"
               f"({self._rel(self.notes_dir / 'matrix.json')}). A cell says `reproduces`, "
               "`fixed` (**fixed**: that version fixed it, an older one reproduces), or "
               "`errors` (the script failed otherwise: a package missing, a timeout, another "
               "error); empty: not run (no `repro:`, or not open).\n\n")
        yield "| version | interpreter | versions | ran | reproduces | fixed | errors | fixed here |\n"
        yield "|---|---|---|---|---|---|---|---|\n"
        for col in self.matrix.columns:
            counts = {o: sum(c.outcome == o for c in col.cells.values())
                      for o in ("reproduces", "fixed", "errors")}
            fixed = [b.split("-")[0] for b in sorted(col.cells)
                     if col.label in self.matrix.fixed_in(b)]
            versions = ", ".join(f"{k} {v}" if v else f"{k} missing"
                                 for k, v in col.versions.items())
            cells = (col.label, f"`{col.python}`", versions, col.ran[:10],
                     *(str(n) for n in counts.values()), ", ".join(fixed) or "none")
            yield "| " + " | ".join(_cell(c) for c in cells) + " |\n"
        yield "\n"

    def _rel(self, path: Path) -> str:
        return Path(os.path.relpath(path, self.page.parent)).as_posix()
