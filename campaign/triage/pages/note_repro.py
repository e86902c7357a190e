"""A finding note's standalone reproducer, machine-readable: the `repro:` field of its front
matter (`campaign.triage.pages.notes`), which the version matrix (`campaign.triage.bugdb.matrix`)
and the bug database's re-check run.

The docs/bugs scripts follow no exit-code protocol (several print one line per case and exit
0 whether the compiler fails or not), so the note says how to read the script's output:

    repro:
      script: ../bugs/torch_functionalize_views.py   # relative to the notes dir (docs/findings)
      args: --case 2                                 # optional: the script's arguments
      shows: 'internal overlap'                      # a regex: found in the output = the bug
      fixed: 'aot_eager: ok'                         # optional regex: found = fixed

A run is judged (`judge`), in this order: past its time limit, `errors`; `shows` found in its
stdout, stderr or the `[killed by SIGxxx]` line a signal adds, `reproduces`; an import that
failed (`ModuleNotFoundError`, `ImportError`: an interpreter without the compiler), `errors`
with the import's message; `fixed` found (or, without `fixed`, a clean exit), `fixed`; anything
else `errors` with the last error line. So a script that fails otherwise (another exception, a
package missing) is never called fixed.

Invariants (checked here; a wrong field is a `ReproError`, which `notes` reports as one line
naming the file and `repro.<field>`): a mapping of known fields; `script` names a file that
exists under the notes dir; `shows` and `fixed` compile as regular expressions; `args` is text
(split as a shell would).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.triage.bugdb.runner import Run, last_error
from campaign.triage.pages.note_triggers import check_mapping

#: a cell of the version matrix: what one run of a finding's repro says
OUTCOMES = ("reproduces", "fixed", "errors")
#: the traceback line of an import that failed: the interpreter lacks a package
_IMPORT_FAILED = re.compile(r"^(ModuleNotFoundError|ImportError): .*", re.M)
_FIELDS = ("script", "args", "shows", "fixed")


class ReproError(Exception):
    """A `repro:` field that cannot be used: `<field>: <what is wrong>`."""


@dataclass(frozen=True)
class NoteRepro:
    """The `repro:` field of a note (module doc): `script` as written (relative to the notes
    dir), its arguments, and the patterns its output is read with."""

    script: str
    shows: str
    fixed: str | None = None
    args: str = ""

    def path(self, notes_dir: Path) -> Path:
        """The script's file."""
        return Path(notes_dir) / self.script

    def argv(self) -> list[str]:
        return shlex.split(self.args)

    def as_dict(self) -> dict[str, str]:
        """The fields as the front matter writes them (the optional ones only when set)."""
        out = {"script": self.script}
        if self.args:
            out["args"] = self.args
        out["shows"] = self.shows
        if self.fixed is not None:
            out["fixed"] = self.fixed
        return out


def parse_repro(value: Any, notes_dir: Path) -> NoteRepro | None:
    """The `repro:` field `value` (None: the note has none); ReproError if it is wrong."""
    if value is None:
        return None
    check_mapping(value, "repro", _FIELDS, ", ".join(_FIELDS), ReproError)
    got: dict[str, str] = {}
    for name in _FIELDS:
        v = value.get(name)
        if v is None:
            continue
        if not isinstance(v, str) or not v.strip():
            raise ReproError(f"repro.{name}: expected non-empty text, got {v!r}")
        got[name] = v
    for name in ("script", "shows"):
        if name not in got:
            raise ReproError(f"repro.{name}: missing")
    if not (Path(notes_dir) / got["script"]).is_file():
        raise ReproError(f"repro.script: {got['script']} is not a file under {notes_dir}")
    for name in ("shows", "fixed"):
        if name in got:
            try:
                re.compile(got[name])
            except re.error as e:
                raise ReproError(f"repro.{name}: not a regular expression: {e}") from None
    try:
        shlex.split(got.get("args", ""))
    except ValueError as e:
        raise ReproError(f"repro.args: {e}") from None
    return NoteRepro(**got)


def judge(repro: NoteRepro, run: Run, timeout_s: float) -> tuple[str, str]:
    """(outcome, why) of one run of `repro` (module doc: the order); `why` is the line that
    decided it (the matched one, the error)."""
    text = run.text()
    if run.expired:
        return "errors", f"timed out after {timeout_s:g} s"
    found = re.search(repro.shows, text, re.M)
    if found:
        return "reproduces", _line(text, found)
    failed = _IMPORT_FAILED.search(text)
    if failed:
        return "errors", failed.group(0).strip()[:300]
    if repro.fixed is not None:
        ok = re.search(repro.fixed, text, re.M)
        if ok and run.code == 0:
            return "fixed", _line(text, ok)
        return "errors", (last_error(text) or f"exit {run.code}")[:300]
    if run.code == 0:
        return "fixed", "exit 0 without the failure"
    return "errors", (last_error(text) or f"exit {run.code}")[:300]


def _line(text: str, found: re.Match[str]) -> str:
    """The whole line holding `found`, trimmed."""
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start:end if end >= 0 else None].strip()[:300]
