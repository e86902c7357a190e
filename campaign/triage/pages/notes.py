"""The hand-written notes of the bugs dynsmith found (`docs/findings/<bug>.md`): the committed
source of truth that docs/findings.md is generated from (`campaign.triage.pages.findings_page`).

One Markdown file per bug, named by the bug's id in the bug database (`F07-...`, or a triage
bug's id), so a note and a database row meet by name. The file starts with YAML front matter
(between two `---` lines) holding the fields the page is made of; below it, free Markdown (how
it was minimized, a draft of the upstream report, ...) that the page links to and does not copy:

    ---
    status: known               # bugdb.STATUSES
    merged_into: F07-...        # only with status merged: the bug it repeats
    project: pytorch            # whose tracker: pytorch, onnxruntime, tvm, ...
    version: "2.13"             # the version it was found on
    compiler: torch 2.13 torch.compile (Inductor)    # the page's compiler cell
    what: >-                    # what goes wrong (folded: wrap it as you like)
      ...
    how_found: ...              # which campaign or probe, which verdict, the reduction
    reproducer: ...             # a docs/bugs/ script, or where the artifacts are
    tracker:                    # the compiler's tracker: was it looked up, what was there
      looked_up: true
      searched: If, TopK, segfault    # the terms (absent: not recorded)
      result: TopK import bugs (apache/tvm#17856), none with If
    triggers:                   # optional: the repro graphs and how they fail (below)
    - graph: graphs/F21-if_batchnorm_relu.gir
      backend: tvm
      config: ''
      verdict: crash
      stage: import
      error_sig: "TypeError: Operator <...> @ ..."
    repro:                      # optional: the docs/bugs script and how its output reads
      script: ../bugs/tvm_if_branch_batchnorm_tuple.py
      shows: "TypeError"        # a regex: found = the bug shows (below)
    cause:                      # optional: a construct the bug needs, probed by taking it out
      op: loop
      inlining: zero trips
      compilers: eager aot_eager inductor
      verdict: mismatch
    ---

`cause` (`campaign.triage.pages.note_cause`): the control-flow construct the bug needs (an op
that ran as one of its inlinings), which the triage's cause probe takes out of a new failure
to see whether the note's bug is what it needs.

`repro` (`campaign.triage.pages.note_repro`): the standalone script the version matrix
(`campaign.triage.bugdb.matrix`) runs under each torch, and the patterns that say from its
output whether the bug reproduces, is fixed, or the run failed otherwise.

`triggers` (`campaign.triage.pages.note_triggers`): each entry a GraphIR graph under the notes
dir, the backend spec and configuration it fails in, and the failure (verdict; stage and the
normalized signature for a crash-like one, the graph's op pattern for a mismatch). A campaign
loads them as known bugs (`triage.findings`); `python -m campaign.triage findings-triggers`
writes and checks them by running the graphs.

A field that is missing, unknown (a typo), of the wrong type or value is a `NotesError`: one
line naming the file and the field.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from campaign.triage.bugdb.store import STATUSES
from campaign.triage.pages.note_cause import CauseError, NoteCause, parse_cause
from campaign.triage.pages.note_repro import NoteRepro, ReproError, parse_repro
from campaign.triage.pages.note_triggers import NoteTrigger, TriggerError, parse_triggers

#: where the notes live, relative to the repository root
NOTES_DIR = Path("docs/findings")
#: a bug id that can name a file (the database's ids: letters, digits, `._-`)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class NotesError(Exception):
    """A notes file that cannot be used: one line, `<file>: <field>: <what is wrong>`."""


@dataclass(frozen=True)
class Tracker:
    """Whether the bug was looked up in its compiler's tracker, with what terms, and what was
    found there (`searched` None: the terms were not recorded)."""

    looked_up: bool
    searched: str | None = None
    result: str | None = None

    def text(self) -> str:
        """The page's tracker cell."""
        if not self.looked_up:
            return "not looked up"
        if self.searched:
            return f"searched ({self.searched}): {self.result}"
        return f"looked up: {self.result}"


@dataclass(frozen=True)
class Note:
    """One bug's notes file: `bug` its id (the file name), the front matter's fields, and
    `body`, the free Markdown below it."""

    bug: str
    path: Path
    status: str
    project: str
    version: str
    compiler: str
    what: str
    how_found: str
    reproducer: str
    tracker: Tracker
    merged_into: str | None = None
    body: str = ""
    #: the repro graphs and how they fail (`note_triggers`); () none
    triggers: tuple[NoteTrigger, ...] = ()
    #: the standalone reproducer and how its output reads (`note_repro`); None: none
    repro: NoteRepro | None = None
    #: the construct the bug needs, for the cause probe (`note_cause`); None: none
    cause: NoteCause | None = None

    @property
    def title(self) -> str:
        """One line for the bug database: the compiler and what."""
        return f"{self.compiler}: {self.what}"


#: front-matter fields: name -> required
_FIELDS = {"status": True, "merged_into": False, "project": True, "version": True,
           "compiler": True, "what": True, "how_found": True, "reproducer": True,
           "tracker": True, "triggers": False, "repro": False, "cause": False}
_TRACKER_FIELDS = {f.name for f in fields(Tracker)}


def _split(path: Path, text: str) -> tuple[str, str]:
    """The front matter's text and the body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise NotesError(f"{path}: no front matter (the file must start with a '---' line)")
    for i, line in enumerate(lines[1:], 1):
        if line.rstrip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1:]).strip("\n")
    raise NotesError(f"{path}: the front matter has no closing '---' line")


def _text(path: Path, name: str, value: Any, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if value is None:
        raise NotesError(f"{path}: {name}: missing")
    if not isinstance(value, str):
        quote = " (quote it)" if isinstance(value, int | float) else ""
        raise NotesError(f"{path}: {name}: expected text{quote}, got {type(value).__name__} "
                         f"{value!r}")
    out = " ".join(value.split())  # one line: the page is a table
    if not out:
        raise NotesError(f"{path}: {name}: empty")
    return out


def _tracker(path: Path, value: Any) -> Tracker:
    if not isinstance(value, dict):
        raise NotesError(f"{path}: tracker: expected a mapping (looked_up, searched, result), "
                         f"got {type(value).__name__}")
    unknown = sorted(set(value) - _TRACKER_FIELDS, key=str)
    if unknown:
        raise NotesError(f"{path}: tracker.{unknown[0]}: unknown field (known: "
                         f"{', '.join(sorted(_TRACKER_FIELDS))})")
    looked = value.get("looked_up")
    if not isinstance(looked, bool):
        raise NotesError(f"{path}: tracker.looked_up: expected true or false, got {looked!r}")
    searched = _text(path, "tracker.searched", value.get("searched"), required=False)
    result = _text(path, "tracker.result", value.get("result"), required=looked)
    if not looked and (searched or result):
        name = "searched" if searched else "result"
        raise NotesError(f"{path}: tracker.{name}: given, but looked_up is false")
    return Tracker(looked, searched, result)


def parse_note(path: Path, text: str) -> Note:
    """The note in `text` (read from `path`, whose stem is the bug id); NotesError if a field
    is wrong (a merged note's `merged_into` is checked against the others by `load_notes`)."""
    bug = path.stem
    if not _ID.match(bug):
        raise NotesError(f"{path}: the file name is not a bug id (letters, digits, '._-')")
    front, body = _split(path, text)
    try:
        data = yaml.safe_load(front)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise NotesError(f"{path}: the front matter is not YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise NotesError(f"{path}: the front matter is not a mapping of fields")
    unknown = sorted(set(data) - set(_FIELDS), key=str)
    if unknown:
        raise NotesError(f"{path}: {unknown[0]}: unknown field (known: {', '.join(_FIELDS)})")
    got = {k: _text(path, k, data.get(k), req) for k, req in _FIELDS.items()
           if k not in ("tracker", "triggers", "repro", "cause")}
    if got["status"] not in STATUSES:
        raise NotesError(f"{path}: status: {got['status']!r} is not one of {', '.join(STATUSES)}")
    if (got["status"] == "merged") != (got["merged_into"] is not None):
        raise NotesError(f"{path}: merged_into: " + (
            "missing (status merged names the bug it repeats)" if got["status"] == "merged"
            else f"given, but the status is {got['status']} (only merged takes it)"))
    text_of = {k: v for k, v in got.items() if v is not None}
    try:
        triggers = parse_triggers(data.get("triggers"), path.parent)
    except TriggerError as e:
        raise NotesError(f"{path}: {e}") from None
    try:
        repro = parse_repro(data.get("repro"), path.parent)
    except ReproError as e:
        raise NotesError(f"{path}: {e}") from None
    try:
        cause = parse_cause(data.get("cause"))
    except CauseError as e:
        raise NotesError(f"{path}: {e}") from None
    return Note(bug=bug, path=path, tracker=_tracker(path, data.get("tracker")), body=body,
                triggers=triggers, repro=repro, cause=cause, **text_of)


def load_notes(notes_dir: Path) -> dict[str, Note]:
    """Every `*.md` note of `notes_dir` (its README.md aside) by bug id; NotesError for a bad
    file, a missing directory, or a `merged_into` naming no note (or a merged one)."""
    notes_dir = Path(notes_dir)
    if not notes_dir.is_dir():
        raise NotesError(f"{notes_dir}: no such notes directory")
    notes = {}
    for path in sorted(notes_dir.glob("*.md")):
        if path.name == "README.md":
            continue
        notes[path.stem] = parse_note(path, path.read_text(encoding="utf-8"))
    for n in notes.values():
        into = n.merged_into
        if into is not None and (into not in notes or into == n.bug):
            raise NotesError(f"{n.path}: merged_into: no other note for {into!r}")
        if into is not None and notes[into].status == "merged":
            raise NotesError(f"{n.path}: merged_into: {into!r} is merged itself "
                             f"(name the bug it is merged into)")
    return notes


# ---- writing a note (the migration, a new note) ----------------------------------------------

def _folded(name: str, value: str, indent: str = "", width: int = 96) -> str:
    """`name: >-` and `value` wrapped; plain `name: value` when it fits and needs no quotes."""
    plain = f"{indent}{name}: {value}"
    if len(plain) <= width:
        try:
            if yaml.safe_load(plain.strip()) == {name: value}:
                return plain + "\n"
        except yaml.YAMLError:
            pass  # a value plain YAML reads otherwise (a backquote, `: `): folded below
    lines, cur = [], ""
    for word in value.split(" "):
        if cur and len(indent) + 2 + len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    lines.append(cur)
    return f"{indent}{name}: >-\n" + "".join(f"{indent}  {ln}\n" for ln in lines)


def dump_note(note: Note) -> str:
    """The file text of `note` (the front matter as `parse_note` reads it, then the body);
    checked to read back as the same note."""
    out = ["---\n", f"status: {note.status}\n"]
    if note.merged_into is not None:
        out.append(f"merged_into: {note.merged_into}\n")
    out += [f"project: {note.project}\n", f"version: {yaml.safe_dump(note.version).split()[0]}\n"]
    for name in ("compiler", "what", "how_found", "reproducer"):
        out.append(_folded(name, getattr(note, name)))
    out.append("tracker:\n")
    out.append(f"  looked_up: {'true' if note.tracker.looked_up else 'false'}\n")
    if note.tracker.searched is not None:
        out.append(_folded("searched", note.tracker.searched, "  "))
    if note.tracker.result is not None:
        out.append(_folded("result", note.tracker.result, "  "))
    out.append(dump_triggers(note.triggers))
    out.append(dump_repro(note.repro))
    if note.cause is not None:
        out.append("cause:\n" + "".join(f"  {k}: {v}\n" for k, v in note.cause.as_dict().items()))
    out.append("---\n")
    if note.body:
        out.append(f"\n{note.body}\n")
    text = "".join(out)
    back = parse_note(note.path, text)
    if back != note:
        raise ValueError(f"{note.path}: the note does not read back as written")
    return text


def dump_triggers(triggers: tuple[NoteTrigger, ...]) -> str:
    """The `triggers:` block of the front matter ('' for none): one entry per trigger, each
    value on one line (a signature quoted as YAML needs it)."""
    if not triggers:
        return ""
    out = ["triggers:\n"]
    for t in triggers:
        for i, (k, v) in enumerate(t.as_dict().items()):
            text = yaml.safe_dump(v, default_style=None, width=10**9).rstrip("\n")
            text = text.removesuffix("\n...").removesuffix("...").rstrip("\n")
            out.append(f"{'- ' if i == 0 else '  '}{k}: {text}\n")
    return "".join(out)


def dump_repro(repro: NoteRepro | None) -> str:
    """The `repro:` block of the front matter ('' for none): each value on one line, quoted
    as YAML needs it."""
    if repro is None:
        return ""
    out = ["repro:\n"]
    for k, v in repro.as_dict().items():
        text = yaml.safe_dump(v, default_style=None, width=10**9).rstrip("\n")
        out.append(f"  {k}: {text.removesuffix(chr(10) + '...').removesuffix('...').rstrip()}\n")
    return "".join(out)


def replace_triggers(text: str, triggers: tuple[NoteTrigger, ...]) -> str:
    """The note file `text` with its front matter's `triggers:` block replaced by `triggers`
    (appended before the closing `---` when it has none); every other line kept as written."""
    lines = text.splitlines(keepends=True)
    end = next(i for i, ln in enumerate(lines[1:], 1) if ln.rstrip() == "---")
    start = next((i for i in range(1, end) if lines[i].startswith("triggers:")), None)
    if start is None:
        start = stop = end
    else:
        stop = start + 1
        while stop < end and (lines[stop].startswith((" ", "-")) or not lines[stop].strip()):
            stop += 1
    return "".join(lines[:start]) + dump_triggers(triggers) + "".join(lines[stop:])
