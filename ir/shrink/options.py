"""Reducing a set of named options (a compiler configuration) while a failure stays.

A configuration here is a dict `name -> value` of options that differ from their defaults; an
option left out is at its default. `reduce_options(options, predicate)` returns the smallest
sub-dict it can find for which `predicate(sub)` still holds ("the test still fails the same
way with only these options set"): options go back to their defaults, never to another value.

Like the graph reducer (`ir.shrink.reducer`), one pass runs to a fixed point: it proposes
candidates derived from the current options; the first accepted one becomes current and the
pass starts again; when none is accepted it stops (or at `max_tests` predicate calls /
`max_seconds`). Candidates, in order (delta debugging's, since each is a compile and a failure
most often needs one option):
  - `drop_options`: every option dropped at once (the failure does not need the
    configuration), when more than one is set;
  - then the options, in name order, cut into 2 parts, then 4, 8, ... up to one per part; at
    each cut first `keep_part`: one part alone, the others back to their defaults; then
    `drop_part` (`drop_option` for a part of one): one part back to its defaults.
So a failure that needs one of n options costs about 2*log2(n) compiles, not n.
A candidate is evaluated only when its form is new within the call (the `seen` set); a
later call (say, on a smaller graph) may re-try a form, since the failure may differ there.

Invariants: the result is a sub-dict of the input (same values for the names it keeps); the
predicate held on every accepted candidate; a candidate is never evaluated twice within a call.
Generic: values are compared by `repr`, nothing here knows about backends.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the names of this reducer's passes, as its steps give them
OPTION_PASSES = ("drop_options", "keep_part", "drop_part", "drop_option")

#: does the test still fail the same way with (only) these options set?
OptionsPredicate = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class OptionStep:
    """One accepted candidate: the options it put back to their defaults and what is left."""

    pass_name: str
    #: the options dropped, name -> the value they had
    dropped: tuple[tuple[str, Any], ...]
    #: the options still set after the step, by name
    left: tuple[str, ...]

    def desc(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.dropped) + " back to default"


@dataclass
class OptionsResult:
    """What `reduce_options` found: `options` is a sub-dict of `original`."""

    options: dict[str, Any]
    original: dict[str, Any]
    steps: list[OptionStep] = field(default_factory=list)
    #: predicate calls made
    tests: int = 0
    seconds: float = 0.0
    #: why it stopped: "fixed point", "max_tests", "max_seconds"
    stopped: str = "fixed point"

    def summary(self) -> dict[str, Any]:
        return {"original": sorted(self.original), "reduced": sorted(self.options),
                "tests": self.tests, "seconds": round(self.seconds, 2),
                "stopped": self.stopped,
                "steps": [{"pass": s.pass_name, "desc": s.desc(), "left": list(s.left)}
                          for s in self.steps]}


def _form(options: Mapping[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in options.items()))


class _Budget(Exception):
    pass


def _parts(names: list[str], n: int) -> list[list[str]]:
    """`names` cut into `n` consecutive parts of near-equal size (none empty)."""
    size, extra = divmod(len(names), n)
    out, i = [], 0
    for j in range(n):
        k = size + (j < extra)
        out.append(names[i:i + k])
        i += k
    return out


def _parts_pass(cur: dict[str, Any], consider: Callable[[str, dict[str, Any]], bool]) -> bool:
    """One round of `keep_part` / `drop_part` candidates at finer and finer cuts; True when
    one was accepted (the caller starts again from the new current options)."""
    names = sorted(cur)
    n = 2
    while True:
        parts = _parts(names, min(n, len(names)))
        for part in parts:
            if len(part) < len(names) and consider("keep_part", {k: cur[k] for k in part}):
                return True
        for part in parts:
            name = "drop_option" if len(part) == 1 else "drop_part"
            if consider(name, {k: v for k, v in cur.items() if k not in part}):
                return True
        if n >= len(names):
            return False
        n *= 2


def reduce_options(options: Mapping[str, Any], predicate: OptionsPredicate,
                   max_tests: float = float("inf"), max_seconds: float = float("inf"),
                   log: Callable[[str], None] | None = None) -> OptionsResult:
    """Drop options while `predicate` holds, to a fixed point (module doc). The predicate is
    assumed to hold on `options` itself (not re-checked). A predicate that raises says "not
    the same failure" (logged)."""
    log = log or (lambda s: None)
    t0 = time.monotonic()
    res = OptionsResult(dict(options), dict(options))
    seen = {_form(options)}

    def consider(name: str, cand: dict[str, Any]) -> bool:
        form = _form(cand)
        if form in seen:
            return False
        seen.add(form)
        if res.tests >= max_tests:
            raise _Budget("max_tests")
        if time.monotonic() - t0 >= max_seconds:
            raise _Budget("max_seconds")
        res.tests += 1
        try:
            ok = bool(predicate(dict(cand)))
        except Exception as e:  # "not interesting"
            log(f"predicate raised on options {sorted(cand)}: {type(e).__name__}: {e}")
            ok = False
        if ok:
            dropped = tuple((k, v) for k, v in sorted(res.options.items()) if k not in cand)
            step = OptionStep(name, dropped, tuple(sorted(cand)))
            res.steps.append(step)
            res.options = dict(cand)
            log(f"{name}: {step.desc()} -> {len(cand)} options left")
        return ok

    try:
        while res.options:
            cur = res.options
            if len(cur) > 1 and consider("drop_options", {}):
                continue
            if not _parts_pass(cur, consider):
                break
    except _Budget as b:
        res.stopped = str(b)
    res.seconds = time.monotonic() - t0
    return res
