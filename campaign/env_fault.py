"""Environment faults: a failure that strikes most of a backend's tests with one signature in
a short window is the environment's, not the compiler's. On one torch build every gradient test
failed to compile with `RuntimeError: Unable to handle autograd's threading in combination with
fork-based multiprocessing`; a compiler that cannot be imported fails every test the same way.
Hundreds of such rows are no bug to reduce and report: the campaign names the fault in one
line, holds that backend back (it gets no more tests) and goes on with the others
(`campaign.driver.campaign`); the triage lists the fault's buckets apart, as `environment`,
not as compiler bugs (docs/triage.md).

`EnvFaultDetector` watches each backend's rows as they come back, within a sliding window of
`EnvFaultConfig.window_s` seconds. A backend *trips* when the window holds at least
`min_tests` of its tests and one signature (`row_signature`) has at least `share` of them;
it is checked as each failing row comes (the share of a signature rises when one of its rows
arrives). A backend trips once; its fault stays. Plain Python, no Ray: the driver feeds it
with the monotonic clock, tests feed it with their own.

Only failures a harness fault can give count (`FAULT_VERDICTS`, and an `invalid` row whose
sandbox failed, `HARNESS_ERROR`); a mismatch (a wrong number) never does. A run's faults go to
`<out>/env_faults.json` (`write_faults`, `read_faults`), which the triage reads.
"""
from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: where a run keeps its environment faults, in its output dir
ENV_FAULTS_FILE = "env_faults.json"
#: verdicts a harness fault can give (a mismatch is a wrong number, never the environment's)
FAULT_VERDICTS = ("crash", "signal", "timeout")
#: the error class of an `invalid` row whose sandbox process could not run the test (a backend
#: that fails to import or prepare): a harness failure, counted like a crash
HARNESS_ERROR = "SandboxError"


def row_signature(row: Mapping[str, Any]) -> str | None:
    """What a result row's failure is, for telling one fault from many: `<verdict> during
    <stage>: <error_sig>` (a timeout's without its frames: where the process was when it was
    killed is incidental); None for a row no environment fault gives (a pass, a mismatch,
    an invalid test of our generator, an unsupported op)."""
    verdict = row.get("verdict")
    if verdict not in FAULT_VERDICTS and not (
            verdict == "invalid" and row.get("error_class") == HARNESS_ERROR):
        return None
    sig = str(row.get("error_sig") or row.get("error_class") or "")
    if verdict == "timeout":
        sig = sig.split(" @ ", 1)[0]
    return f"{verdict} during {row.get('stage') or 'unknown'}: {sig}"


@dataclass
class EnvFaultConfig:
    """When a backend's failures are an environment fault (`campaign.env_fault`): at least
    `min_tests` of its tests within `window_s` seconds, of which at least `share` failed with
    one signature. `min_tests: 0` turns the detector off."""

    min_tests: int = 10
    share: float = 0.8
    window_s: float = 120.0

    def problems(self) -> list[tuple[bool, str]]:
        """(ok, one-line message) for each value `campaign.config.validate` checks."""
        key = "campaign.env_fault"
        return [
            (self.min_tests >= 0, f"{key}.min_tests: must be >= 0 (0: off), got {self.min_tests}"),
            (0.5 < self.share <= 1.0, f"{key}.share: must be in (0.5, 1], got {self.share}"),
            (self.window_s > 0, f"{key}.window_s: must be > 0, got {self.window_s}"),
        ]


@dataclass(frozen=True)
class EnvFault:
    """A backend that tripped: `count` of its last `tests` tests, over `window_s` seconds,
    failed with `signature` (`row_signature`)."""

    backend: str
    signature: str
    count: int
    tests: int
    window_s: float

    def line(self) -> str:
        """The one line the campaign prints and the summary keeps."""
        return (f"environment fault: {self.backend} held back (no more tests): {self.count} of "
                f"its {self.tests} tests in {self.window_s:.0f} s failed with {self.signature}")

    def holds(self, backend: str, row: Mapping[str, Any]) -> bool:
        """Whether result row `row` of `backend` is this fault's."""
        return backend == self.backend and row_signature(row) == self.signature


@dataclass
class _Window:
    """One backend's rows within the window: (time, signature or None), and the signatures'
    counts (kept with the rows, so a check costs no pass over them)."""

    rows: deque[tuple[float, str | None]] = field(default_factory=deque)
    counts: Counter[str] = field(default_factory=Counter)


class EnvFaultDetector:
    """The detector of one campaign (module doc). Invariant: a backend in `faults` is never
    tripped again, and its rows are no longer kept."""

    def __init__(self, cfg: EnvFaultConfig) -> None:
        self.cfg = cfg
        #: backend -> its fault, in the order they tripped
        self.faults: dict[str, EnvFault] = {}
        self._windows: dict[str, _Window] = {}

    def observe(self, backend: str, row: Mapping[str, Any], now: float) -> EnvFault | None:
        """Take one result row of `backend` at time `now` (seconds, monotonic); the backend's
        fault when this row trips it, else None."""
        if self.cfg.min_tests <= 0 or backend in self.faults:
            return None
        w = self._windows.setdefault(backend, _Window())
        sig = row_signature(row)
        w.rows.append((now, sig))
        if sig is not None:
            w.counts[sig] += 1
        while w.rows and now - w.rows[0][0] > self.cfg.window_s:
            _, old = w.rows.popleft()
            if old is not None:
                w.counts[old] -= 1
                if not w.counts[old]:
                    del w.counts[old]
        n = len(w.rows)
        if sig is None or n < self.cfg.min_tests or w.counts[sig] < self.cfg.share * n:
            return None
        fault = EnvFault(backend, sig, w.counts[sig], n, now - w.rows[0][0])
        self.faults[backend] = fault
        del self._windows[backend]
        return fault


def write_faults(out_dir: Path, faults: list[EnvFault]) -> Path | None:
    """Write a run's faults to `<out_dir>/env_faults.json` (nothing when there are none);
    the path written, or None."""
    if not faults:
        return None
    path = Path(out_dir) / ENV_FAULTS_FILE
    path.write_text(json.dumps([asdict(f) for f in faults], indent=2) + "\n")
    return path


def read_faults(out_dir: Path) -> list[EnvFault]:
    """The faults a run recorded (`write_faults`); none when it has no file or an unreadable
    one (a run from before the detector, a hand-edited file)."""
    path = Path(out_dir) / ENV_FAULTS_FILE
    try:
        return [EnvFault(**f) for f in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []
