"""Seed files: reading, parsing and verifying one `.gir` seed, with one-line errors naming the
file, the line and the problem (`mutators.source` loads folders of them, `mutators.model_seeds`
every entry of `mutation.seeds`)."""
from __future__ import annotations

import re
from pathlib import Path

from ir.core.graph import Graph
from ir.core.text import ParseError, parse
from ir.core.verify import VerifyError, verify

#: the dynsmith checkout (relative seed directories are looked up here too)
ROOT = Path(__file__).resolve().parents[1]


class SeedError(ValueError):
    """A seed file that cannot be a seed; the message is one line: `<file>:<line>: problem`."""


def _def_line(text: str, context: str) -> int | None:
    """The line of `text` defining the instruction a VerifyError's context marks (`>>>`):
    value names are unique in a file, so its first result's definition finds it."""
    marked = next((ln for ln in context.splitlines() if ln.startswith(">>>")), None)
    m = re.search(r"%[\w.]+", marked or "")
    if m is None:
        return None
    name = re.escape(m.group(0))
    for i, line in enumerate(text.splitlines(), 1):
        head = line.split("=", 1)[0] if "=" in line else ""
        if re.search(rf"(^|[\s,]){name}\s*(,|$)", head):
            return i
    return None


def check_seed(path: str | Path) -> Graph:
    """Read, parse and verify one seed file. Raises SeedError naming the file, the line and
    the problem: not UTF-8, empty, a syntax error or unknown op, a type error."""
    f = Path(path)
    try:
        data = f.read_bytes()
    except OSError as e:
        raise SeedError(f"{f}: cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SeedError(f"{f}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                        f"{e.start}); a seed is a GraphIR text file") from None
    if not [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]:
        raise SeedError(f"{f}:1: empty file: no graph (a seed holds one `graph main(...) {{...}}`)")
    try:
        g = parse(text, str(f))
    except ParseError as e:  # already `<file>:<line>:<col>: problem`
        raise SeedError(str(e).splitlines()[0]) from None
    try:
        return verify(g)
    except VerifyError as e:
        at = _def_line(text, e.context)
        raise SeedError(f"{f}:{at if at is not None else 1}: {e.summary}") from None
    except ValueError as e:  # e.g. the in-place analysis (ir.analysis.inplace) rejects it
        raise SeedError(f"{f}:1: {str(e).splitlines()[0]}") from None
