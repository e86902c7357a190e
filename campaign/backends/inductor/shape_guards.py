"""Why torch.compile compiled a dynamic-shape program again for a later shape (docs/dynshape.md):
the guard Dynamo found failing (`torch._dynamo.utils.guard_failures`) and the framework code
that added that shape guard, or that specialized the size a `size mismatch` guard checks (the
ShapeEnv's `guard added` records: logger `torch.fx.experimental.symbolic_shapes` at INFO, the
records `TORCH_LOGS=+dynamic` prints). Shared by the campaign's Inductor backend (a recompile
row's signature and message) and by the repro of a dynamic-shape test (its judgement and its
localization), so both name a recompile alike.

The cause's signature names the torch function that added the guard and its file, never a
size or a symbol's number (`s53`): `Recompile: a shape guard of _reshape_view_helper_core_alg
(_refs/__init__.py)`, `Recompile: a size specialized by _max_pool1d (nn/functional.py)`.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

#: a recompile's signature when the cause is unknown (a backend that did not say; the
#: campaign's signature before it named causes): it stands for any recompile
ANY_RECOMPILE = "Recompile: a later shape with every symbolic dim >= 2"
#: the logger of the ShapeEnv's guards
SHAPE_LOGGER = "torch.fx.experimental.symbolic_shapes"
#: `eval <expr> [guard added] <user code>  # <file>:<line> in <fn> (<framework frame>)...`
_ADDED = re.compile(r"^eval (?P<expr>.+?) \[guard added\](?P<user>.*?)"
                    r"\((?P<file>[^()\s]+):(?P<line>\d+) in (?P<func>[\w<>.]+)\)")
#: a framework frame in a guard failure's text: `(_refs/__init__.py:3971 in fn)`
_FRAME = re.compile(r"\((?P<file>[^()\s]+):(?P<line>\d+) in (?P<func>[\w<>.]+)\)\s*$")
#: a guard on a dim's exact size (`tensor 'x' size mismatch at index 2. expected 6, actual 9`)
_MISMATCH = re.compile(r"size mismatch at index (?P<axis>\d+)\. expected (?P<want>\d+), "
                       r"actual (?P<got>\d+)")
#: a specialization: the guard that pins a symbol to a constant
_PINNED = re.compile(r"^Eq\((?P<sym>s\d+), (?P<value>-?\d+)\)$")


@dataclass(frozen=True)
class AddedGuard:
    """One shape guard the ShapeEnv added while tracing: its expression, the user code it
    was added at, and the framework frame (file relative to torch's package, line, function)."""

    expr: str
    user: str
    file: str
    line: int
    func: str


class GuardLog:
    """`with GuardLog() as log:` records the shape guards added meanwhile (`log.added`), the
    symbolic-shapes logger's own handlers silenced for the while (they print to stderr)."""

    def __init__(self) -> None:
        self.added: list[AddedGuard] = []

    def __enter__(self) -> GuardLog:
        added = self.added

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    m = _ADDED.match(record.getMessage())
                except Exception:
                    return
                if m:
                    added.append(AddedGuard(m["expr"], m["user"].strip(), m["file"],
                                            int(m["line"]), m["func"]))

        log = logging.getLogger(SHAPE_LOGGER)
        self._saved = (log.level, list(log.handlers), log.propagate)
        log.handlers = [Collect()]
        log.setLevel(logging.INFO)
        log.propagate = False
        return self

    def __exit__(self, *exc: Any) -> None:
        log = logging.getLogger(SHAPE_LOGGER)
        level, handlers, propagate = self._saved
        log.handlers = handlers
        log.setLevel(level)
        log.propagate = propagate


def clear_guard_failures() -> None:
    """Forget the guard failures of earlier compiles (Dynamo keeps them per code object)."""
    from torch._dynamo.utils import guard_failures

    guard_failures.clear()


def guard_failure_reasons() -> list[str]:
    """Every guard failure Dynamo recorded since `clear_guard_failures`, in order."""
    from torch._dynamo.utils import guard_failures

    return [str(r) for reasons in guard_failures.values() for r in reasons]


def recompile_cause(reasons: list[str], added: list[AddedGuard]) -> tuple[str, str]:
    """(signature, detail) of a recompile from Dynamo's guard failure `reasons` and the guards
    added while tracing (`GuardLog.added`): which framework code added the failing guard, or
    specialized the size the failing `size mismatch` guard checks (the first guard pinning a
    symbol to the size set 0 had there)."""
    if not reasons:
        return ("Recompile: no guard failure recorded",
                "Dynamo recorded no guard failure for the recompile")
    first = reasons[0].split(": ", 1)[-1].strip()
    m = _MISMATCH.search(first)
    if m:
        pins = [a for a in added if (p := _PINNED.match(a.expr)) and p["value"] == m["want"]]
        pins = pins or [a for a in added if _PINNED.match(a.expr)]
        if pins:
            a = pins[0]
            return (f"Recompile: a size specialized by {a.func} ({a.file})",
                    f"{a.expr} was added by {a.file}:{a.line} in {a.func}"
                    f"{f' (at `{a.user}`)' if a.user else ''}, so the size is static; "
                    f"Dynamo's failing guard: {first}")
        return ("Recompile: a size specialized (no guard added names where)",
                f"Dynamo's failing guard: {first}")
    f = _FRAME.search(first)
    if f:
        guard = first.split("  # ", 1)[0]
        return (f"Recompile: a shape guard of {f['func']} ({f['file']})",
                f"the guard `{guard}` was added by {f['file']}:{f['line']} in {f['func']}; "
                f"Dynamo's failing guard: {first}")
    return f"Recompile: {re.sub(r'[0-9]+', 'N', first)[:160]}", f"Dynamo's failing guard: {first}"
