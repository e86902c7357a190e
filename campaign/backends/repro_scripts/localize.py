"""Localization (docs/triage.md, "Where the fault is"): which stage, optimization level, pass
or flag of the compiler the failure needs, found the way the compiler's own developers look.

`python repro.py --localize` runs this script again in fresh processes, each with some of its
per-test values changed (`python repro.py --set NAME=<json> ...`: any run of the script takes
them), judges each run as the script judges itself (exit 1 the same failure, 0 it passes, 2
another failure; a signal, or no result in time), and prints one line per run, then
`CULPRIT: <compiler>: <what>` or `NOT LOCALIZED: <why>`, and last a line
`LOCALIZATION: <json>` that dynsmith's triage reads (`campaign.triage.pipeline.localization`).

The plan is the backend's: its body part defines `ablate(probe) -> (culprit or None, why)`,
which asks `probe(what, **values)` (or `probe.run(what, values, env)`) how the failure fares
with those values changed. A plan only ever names a culprit that a run showed: the failure goes
away when that one thing alone is switched off (or the stage before it passes). A step that
cannot decide says so in `why`; nothing is guessed. Runs are cached by their values, and
the whole localization has a time budget (`--budget SECONDS`, default `LOCALIZE_BUDGET_S`).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from campaign.backends.repro_scripts.prelude import EXPECT

#: how a run fared
SAME = "fails the same way"
PASSES = "passes"
TIMEOUT = "timeout"
#: the whole localization's seconds, unless `--budget` says otherwise
LOCALIZE_BUDGET_S = 900.0
#: one run's seconds: the first run's time times this, at least `RUN_FLOOR_S`
RUN_FACTOR, RUN_FLOOR_S = 4.0, 120.0


class OutOfTime(Exception):
    """The localization's budget is spent."""


@dataclass(frozen=True)
class Step:
    """One run of the script: what was changed (words, and the per-test values or environment
    it set) and how the failure fared."""

    what: str
    values: dict[str, Any]
    outcome: str
    seconds: float


def parse_settings(argv: Sequence[str]) -> dict[str, Any]:
    """The per-test values `--set NAME=<json>` of a command line."""
    out: dict[str, Any] = {}
    for i, arg in enumerate(argv):
        if arg == "--set" and i + 1 < len(argv):
            name, _, text = argv[i + 1].partition("=")
            try:
                out[name] = json.loads(text)
            except json.JSONDecodeError:
                sys.exit(f"repro.py: --set {argv[i + 1]!r}: the value is not JSON")
    return out


def apply_settings(namespace: dict[str, Any], argv: Sequence[str]) -> None:
    """Change the script's per-test values as `--set` says (a name it has no value of is an
    error: exit 2)."""
    for name, value in parse_settings(argv).items():
        if not name.isupper() or name not in namespace:
            print(f"repro.py: --set {name}: this script has no per-test value {name}",
                  flush=True)
            sys.exit(2)
        namespace[name] = value


def judge_run(code: int, stdout: str, expired: bool) -> str:
    """How one run fared, from its exit code and output (the script's own protocol; a signal
    is the same failure when the expected verdict is that signal)."""
    if expired:
        return SAME if EXPECT["verdict"] == "timeout" else TIMEOUT
    if code == 1 and "REPRODUCED" in stdout:
        return SAME
    if code == 0 and "NOT REPRODUCED" in stdout:
        return PASSES
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        if EXPECT["verdict"] == "signal" and EXPECT.get("error_class") in (None, name):
            return SAME
        return f"fails otherwise: killed by {name}"
    if EXPECT["verdict"] == "crash" and EXPECT.get("error_class") == "ProcessExit" \
            and code not in (0, 1, 2):
        return SAME
    found = re.findall(r"^DIFFERENT FAILURE: (.*)$", stdout, re.M)
    if found:
        return f"fails otherwise: {found[-1][:200]}"
    last = (stdout.strip().splitlines() or [f"exit {code}"])[-1]
    return f"fails otherwise: exit {code}: {last[:200]}"


class Probe:
    """Runs the script with changed per-test values, in a fresh process each (a crash or a
    signal ends only that run), and keeps every step. `fixed`: values every run sets
    besides its own (a plan that goes on from a configuration it narrowed: a cache test's
    plan, the caches shown not needed, runs torch.compile's with them off)."""

    def __init__(self, script: str, budget_s: float):
        self.script = script
        self.deadline = time.monotonic() + budget_s
        self.steps: list[Step] = []
        self.run_limit_s: float | None = None
        self.fixed: dict[str, Any] = {}
        self._seen: dict[str, str] = {}

    def __call__(self, what: str, **values: Any) -> str:
        return self.run(what, values)

    def run(self, what: str, values: dict[str, Any], env: dict[str, str] | None = None) -> str:
        """How the failure fares with `values` (and environment `env`) changed, `fixed`
        besides; raises OutOfTime when the budget is spent."""
        values = {**self.fixed, **values}
        key = json.dumps([values, env or {}], sort_keys=True, default=str)
        if key in self._seen:
            return self._seen[key]
        left = self.deadline - time.monotonic()
        if left <= 1:
            raise OutOfTime
        limit = min(left, self.run_limit_s or left)
        cmd = [sys.executable, self.script]
        for name, value in values.items():
            cmd += ["--set", f"{name}={json.dumps(value)}"]
        start = time.monotonic()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, **(env or {})},
                                    cwd=os.path.dirname(self.script), start_new_session=True)
            try:
                proc.wait(timeout=limit)
                expired = False
            except subprocess.TimeoutExpired:
                expired = True
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
        seconds = time.monotonic() - start
        if expired and limit < (self.run_limit_s or limit + 1) and EXPECT["verdict"] != "timeout":
            raise OutOfTime
        if self.run_limit_s is None:
            self.run_limit_s = max(RUN_FLOOR_S, RUN_FACTOR * seconds)
        outcome = judge_run(proc.returncode, text, expired)
        shown = {**values, **({"env": env} if env else {})}
        self.steps.append(Step(what, shown, outcome, round(seconds, 1)))
        print(f"[localize] {what}: {outcome} ({seconds:.1f} s)", flush=True)
        self._seen[key] = outcome
        return outcome


def first_failing(probe: Probe, steps: Sequence[tuple[str, dict[str, Any]]]
                  ) -> tuple[int | None, list[str]]:
    """Runs `steps` (what, values) in order until one fails the same way: its index (None:
    none did) and the outcomes so far."""
    outcomes = []
    for i, (what, values) in enumerate(steps):
        outcomes.append(probe(what, **values))
        if outcomes[-1] == SAME:
            return i, outcomes
    return None, outcomes


def one_at_fault(probe: Probe, names: Sequence[str],
                 switched_off: Callable[[list[str]], tuple[str, dict[str, Any], dict[str, str]]]
                 ) -> tuple[str | None, str]:
    """The one of `names` (passes, optimizers, flags) whose switching off alone makes the
    failure go away, by bisection; (None, why) when there is none. `switched_off(subset)`
    gives the run that switches those off: (what, values, environment)."""
    def fares(subset: list[str]) -> str:
        what, values, env = switched_off(subset)
        return probe.run(what, values, env)

    names = list(dict.fromkeys(names))
    if not names:
        return None, "there is nothing to switch off"
    everything = fares(names)
    if everything != PASSES:
        return None, f"with all {len(names)} switched off it still {everything}"
    left = names
    while len(left) > 1:
        half, rest = left[:len(left) // 2], left[len(left) // 2:]
        if fares(half) == PASSES:
            left = half
        elif fares(rest) == PASSES:
            left = rest
        else:
            return None, (f"no single one is at fault: switching off either half of "
                          f"{len(left)} leaves it failing (it needs several together)")
    if len(names) == 1 or fares(left) == PASSES:
        return left[0], f"switching off {left[0]} alone makes it pass"
    return None, f"switching off {left[0]} alone does not make it pass"


def localize(ablate: Callable[[Probe], tuple[str | None, str]] | None,
             argv: Sequence[str]) -> None:
    """`repro.py --localize`: run the backend's plan, print the ablation and the result."""
    budget = LOCALIZE_BUDGET_S
    if "--budget" in argv:
        budget = float(argv[list(argv).index("--budget") + 1])
    probe = Probe(os.path.abspath(sys.argv[0]), budget)
    if ablate is None:
        culprit, why = None, "this backend has no localization plan"
    else:
        try:
            base = probe("as it failed (the configuration the triage found)")
            if base != SAME:
                culprit, why = None, f"the failure does not reproduce: it {base}"
            else:
                culprit, why = ablate(probe)
        except OutOfTime:
            culprit, why = None, (f"out of time after {len(probe.steps)} runs "
                                  f"(budget {budget:g} s)")
    print(f"CULPRIT: {culprit} ({why})" if culprit else f"NOT LOCALIZED: {why}", flush=True)
    result = {"culprit": culprit, "why": why, "steps": [asdict(s) for s in probe.steps]}
    print("LOCALIZATION: " + json.dumps(result, default=str), flush=True)
