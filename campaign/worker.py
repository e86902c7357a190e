"""`FuzzWorker`: one actor's work: makes a test (`campaign.maker.TestMaker`), runs the
reference and every configured backend on it, has each result judged (`campaign.judge.Judge`),
and reports rows and finding artifacts; feeds the seed pool back.

A plain class (no Ray): the driver wraps it in `ray.remote`, tests use it directly. Everything it
returns is plain data and bytes, so it can cross process and node boundaries.

Each backend evaluates in its own `campaign.sandbox.Sandbox` process (long-lived, replaced when a
test kills or hangs it), so a segfault, abort, out-of-memory or hang of a compiler becomes a row
(`signal`, `crash`, `timeout`) and the worker goes on. A test that runs past the sandbox's limit
is re-run once in a fresh process with a larger one (`SandboxConfig.confirm_timeout_factor`):
only a confirmed hang is a `timeout`; a test that was merely slow (under load) gets the re-run's
verdict and `timeout_confirmed = False`. `WorkerConfig.sandbox = False` evaluates
in-process instead (debugging, benchmarks). The reference (and its float64 shadow, consulted
only when a float output mismatches) runs in the worker itself.
"""
from __future__ import annotations

import json
import os
import socket
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult, make_backend
from campaign.compiler_coverage import (
    CoverageConfig,
    CoverageSpec,
    CoverageUnion,
    Covered,
    run_measured,
    size,
)
from campaign.judge import Finding, Judge, Prepared, make_finding
from campaign.maker import TestMaker
from campaign.reference import run_reference
from campaign.row import ResultRow
from campaign.sandbox import Job, Sandbox, SandboxConfig
from campaign.signature import normalize
from campaign.testcase import TestCase
from campaign.verdict import Stage, Verdict
from ir.gen.builder import GenConfig
from ir.numerics.flow_coverage import CoverConfig
from mutators import MutationConfig
from mutators.source import MutationSource

__all__ = ["FuzzWorker", "Finding", "Prepared", "TestReport", "WorkerConfig", "make_dyn_test",
           "make_finding", "set_single_thread"]


@dataclass
class WorkerConfig:
    generator: GenConfig = field(default_factory=GenConfig)
    #: backend specs (`campaign.backends.make_backend`); rows carry them as `backend`
    backends: list[str] = field(default_factory=lambda: ["ort"])
    mutation: MutationConfig = field(default_factory=MutationConfig)
    #: evaluate each backend in a sandbox process (False: in this process, unprotected)
    sandbox: bool = True
    #: per-test timeout, memory limit and recycling of the sandbox processes
    limits: SandboxConfig = field(default_factory=SandboxConfig)
    #: judge float mismatches against the float64 shadow of the reference
    float64_shadow: bool = True
    #: extra input sets for tests with control flow (`ir.numerics.flow_coverage`)
    coverage: CoverConfig = field(default_factory=CoverConfig)
    #: known bugs' triggers (`campaign.known`): generation says which backends' a test matches
    known: list = field(default_factory=list)
    #: backend spec -> tests an evaluator compiles as one module (`BackendOptions.merge`)
    merge: dict[str, int] = field(default_factory=dict)
    #: backend spec -> the fraction of tests run in a drawn configuration
    #: (`BackendOptions.configs`; `Backend.sample_configs`)
    configs: dict[str, float] = field(default_factory=dict)
    #: compiler coverage (`campaign.compiler_coverage`; `campaign.compiler_coverage` in the campaign config)
    compiler_coverage: CoverageConfig = field(default_factory=CoverageConfig)


@dataclass
class TestReport:
    __test__ = False  # not a pytest class

    #: one `ResultRow` per backend, as the judge made it: the form it keeps until the sink
    #: writes it to Arrow
    rows: list[ResultRow]
    findings: list[Finding]
    #: (test id, backend, lines its evaluation added to the evaluating worker's union): the
    #: driver adds them to the campaign's union (`campaign.compiler_coverage_log`)
    coverage: list[tuple[str, str, Covered]] = field(default_factory=list)


def make_dyn_test(cfg: WorkerConfig, test_id: str, seed: int) -> TestCase:
    """A dynamic-shape test from `seed` whatever `GenConfig.p_dynshape` draws for it:
    `FuzzWorker.make_test` with its shapes step on (tests use it)."""
    maker = TestMaker(cfg.generator, cfg.coverage, MutationSource(cfg.mutation, cfg.generator))
    return maker.make_test(test_id, seed, dynshape=True)


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def set_single_thread() -> None:
    """One thread per worker for torch (ORT sessions set their own): 2 cores otherwise thrash."""
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # may only be set once per process
        pass


class FuzzWorker:
    """One actor's work (or a test's, in-process): its `maker` (`campaign.maker.TestMaker`),
    its `judge_` (`campaign.judge.Judge`), a sandbox per backend, and the seed pool they share.
    Public API: `make_test` (a test from a seed), `prepare` (materialized, reference run, the shared row),
    `make_prepared` (both, a failure of either as its finished report), `evaluate` (one
    backend on a test), `judge` (a backend's result as its row and finding), `blame_finding`,
    `run` / `run_case` (all of it, every backend), `feedback` (verdicts for the seed pool).
    `backends` is fixed at construction; calls that report rows for some of them take their
    names."""

    def __init__(self, cfg: WorkerConfig, name: str = "worker"):
        set_single_thread()
        self.cfg = cfg
        self.name = name
        self.host = socket.gethostname()
        self.backends: list[Backend] = [make_backend(b) for b in cfg.backends]
        for b in self.backends:
            b.sample_configs = cfg.configs.get(b.name, 0.0)
        #: per backend: what compiler coverage measures of it (none: not measured)
        self.coverage: dict[str, CoverageSpec] = {}
        for b in self.backends:
            spec = cfg.compiler_coverage.spec(b.name, b.COVERAGE_PACKAGES)
            if spec is not None:
                self.coverage[b.name] = spec
        #: per backend: the lines its measured tests ran, kept here, outside every sandbox
        #: process, so that a crashed or replaced process loses none of it
        self.unions: dict[str, CoverageUnion] = {b: CoverageUnion() for b in self.coverage}
        self.sandboxes: dict[str, Sandbox] = (
            {b.name: Sandbox(b, cfg.limits, self.coverage.get(b.name)) for b in self.backends}
            if cfg.sandbox else {})
        #: the seed pool and the mutation engine (docs/mutation.md)
        self.mutation = MutationSource(cfg.mutation, cfg.generator)
        self.engine = self.mutation.engine
        #: the maker of its tests and the judge of their results
        self.maker = TestMaker(cfg.generator, cfg.coverage, self.mutation)
        self.judge_ = Judge(cfg.float64_shadow)

    @property
    def label(self) -> str:
        """This worker in rows' `worker` column: name and pid."""
        return f"{self.name}@{os.getpid()}"

    def _chosen(self, backends: Sequence[str] | None) -> list[Backend]:
        """The backends named (None: all of this worker's), in the order given."""
        if backends is None:
            return self.backends
        by_name = {b.name: b for b in self.backends}
        return [by_name[b] for b in backends]

    def feedback(self, outcomes: list[tuple[str, str]]) -> int:
        """Backend verdicts of tests this worker made, as (test id, `backend:verdict:error_sig`),
        for the seed pool (`mutators.source.MutationSource.feedback`); returns how many were new."""
        return self.mutation.feedback(outcomes)

    def coverage_feedback(self, outcomes: list[tuple[str, str, int]]) -> int:
        """Compiler coverage of tests this worker made, as (test id, backend, new lines), for
        the seed pool (`MutationSource.coverage_feedback`); returns how many tests it kept."""
        return self.mutation.coverage_feedback(outcomes)

    def close(self) -> None:
        """Stop the sandbox processes (they also die with this process)."""
        for sb in self.sandboxes.values():
            sb.close()

    def __enter__(self) -> FuzzWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def evaluate(self, backend: Backend, m: Materialized, job: Job | None = None,
                 confirm: bool = True, timeout_s: float | None = None) -> BackendResult:
        """One backend on one test: in its sandbox, or in-process when sandboxing is off.
        `confirm`: re-run a sandbox timeout to confirm it; `timeout_s`: the sandbox's limit
        for this test (None: `limits.timeout_s`; `Sandbox.evaluate`)."""
        sb = self.sandboxes.get(backend.name)
        if sb is None:
            spec = self.coverage.get(backend.name)
            measure = spec if spec is not None and spec.measures(m.tc.seed) else None
            result, covered = run_measured(measure, lambda: backend.evaluate(m))
            result.covered = covered
        else:
            result = sb.evaluate(m, job, timeout_s=timeout_s, confirm=confirm)
        if result.covered is not None:
            result.cov_added = self.unions[backend.name].add(result.covered)
        return result

    # ---- making a test -------------------------------------------------------------------------
    def make_test(self, test_id: str, seed: int, avoid: Iterable[str] = (),
                  dynshape: bool | None = None) -> TestCase:
        """`TestMaker.make_test` with this worker's seed pool."""
        return self.maker.make_test(test_id, seed, avoid, dynshape)

    def make_prepared(self, test_id: str, seed: int, avoid: Iterable[str] = (),
                      backends: Sequence[str] | None = None) -> Prepared | TestReport:
        """`make_test`, then `prepare`: the test ready for the backends, or the finished
        report of one that failed (a generator bug, an invalid test), with one row per backend
        of `backends` (names; None: all of this worker's)."""
        t0 = time.perf_counter()
        try:
            tc = self.make_test(test_id, seed, avoid)
        except Exception as e:  # a generator bug: recorded as invalid, never fatal
            return self._generator_failure(test_id, seed, e, ms_since(t0), backends)
        return self.prepare(tc, ms_since(t0), backends)

    # ---- running it ----------------------------------------------------------------------------
    def run(self, test_id: str, seed: int) -> TestReport:
        """Make test `test_id` from `seed` and evaluate it on every backend."""
        prep = self.make_prepared(test_id, seed)
        return prep if isinstance(prep, TestReport) else self.evaluate_all(prep)

    def run_case(self, tc: TestCase, gen_ms: float = 0.0) -> TestReport:
        """Evaluate a ready test case (reference, then every backend) into rows and findings."""
        prep = self.prepare(tc, gen_ms)
        return prep if isinstance(prep, TestReport) else self.evaluate_all(prep)

    def evaluate_all(self, prep: Prepared, backends: Sequence[str] | None = None) -> TestReport:
        """A prepared test on the backends named (None: all of this worker's): rows, findings,
        and the coverage each added, which this worker's own seed pool hears of at once."""
        rows, findings, coverage = [], [], []
        job = Job.of(prep.m) if self.sandboxes else None
        for backend in self._chosen(backends):
            result = self.evaluate(backend, prep.m, job)
            row, found = self.judge(backend, prep, result)
            rows.append(row)
            findings += [f for f in (found, self.blame_finding(backend, result)) if f]
            if result.cov_added is not None:
                coverage.append((prep.tc.test_id, backend.name, result.cov_added))
        # the whole path in one process: this worker's own pool hears of the new code at once
        self.coverage_feedback([(t, b, size(c)) for t, b, c in coverage])
        return TestReport(rows, findings, coverage)

    def prepare(self, tc: TestCase, gen_ms: float = 0.0,
                backends: Sequence[str] | None = None) -> Prepared | TestReport:
        """Materialize a test and run the reference once: what every backend's judgement needs
        (`Prepared`), or the finished report of an invalid test (ill-formed ONNX, invalid
        reference), one row per backend of `backends` (names; None: all of this worker's)."""
        m = Materialized(tc)
        base = ResultRow.of_test(tc, gen_ms, self.mutation.novel(tc.graph), self.host, self.label)
        try:
            m.onnx_model  # noqa: B018 (builds and checks it)
        except Exception as e:  # our ONNX is ill-formed: our bug, not the compiler's
            return self._invalid_all(m, base, backends, Stage.IMPORT, type(e).__name__,
                                     f"ONNX build/check failed: {e}")
        ref = run_reference(m)
        self.mutation.observe(tc.test_id, tc.graph, tc.lineage, not ref.problem, ref.error_class)
        if ref.problem:
            return self._invalid_all(m, base, backends, Stage.REFERENCE,
                                     ref.error_class or "InvalidReference", ref.problem,
                                     ref_ms=ref.ms)
        # per result of one input set, the same in every set
        tolerances, precisions = tc.mode.tolerances(tc)
        return Prepared(m, ref, base, tolerances, precisions)

    def judge(self, backend: Backend, prep: Prepared,
              result: BackendResult) -> tuple[ResultRow, Finding | None]:
        """`Judge.judge`: the row of one backend's result on a prepared test, and its finding
        if not a pass."""
        return self.judge_.judge(backend, prep, result)

    def blame_finding(self, backend: Backend, result: BackendResult) -> Finding | None:
        """`Judge.blame_finding`."""
        return self.judge_.blame_finding(backend, result)

    # ---- rows of tests that fail before any backend ------------------------------------------
    def _invalid_all(self, m: Materialized, base: ResultRow, backends: Sequence[str] | None,
                     stage: Stage, error_class: str, msg: str,
                     ref_ms: float | None = None) -> TestReport:
        sig = normalize(error_class, msg)
        rows = [base.for_backend(b.name, b.target, verdict=Verdict.INVALID.value,
                                 stage=stage.value, error_class=error_class, error_sig=sig,
                                 error_msg=msg, ref_ms=ref_ms) for b in self._chosen(backends)]
        findings = [make_finding(m, row, None, None) for row in rows[:1]]
        return TestReport(rows, findings)

    def _generator_failure(self, test_id: str, seed: int, e: Exception, gen_ms: float,
                           backends: Sequence[str] | None = None) -> TestReport:
        """Call in the `except` block (the traceback goes to the finding)."""
        msg = f"{type(e).__name__}: {e}"
        base = ResultRow.graphless(
            test_id, seed, dialect="eager", verdict=Verdict.INVALID.value,
            stage=Stage.GENERATE.value, error_class=type(e).__name__,
            error_sig=normalize(type(e).__name__, str(e)), error_msg=msg, gen_ms=gen_ms,
            host=self.host, worker=self.label)
        rows = [base.for_backend(b.name, b.target) for b in self._chosen(backends)]
        files = {"info.json": json.dumps({"seed": seed, "error": msg,
                                          "traceback": traceback.format_exc()}, indent=2).encode()}
        return TestReport(rows, [Finding(test_id, rows[0]["backend"], Verdict.INVALID.value,
                                         rows[0]["error_sig"], files)])
