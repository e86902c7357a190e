"""Verdicts: what happened to one test on one backend (docs/results-schema.md lists them)."""
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any


class Verdict(str, enum.Enum):
    PASS = "pass"  #: target outputs equal the reference within tolerance
    MISMATCH = "mismatch"  #: an output differs beyond tolerance (a wrong-code finding)
    CRASH = "crash"  #: the backend raised at a stage (import / compile / run)
    SIGNAL = "signal"  #: the process evaluating the test died (segfault, abort, OOM kill)
    TIMEOUT = "timeout"  #: the backend did not finish within the per-test time limit
    UNSUPPORTED = "unsupported"  #: a known-unsupported feature; never a bug
    INVALID = "invalid"  #: the reference failed or was non-finite: a generator problem, our bug
    SKIPPED = "skipped"  #: not evaluated (e.g. a cuda target with no GPU)
    #: right outputs, but the backend compiled again for a later shape of a dynamic-shape test
    #: that its first compilation should have covered (docs/dynshape.md)
    RECOMPILE = "recompile"

    @property
    def is_finding(self) -> bool:
        """Worth an artifact folder: everything but pass and skipped."""
        return self not in (Verdict.PASS, Verdict.SKIPPED)


class Stage(str, enum.Enum):
    GENERATE = "generate"
    REFERENCE = "reference"
    IMPORT = "import"  #: building the model for the backend (ONNX bytes -> session / IRModule)
    COMPILE = "compile"
    RUN = "run"
    COMPARE = "compare"
    UNKNOWN = "unknown"


def verdict_signature(row: Mapping[str, Any]) -> str:
    """The feedback signature of one backend row, `backend:verdict[:error_sig]`: what the
    driver sends the seed pool (`mutators.source.MutationSource.feedback`) per row."""
    sig = f"{row['backend']}:{row['verdict']}"
    return f"{sig}:{row['error_sig']}" if row.get("error_sig") else sig
