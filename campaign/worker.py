"""`FuzzWorker`: makes one test (generate, maybe mutate, pick inputs), evaluates it on the
reference and every configured backend, and reports rows and finding artifacts.

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

import dataclasses
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
from campaign.dynamic_shapes import add_shapes, classify, failing_sets
from campaign.modes import drawn_mode
from campaign.modes.base import Expected
from campaign.oracle import Judgement, judge_sets
from campaign.reference import ReferenceResult, run_reference, run_shadow
from campaign.row import ResultRow
from campaign.sandbox import Job, JobMaterialized, Sandbox, SandboxConfig
from campaign.signature import normalize
from campaign.testcase import TestCase, npz_bytes
from campaign.verdict import Stage, Verdict
from ir.analysis.precision import output_precisions, output_tolerances
from ir.core.graph import Graph
from ir.core.text import print_graph
from ir.gen.builder import GenConfig
from ir.gen.generate import generate
from ir.gen.symbolic_shapes import generate_dyn, wants_dynshape
from ir.numerics.domain import differentiable
from ir.numerics.flow_coverage import CoverConfig, cover
from ir.numerics.input_search import make_valid, search_inputs
from mutators import MutationConfig
from mutators.source import MutationSource


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
class Finding:
    """Artifacts of one non-pass (test, backend), as bytes so they can cross processes/nodes."""

    test_id: str
    backend: str
    verdict: str
    error_sig: str | None
    files: dict[str, bytes]


@dataclass
class TestReport:
    __test__ = False  # not a pytest class

    rows: list[dict[str, Any]]
    findings: list[Finding]
    #: (test id, backend, lines its evaluation added to the evaluating worker's union): the
    #: driver adds them to the campaign's union (`campaign.compiler_coverage_log`)
    coverage: list[tuple[str, str, Covered]] = field(default_factory=list)


@dataclass
class Prepared:
    """A test ready for the backends (`FuzzWorker.prepare`): materialized, with the reference's
    outputs and `base`, the row every backend's row copies (`ResultRow.of_test`).
    `campaign.pipeline` ships it to the evaluation actors as bytes."""

    m: Materialized
    ref: ReferenceResult
    base: ResultRow
    tolerances: list
    precisions: list
    #: the float64 shadow, computed at most once per test, on the first float mismatch
    shadow: list = field(default_factory=list, repr=False)

    @property
    def tc(self) -> TestCase:
        return self.m.tc

    def truth(self):
        if not self.shadow:
            self.shadow.append(run_shadow(self.m))
        return self.shadow[0]

    def labels(self, trains: bool) -> list[str]:
        """What each array of one input set's result is (`output i`, `grad %x`)."""
        return self.tc.mode.judged_labels(self.tc, trains)

    def expected(self, trains: bool) -> Expected:
        """What a backend's result is judged against (`TestMode.expected`): the reference's
        arrays, how many per input set, their tolerances and precisions, and the shadow. A
        gradient or transform test on a backend that does not train is judged on its
        forward outputs alone."""
        return self.tc.mode.expected(self, trains)


def make_dyn_test(cfg: WorkerConfig, test_id: str, seed: int) -> TestCase:
    """A dynamic-shape test from `seed` whatever `GenConfig.p_dynshape` draws for it:
    `FuzzWorker.make_test` with its shapes step on (tests use it)."""
    worker = FuzzWorker(dataclasses.replace(cfg, backends=[], sandbox=False))
    return worker.make_test(test_id, seed, dynshape=True)


def dynshape_fields(prep: Prepared, row: ResultRow, result: BackendResult) -> dict[str, Any]:
    """Compiles counted, and for a dynamic-shape test the kind of its finding
    (`campaign.dynamic_shapes.classify`)."""
    failing = None
    if row.verdict == "mismatch" and prep.tc.dynshape is not None and result.outputs:
        failing = failing_sets(prep, result.outputs)
    return classify(prep.tc, {"verdict": row.verdict, "stage": row.stage}, result, failing)


def timeout_fields(result: BackendResult) -> dict[str, Any]:
    """The row's record of a sandbox timeout and its confirming re-run (docs/results-schema.md):
    a `timeout` verdict with `timeout_confirmed` True is a confirmed hang; any other verdict
    with `timeout_confirmed` False is the re-run's (the first attempt was only slow)."""
    return {"timeout_confirmed": result.timeout_confirmed,
            "timeout_limit_s": result.timeout_limit_s, "confirm_limit_s": result.confirm_limit_s,
            "confirm_s": result.confirm_s}


#: error class of a test that left its sandbox process unusable
PROCESS_DAMAGED = "ProcessDamaged"


def damage_fields(row: ResultRow, result: BackendResult) -> dict[str, Any]:
    """The row's record of what the test did to its sandbox process (`leaked_procs`,
    `damage`); a test that left the process unusable (`BackendResult.unusable`) and otherwise
    passed is a `crash` (ProcessDamaged), any other verdict keeps its own and says so."""
    out: dict[str, Any] = {"leaked_procs": result.leaked_procs,
                           "damage": "; ".join(result.damage) or None}
    if result.unusable:
        what = f"left its process unusable: {', '.join(result.unusable)}"
        if row.verdict == Verdict.PASS.value:
            out.update(verdict=Verdict.CRASH.value, stage=Stage.UNKNOWN.value,
                       error_class=PROCESS_DAMAGED, error_sig=f"{PROCESS_DAMAGED}: {what}",
                       error_msg=what)
        else:
            out["error_msg"] = (row.error_msg or "") + f"; {what}"
    return out


#: the row columns a finding's info.json repeats
FINDING_COLUMNS = ("test_id", "seed", "backend", "backend_config", "dialect", "mode", "target",
                   "verdict", "stage", "error_class",
                   "error_sig", "error_msg", "max_abs_err", "max_rel_err", "mismatch_output",
                   "mismatch_input_set", "n_compiles", "dyn_finding", "timeout_confirmed",
                   "timeout_limit_s", "confirm_limit_s", "confirm_s", "backend_config")


def make_finding(m: Materialized, row: ResultRow, ref: ReferenceResult | None,
                 result: BackendResult | None) -> Finding:
    """The artifacts of a non-pass `row` of test `m`: graph, model, every input set, the
    expected and actual outputs when known, and info.json (the row's `FINDING_COLUMNS`, the
    lineage, coverage, tolerances and the backend's traceback)."""
    tc = m.tc
    files: dict[str, bytes] = {
        "graph.gir": print_graph(tc.graph).encode(),
        "inputs.npz": npz_bytes(tc.values),
    }
    for k, extra in enumerate(tc.extra_inputs, 1):
        files[f"inputs_set{k}.npz"] = npz_bytes(extra)
    if tc.dynshape is not None:  # symbolic dims and each set's shape (docs/dynshape.md)
        files["dynshape.json"] = tc.dynshape.dumps().encode()
    if row.mode == tc.mode.name:  # what the mode adds, where the backend ran it
        files.update(tc.mode.files(tc))
    try:
        files["model.onnx"] = m.onnx_bytes
    except Exception:  # the ONNX build itself failed; info.json says how
        pass
    if ref is not None and ref.outputs is not None:
        files["expected.npz"] = npz_bytes({f"out{i}": a for i, a in enumerate(ref.outputs)})
    if result is not None and result.outputs is not None:
        files["actual.npz"] = npz_bytes({f"out{i}": a for i, a in enumerate(result.outputs)})
    info: dict[str, Any] = {k: getattr(row, k) for k in FINDING_COLUMNS}
    info["lineage"] = tc.lineage
    info["input_sets"] = tc.n_sets
    if tc.coverage is not None:
        info["coverage"] = tc.coverage
    info["output_tolerances"] = [[t.rtol, t.atol] for t in output_tolerances(tc.graph)]
    info["output_precisions"] = [p.short if p else None for p in output_precisions(tc.graph)]
    if result is not None and result.traceback:
        info["traceback"] = result.traceback
    files["info.json"] = json.dumps(info, indent=2, default=str).encode()
    return Finding(tc.test_id, row.backend, row.verdict, row.error_sig or "", files)


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
    """The test maker and the judge of one actor (or of a test, in-process). Public API:
    `make_test` (a test from a seed), `prepare` (materialized, reference run, the shared row),
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
        """Test `test_id` from `seed`: deterministic given the seed, the config, the seed
        pool's history and `avoid`, ops the graph must not hold (capability routing: made for
        a backend that lacks them; the lineage header records them). The steps: a graph,
        valid inputs (repairing the graph), the coverage input sets, and for a
        dynamic-shape test (`dynshape`; None: as `GenConfig.p_dynshape` draws for the seed)
        its other shapes (`campaign.dynamic_shapes.add_shapes`)."""
        if dynshape is None:
            dynshape = wants_dynshape(seed, self.cfg.generator)
        # the mode's own graphs (a gradient test's: float graphs, and every check below also
        # wants the ops differentiable where the inputs land; docs/training.md)
        mode = drawn_mode(seed, self.cfg.generator)
        gen = mode.generator(self.cfg.generator)
        if dynshape:
            # symbolic dims (docs/dynshape.md); not mutated: mutators rewrite the seed pool's
            # concrete graphs, and `avoid` is not applied
            g, dseed = generate_dyn(seed, gen)
            lineage: list[dict[str, Any]] = [{"seed": seed}]
        else:
            # a mutant of a seed-pool entry, or a graph generated from the seed (mutators.source)
            g, lineage = self.mutation.make(test_id, seed, gen)
            dseed = None
            avoid = frozenset(avoid)
            if avoid:
                g, lineage = self._without(g, lineage, seed, avoid)
        with differentiable(mode.differentiates):
            # inputs for which every value is valid (NNSmith-style gradient search), dropping
            # the instructions no input can make valid; if nothing valid remains, the plain
            # search's last try is kept and the reference marks the test invalid
            # a window of a model starts from the model's weights (mutation.model_weights)
            valid = make_valid(g, seed, params=self.mutation.start_values(g, lineage) or None)
            if valid is None:
                return TestCase(test_id, seed, g, search_inputs(g, seed).values, lineage)
            if valid.dropped:
                lineage.append({"repair": "drop", "insts": valid.dropped})
            g, values = valid.graph, valid.search.values
            # more input sets, so every `if` takes both branches and loops run other trip
            # counts
            covered = cover(g, values, seed, self.cfg.coverage)
            tc = TestCase(test_id, seed, g, values, lineage, covered.extra,
                          covered.coverage.summary(), ref_outputs=covered.outputs)
            if dynshape:
                tc = add_shapes(tc, dseed, self.cfg.generator)
        return mode.make(tc, seed, gen)

    def _without(self, g: Graph, lineage: list[dict[str, Any]], seed: int,
                 avoid: frozenset[str]) -> tuple[Graph, list[dict[str, Any]]]:
        """`g` if it holds none of `avoid`, else a graph generated from `seed` by the
        generator restricted to the rest (no loop/scan/if when those are avoided)."""
        if not avoid & set(g.op_counts()):
            lineage[0]["avoid"] = sorted(avoid)
            return g, lineage
        gen = drawn_mode(seed, self.cfg.generator).generator(self.cfg.generator)
        return generate(seed, gen.without(avoid)), [{"seed": seed, "seed_id": f"gen/{seed}",
                                                    "avoid": sorted(avoid)}]

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
            rows.append(row.to_dict())
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
        """The row of one backend's result on a prepared test, and its finding if not a pass."""
        # a gradient or transform test runs in its mode on a backend that can
        # (`TestMode.trains_on`), else forward; one that cannot take the mode at all refuses
        # it (`TestMode.refusal`), so it is never judged against the mode's results
        trains = prep.tc.mode.trains_on(backend)
        row = prep.base.for_backend(backend.name, backend.target, ref_ms=prep.ref.ms,
                                    compile_ms=result.compile_ms, run_ms=result.run_ms,
                                    cpu_ms=result.cpu_ms, backend_config=result.backend_config,
                                    mode=prep.tc.mode.name if trains else "infer",
                                    **timeout_fields(result))
        dialect = result.dialect or backend.dialect
        if dialect:
            row.dialect = dialect
        if result.cov_added is not None:
            row.cov_new = size(result.cov_added)
        if result.verdict is not None or result.failed:
            row.update(**self._failure_fields(result))
        else:
            use_shadow = self.cfg.float64_shadow and backend.shadow_judged
            # a finished run has outputs (`BackendResult`), a prepared test its reference's
            assert result.outputs is not None and prep.ref.outputs is not None
            expected, n, tols, precs, truth = prep.expected(trains)
            j = judge_sets(expected, result.outputs, n, tols, precs, truth if use_shadow else None)
            row.update(**self._judgement_fields(j, prep.labels(trains)))
        row.update(**dynshape_fields(prep, row, result))
        row.update(**damage_fields(row, result))
        if Verdict(row.verdict).is_finding:
            return row, make_finding(prep.m, row, prep.ref, result)
        return row, None

    def blame_finding(self, backend: Backend, result: BackendResult) -> Finding | None:
        """The `crash` finding of an earlier test that left its sandbox process unusable
        (found by the next test's harness error there, `BackendResult.blame`). That test's
        row was already sent: its finding folder and this test's `damage` column say it."""
        if result.blame is None:
            return None
        packed, why = result.blame
        m = JobMaterialized(Job.unpack(packed))
        what = f"left its process unusable: the next test hit a harness error there ({why})"
        row = ResultRow.graphless(m.tc.test_id, m.tc.seed).for_backend(
            backend.name, backend.target, verdict=Verdict.CRASH.value,
            stage=Stage.UNKNOWN.value, error_class=PROCESS_DAMAGED,
            error_sig=f"{PROCESS_DAMAGED}: left its process unusable", error_msg=what)
        return make_finding(m, row, None, None)

    @staticmethod
    def _failure_fields(result: BackendResult) -> dict[str, Any]:
        """Row fields of a backend run that produced no outputs to compare."""
        verdict = result.verdict or Verdict.CRASH
        error_class = result.error_class or "Error"
        msg = result.error_msg or ""
        stage = result.stage or Stage.UNKNOWN
        if verdict is Verdict.TIMEOUT:
            sig = normalize(error_class, f"during {stage.value}", frames=result.frames)
        else:
            sig = normalize(error_class, msg, frames=result.frames)
        return {"verdict": verdict.value,
                "stage": None if verdict is Verdict.SKIPPED else stage.value,
                "error_class": error_class, "error_sig": sig, "error_msg": msg}

    @staticmethod
    def _judgement_fields(j: Judgement, labels: list[str]) -> dict[str, Any]:
        c = j.comparison
        if j.verdict is Verdict.PASS:
            # a pass decided by the shadow keeps its note (the reference was the inaccurate one)
            return {"verdict": Verdict.PASS.value, "error_msg": j.note}
        msg = c.message + (f"; {j.note}" if j.note else "")
        fields = {"stage": Stage.COMPARE.value, "error_msg": msg,
                  "mismatch_output": c.output, "mismatch_input_set": j.input_set,
                  "max_abs_err": c.max_abs_err, "max_rel_err": c.max_rel_err}
        if j.verdict is Verdict.INVALID:
            return {**fields, "verdict": Verdict.INVALID.value, "error_class": "IllConditioned",
                    "error_sig": f"IllConditioned: output {c.output}"}
        what = labels[c.output] if c.output is not None and c.output < len(labels) else \
            f"output {c.output}"
        fields["error_msg"] = msg.replace(f"output {c.output}:", f"{what}:", 1)
        return {**fields, "verdict": Verdict.MISMATCH.value, "error_class": "Mismatch",
                "error_sig": f"Mismatch: {what}"}

    # ---- rows of tests that fail before any backend ------------------------------------------
    def _invalid_all(self, m: Materialized, base: ResultRow, backends: Sequence[str] | None,
                     stage: Stage, error_class: str, msg: str,
                     ref_ms: float | None = None) -> TestReport:
        sig = normalize(error_class, msg)
        rows = [base.for_backend(b.name, b.target, verdict=Verdict.INVALID.value,
                                 stage=stage.value, error_class=error_class, error_sig=sig,
                                 error_msg=msg, ref_ms=ref_ms) for b in self._chosen(backends)]
        findings = [make_finding(m, row, None, None) for row in rows[:1]]
        return TestReport([row.to_dict() for row in rows], findings)

    def _generator_failure(self, test_id: str, seed: int, e: Exception, gen_ms: float,
                           backends: Sequence[str] | None = None) -> TestReport:
        """Call in the `except` block (the traceback goes to the finding)."""
        msg = f"{type(e).__name__}: {e}"
        base = ResultRow.graphless(
            test_id, seed, dialect="eager", verdict=Verdict.INVALID.value,
            stage=Stage.GENERATE.value, error_class=type(e).__name__,
            error_sig=normalize(type(e).__name__, str(e)), error_msg=msg, gen_ms=gen_ms,
            host=self.host, worker=self.label)
        rows = [base.for_backend(b.name, b.target).to_dict() for b in self._chosen(backends)]
        files = {"info.json": json.dumps({"seed": seed, "error": msg,
                                          "traceback": traceback.format_exc()}, indent=2).encode()}
        return TestReport(rows, [Finding(test_id, rows[0]["backend"], Verdict.INVALID.value,
                                         rows[0]["error_sig"], files)])
