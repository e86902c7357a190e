"""The judge of a test's result on one backend: its row and, for a non-pass, its finding.

`Prepared` is what a judgement needs of a test (materialized, the reference's result, the row
every backend's row copies, tolerances); `Judge.judge` turns one backend's `BackendResult` into
that backend's `ResultRow` and `Finding`, as the test's mode says (`campaign.modes`: what it
is judged against, its labels, its files). Plain code: no process, no Ray.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult
from campaign.compiler_coverage import size
from campaign.dynamic_shapes import classify, failing_sets
from campaign.modes.base import Expected
from campaign.oracle import Judgement, judge_sets
from campaign.reference import ReferenceResult, run_shadow
from campaign.row import ResultRow
from campaign.sandbox import Job, JobMaterialized
from campaign.signature import normalize
from campaign.testcase import TestCase, npz_bytes
from campaign.verdict import Stage, Verdict
from ir.analysis.precision import output_precisions, output_tolerances
from ir.core.text import print_graph


@dataclass
class Finding:
    """Artifacts of one non-pass (test, backend), as bytes so they can cross processes/nodes."""

    test_id: str
    backend: str
    verdict: str
    error_sig: str | None
    files: dict[str, bytes]


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


def dynshape_fields(prep: Prepared, row: ResultRow, result: BackendResult) -> dict[str, Any]:
    """Compiles counted, and for a dynamic-shape test the kind of its finding
    (`campaign.dynamic_shapes.classify`)."""
    failing = None
    if row.verdict == "mismatch" and prep.tc.shapes.judges_sets() and result.outputs:
        failing = failing_sets(prep, result.outputs)
    out = classify(prep.tc, {"verdict": row.verdict, "stage": row.stage}, result, failing)
    if result.cache_hits is not None:
        out["cache_hits"] = result.cache_hits
    return out


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
                   "mismatch_input_set", "n_compiles", "cache_hits", "dyn_finding",
                   "timeout_confirmed",
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
    files.update(tc.shapes.files(tc))  # a dynamic-shape test's dims and set shapes
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


class Judge:
    """Judges backends' results on prepared tests (`judge`) and makes the finding of a test
    that left its sandbox process unusable (`blame_finding`). `float64_shadow`: judge float
    mismatches against the float64 shadow of the reference."""

    def __init__(self, float64_shadow: bool = True) -> None:
        self.float64_shadow = float64_shadow

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
                                    mode=prep.tc.mode.row_mode(trains),
                                    **timeout_fields(result))
        dialect = result.dialect or backend.dialect
        if dialect:
            row.dialect = dialect
        if result.cov_added is not None:
            row.cov_new = size(result.cov_added)
        if result.verdict is not None or result.failed:
            row.update(**self._failure_fields(result))
        else:
            use_shadow = self.float64_shadow and backend.shadow_judged
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

