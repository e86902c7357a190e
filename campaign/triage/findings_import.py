"""Import the hand-written docs/findings.md into the bug database (`python -m campaign.triage
import-findings DB [docs/findings.md]`): the first step of generating that page from the
database (issue 20, point 4).

Each table row becomes a bug without buckets or sightings (they predate the database): id
`F<row>-<reproducer>` (the docs/bugs script's name, `-case<N>` for one case of several;
without a script, the first words of what it is), title the compiler and what, note the whole
row (how it was found, its reproducer) and what a check against the compiler's tracker found
(`TRACKER`, from issue 20; the rows it covered and found nothing for say so, later rows
say they were not looked up). Statuses: `known`, except the rows the tracker check found already
reported upstream (`known-upstream`), documented limitations (`limitation`), or repeating
another row (`merged`, `merged_into` that row's bug). A docs/bugs script does not follow
repro.py's exit-code protocol, so an imported bug has no `repro` (a re-check skips it); its
reproducer is named in the note. Importing again adds only rows not imported yet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from campaign.triage.bugdb import Bug, BugDb

#: (a phrase of the row, status, what the tracker check found, the phrase of the row it
#: repeats for `merged`), from issue 20's check of the rows against the trackers
TRACKER: tuple[tuple[str, str, str, str | None], ...] = (
    ("FunctionalTensor on its own", "known-upstream",
     "reported upstream already (the exporter's tensor constant in a cond body)", None),
    ("a write through `unfold` with gaps (step > size) zeroes", "known-upstream",
     "reported upstream already (torch.compile's write through a gapped unfold)", None),
    ("`HardSwish` on float64", "limitation",
     "not a bug: the error comes from the ONNX function body's float32 attribute", None),
    ("between distinct symbolic dims", "limitation",
     "not a bug: a limitation TVM's source documents (a TODO in legalization)", None),
    ("torch_compile_unfold_single_window_overlap.py", "merged",
     "repeats the single-window unfold overlap row", "torch_functionalize_views.py` (case 2)"),
    ("torch_onnx_export_bool_write_through_expand.py", "merged",
     "repeats the bool write through expand row", "torch_functionalize_views.py` (case 3)"),
)


#: the rows issue 20's tracker check covered (the table's first 22; later rows came after it)
CHECKED_ROWS = 22


@dataclass
class Row:
    """One row of the findings table: its number (from 1) and four cells."""

    n: int
    compiler: str
    what: str
    how: str
    reproducer: str

    @property
    def text(self) -> str:
        return " | ".join((self.compiler, self.what, self.how, self.reproducer))

    @property
    def id(self) -> str:
        m = re.search(r"docs/bugs/([\w.-]+?)(?:\.py|/)", self.reproducer)
        case = re.search(r"\(case (\d+)\)", self.reproducer)
        if m:
            name = m.group(1) + (f"-case{case.group(1)}" if case else "")
        else:
            words = re.findall(r"[A-Za-z0-9]+", self.what)[:5]
            name = "_".join(words).lower()
        return f"F{self.n:02d}-{name}"


def parse(text: str) -> list[Row]:
    """The rows of the markdown table (header and rule skipped)."""
    rows: list[Row] = []
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| compiler"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4:
            rows.append(Row(len(rows) + 1, *cells))
    return rows


def import_findings(db: BugDb, path: Path) -> list[str]:
    """Add the rows of `path` not in `db` yet; returns the ids added."""
    rows = parse(Path(path).read_text())

    def change(bugs: dict[str, Bug]) -> list[str]:
        added = []
        for row in rows:
            if row.id in bugs:
                continue
            note = f"docs/findings.md row {row.n}: {row.text}"
            bug = Bug(row.id, "known", title=f"{row.compiler}: {row.what}"[:160])
            found = next((t for t in TRACKER if t[0] in row.text), None)
            into = (next((r.id for r in rows if found[3] in r.reproducer), None)
                    if found is not None and found[3] is not None else None)
            if found is not None and (found[3] is None or into is not None):
                bug.status, bug.merged_into = found[1], into
                bug.note = f"{note}\ntracker: {found[2]}"
            elif row.n <= CHECKED_ROWS:
                bug.note = f"{note}\ntracker: looked up (issue 20's check), not reported there"
            else:
                bug.note = f"{note}\ntracker: not looked up yet"
            bugs[bug.bug] = bug
            added.append(bug.bug)
        return added

    return db.update(change)
