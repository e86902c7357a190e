"""Normalized error signatures: the same failure gives the same string across tests.

A signature is `<error class>: <first message line, normalized>[ @ <frame> < <frame>]`:
numbers, hex addresses, file paths and quoted value names are stripped from the message, so two
crashes that differ only in shapes or temp files bucket together; the top (innermost) frames of
the library that failed (up to our own code's call into it), as `file-stem.function`, separate
different failures that happen to share a generic message.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"\b0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(/[\w.\-+]+)+"), "<path>"),
    (re.compile(r"%?\b[A-Za-z_]*\d+[A-Za-z_\d]*\b"), lambda m: re.sub(r"\d+", "N", m.group())),
    (re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]

#: frames kept in a signature
TOP_FRAMES = 2

#: a Python traceback line (`File "p", line 3, in f`) or a faulthandler dump line
#: (`File "p", line 3 in f`)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+,? in (?P<func>.+)$', re.M)
#: our own sources: frames there say where we called the library, not where it failed
_REPO = str(Path(__file__).resolve().parents[1]) + "/"
#: generic glue frames (call wrappers, FFI trampolines) that say nothing about the failure
_SKIP = re.compile(r"(^|/)(threading|multiprocessing/\w+|contextlib|functools)\.py$|\.pxi$|"
                   r"(^|/)tvm_ffi/|(^|/)tvm/_ffi/")


def _func_name(func: str) -> str:
    """`void tvm::runtime::vm::CheckTensorInfo(tvm::ffi::PackedArgs, ...)` -> `vm::CheckTensorInfo`;
    a Python function name stays as it is."""
    func = func.strip()
    if re.fullmatch(r"[\w.<>]+", func):  # a Python frame
        return func
    depth, cut = 0, len(func)
    for i, ch in enumerate(func):  # drop the argument list (C++ frames)
        if ch == "(" and depth == 0 and i > 0:
            cut = i
            break
        depth += ch == "<"
        depth -= ch == ">"
    words = re.sub(r"<[^<>]*>", "", func[:cut]).split()
    name = words[-1] if words else func
    return "::".join(name.split("::")[-2:])


def _label(path: str, func: str) -> str:
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return f"{stem}.{_func_name(func)}"


def python_frames(text: str, innermost_first: bool = False) -> list[str]:
    """The library frames (`file-stem.function`) of a Python traceback or faulthandler dump,
    innermost first, down to the first frame of our own code (the call into the library);
    glue frames are skipped. Python tracebacks list the innermost frame last; faulthandler
    dumps list it first (`innermost_first=True`). With chained exceptions, the last one
    printed (the one raised) counts."""
    if not innermost_first:
        text = (text or "").rsplit("\nThe above exception", 1)[-1]
    found = [(m.group("path"), m.group("func")) for m in _FRAME.finditer(text or "")]
    if not innermost_first:
        found.reverse()
    out = []
    for path, func in found:
        if path.startswith(_REPO):
            break
        if not _SKIP.search(path):
            out.append(_label(path, func))
    return out


def normalize(error_class: str, message: str, max_len: int = 300,
              frames: Sequence[str] = ()) -> str:
    text = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    sig = f"{error_class}: {text.strip()}"
    top = list(dict.fromkeys(frames))[:TOP_FRAMES]
    if top:
        sig = f"{sig[:max_len - 60]} @ {' < '.join(top)}"
    return sig[:max_len]
