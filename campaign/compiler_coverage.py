"""Compiler coverage of one test: which lines of a backend's Python code its evaluation ran
(docs/coverage.md).

- `CoverageSpec`: what to measure for one backend: its packages (path fragments such as
  `torch/_dynamo`, matched anywhere in a file's path) and the fraction of tests measured,
  chosen by test seed (deterministic: a rerun measures the same tests).
- `measuring(spec)`: a context manager around one evaluation, with coverage.py's tracer
  restricted to the packages (lines, not arcs: see docs/coverage.md); `Probe.covered` is
  what ran, as `Covered`.
- `CoverageUnion`: the lines seen so far for one backend; `add` returns the lines a test
  added. A sandbox's union lives in its *parent* process (`FuzzWorker`), which outlives every
  sandbox process: a crash or a hang replaces the process, never the union.

Plain Python (coverage.py and the standard library): usable in a sandbox process, in the
worker, and in the driver.
"""
from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

#: file path -> line numbers (a test's covered lines, or what a union added)
Covered = dict[str, frozenset[int]]


@dataclass
class CoverageConfig:
    """The `campaign.compiler_coverage` group (docs/coverage.md)."""

    #: measure compiler coverage (off: no tracer runs, `cov_new` null, no coverage/ folder)
    enabled: bool = False
    #: the fraction of tests measured per backend, chosen by test seed
    rate: float = 1.0
    #: backend spec -> its own fraction, instead of `rate` (a costly tracer: a lower one)
    rates: dict[str, float] = field(default_factory=dict)
    #: backend spec -> the packages measured (path fragments), instead of the backend's own
    #: (`Backend.COVERAGE_PACKAGES`); [] turns a backend's measuring off
    packages: dict[str, list[str]] = field(default_factory=dict)

    def spec(self, backend: str, own: tuple[str, ...]) -> CoverageSpec | None:
        """What to measure of `backend` (its spec, and its own packages); None: nothing."""
        rate = self.rates.get(backend, self.rate)
        packages = tuple(self.packages.get(backend, own))
        if not self.enabled or rate <= 0 or not packages:
            return None
        return CoverageSpec(packages, rate)

    def problems(self, backends: list[str]) -> list[tuple[bool, str]]:
        """Checks of the config (ok, one-line message naming the field)."""
        key = "campaign.compiler_coverage"
        checks = [(0.0 <= self.rate <= 1.0, f"{key}.rate: must be in [0, 1], got {self.rate}")]
        for spec, rate in self.rates.items():
            checks += [(spec in backends, f"{key}.rates.{spec}: {spec!r} is not in "
                                          f"campaign.backends {list(backends)}"),
                       (0.0 <= rate <= 1.0, f"{key}.rates.{spec}: must be in [0, 1], got {rate}")]
        for spec, pkgs in self.packages.items():
            checks.append((spec in backends,
                           f"{key}.packages.{spec}: {spec!r} is not in campaign.backends "
                           f"{list(backends)}"))
            bad = [p for p in pkgs if not p.strip("/ ") or any(c in p for c in "*?[]")]
            checks.append((not bad, f"{key}.packages.{spec}: bad package {bad[0]!r} (a path "
                                    "fragment such as torch/_dynamo, no wildcards)" if bad else ""))
        return checks


@dataclass(frozen=True)
class CoverageSpec:
    """What to measure of one backend. Invariant: `packages` non-empty (a backend without
    packages has no spec: nothing measured, `cov_new` null)."""

    packages: tuple[str, ...]
    #: the fraction of tests measured, chosen by test seed
    rate: float = 1.0

    def measures(self, seed: int) -> bool:
        """Whether the test of `seed` is measured (the same seed always gets the same answer)."""
        if self.rate >= 1.0:
            return True
        return random.Random(f"coverage/{seed}").random() < self.rate

    @property
    def include(self) -> list[str]:
        """coverage.py's `include` patterns (fnmatch over absolute file paths)."""
        return [f"*/{p.strip('/')}/*" for p in self.packages]


@dataclass
class Probe:
    """The lines one measured evaluation ran (`measuring`); `covered` is set when it ends."""

    covered: Covered = field(default_factory=dict)


@contextmanager
def measuring(spec: CoverageSpec) -> Iterator[Probe]:
    """Trace the block's Python lines in `spec`'s packages (this thread; a compiler's worker
    threads and subprocesses are not traced). The tracer stops even when the block raises."""
    cov = _tracer(spec)
    probe = Probe()
    cov.start()
    try:
        yield probe
    finally:
        cov.stop()
        data = cov.get_data()
        for f in data.measured_files():
            lines = data.lines(f)
            if lines:
                probe.covered[f] = frozenset(lines)
        cov.erase()


#: per spec, this process's coverage.py object: made once (making one and its first start
#: cost tens of milliseconds), erased after each measured block
_TRACERS: dict[CoverageSpec, Any] = {}


def _tracer(spec: CoverageSpec) -> Any:
    cov = _TRACERS.get(spec)
    if cov is None:
        # by name: mypy, run over the checkout, takes `import coverage` for ir/numerics/flow_coverage.py
        coverage = importlib.import_module("coverage")
        cov = _TRACERS[spec] = coverage.Coverage(data_file=None, config_file=False,
                                                 include=spec.include, branch=False)
    return cov


def run_measured(spec: CoverageSpec | None, fn: Callable[[], T]) -> tuple[T, Covered | None]:
    """`fn()`, measured under `spec` (None: not measured): (its value, the lines it ran or
    None)."""
    if spec is None:
        return fn(), None
    with measuring(spec) as probe:
        value = fn()
    return value, probe.covered


def size(covered: Mapping[str, frozenset[int] | set[int]]) -> int:
    """Lines in a `Covered` (or a union's table)."""
    return sum(len(v) for v in covered.values())


class CoverageUnion:
    """The lines one backend's tests have run so far. Invariant: only grows; `add` returns
    exactly the lines it grew by."""

    def __init__(self) -> None:
        self.lines: dict[str, set[int]] = {}

    def __len__(self) -> int:
        return size(self.lines)

    def add(self, covered: Mapping[str, frozenset[int]]) -> Covered:
        """Add a test's lines; return those not seen before (empty: nothing new)."""
        new: Covered = {}
        for f, lines in covered.items():
            seen = self.lines.setdefault(f, set())
            fresh = lines - seen
            if fresh:
                seen |= fresh
                new[f] = frozenset(fresh)
        return new

    def rows(self) -> Iterator[tuple[str, int]]:
        """(file, line), sorted."""
        for f in sorted(self.lines):
            for line in sorted(self.lines[f]):
                yield f, line
