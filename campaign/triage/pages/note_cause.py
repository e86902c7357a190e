"""A finding note's cause, machine-readable: the `cause:` field of its front matter
(`campaign.triage.pages.notes`), which the triage's cause probe
(`campaign.triage.pipeline.cause_probe`) runs to name the note's bug in forms no trigger
recorded and no reduction reached:

    cause:
      op: loop                      # a control-flow op
      inlining: zero trips          # the way it ran that the bug needs (`inlining_names`)
      compilers: eager aot_eager inductor inductor_dynamic   # whose failures it may explain
      verdict: mismatch             # the failure's verdict

A new bucket of one of `compilers` with that verdict is the note's bug when (a) its test has
`op` instructions that ran as `inlining` on its inputs, (b) the test with them replaced by that
inlining (`ir.shrink.take_out`: the same outputs on those inputs) passes on the failing
compiler while the test as it was fails the same way, and (c) one of the note's own triggers
still fails as it says on this build. F38's wrong gradient needs a loop of zero trips: a test
whose zero-trip loops, taken out, leave it passing is F38, whatever ops its bodies hold.

Invariants (checked here; a wrong field is a `CauseError`, which `notes` reports as one line
naming the file and `cause.<field>`): a mapping of exactly these fields; `op` a control-flow op
of the registry; `inlining` one of that op's `inlining_names`; `compilers` one or more
backend names (a spec's part before `?`); `verdict` one of the triggers' `VERDICTS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from campaign.triage.pages.note_triggers import VERDICTS, check_mapping

_FIELDS = ("op", "inlining", "compilers", "verdict")


class CauseError(Exception):
    """A `cause:` field that cannot be used: `cause.<field>: <what is wrong>`."""


@dataclass(frozen=True)
class NoteCause:
    """The `cause:` field of a note (module doc)."""

    op: str
    inlining: str
    compilers: tuple[str, ...]
    verdict: str

    def covers(self, backend: str, verdict: str) -> bool:
        """Whether a failure of backend spec `backend` with `verdict` is one it may explain."""
        return verdict == self.verdict and backend.partition("?")[0] in self.compilers

    def as_dict(self) -> dict[str, str]:
        return {"op": self.op, "inlining": self.inlining, "compilers": " ".join(self.compilers),
                "verdict": self.verdict}


def parse_cause(value: Any) -> NoteCause | None:
    """The `cause:` field `value` (None: the note has none); CauseError if it is wrong."""
    if value is None:
        return None
    check_mapping(value, "cause", _FIELDS, ", ".join(_FIELDS), CauseError)
    for name in _FIELDS:
        if not isinstance(value.get(name), str) or not value[name].strip():
            raise CauseError(f"cause.{name}: missing (text)")
    from ir.core.op import OP_REGISTRY
    from ir.ops.control import ControlFlow

    op = OP_REGISTRY.get(value["op"])
    if op is None:
        raise CauseError(f"cause.op: {value['op']!r} is no op of the registry")
    if not issubclass(op, ControlFlow):
        raise CauseError(f"cause.op: {value['op']!r} is not a control-flow op")
    if value["inlining"] not in op.inlining_names:
        raise CauseError(f"cause.inlining: {value['inlining']!r} is not a way {value['op']} "
                         f"inlines (one of: {', '.join(op.inlining_names)})")
    from campaign.backends import BACKENDS

    compilers = tuple(value["compilers"].split())
    unknown = [c for c in compilers if c not in list(BACKENDS.names())]
    if unknown:
        raise CauseError(f"cause.compilers: {unknown[0]!r} is no backend (known: "
                         f"{', '.join(BACKENDS.names())})")
    if value["verdict"] not in VERDICTS:
        raise CauseError(f"cause.verdict: {value['verdict']!r} is not one of {', '.join(VERDICTS)}")
    return NoteCause(value["op"], value["inlining"], compilers, value["verdict"])
