"""The campaign's two stages, Ray-free: generation and per-backend evaluation, with one test
case crossing between them as bytes.

- `Generator` (a CPU stage): makes a test (`FuzzWorker.make_test`: generate, maybe mutate,
  inputs, extra input sets), materializes it (ONNX, full checker) and runs the reference (torch
  eager on every input set) once (`FuzzWorker.prepare`). A valid test leaves as a packed
  `Prepared` (`pack_case`) with the row fields its backends' rows share; an invalid one leaves
  as its finished report (one `invalid` row per backend the test was meant for).
- `Evaluator` (one per backend, placed where the backend's target is): unpacks a case, runs it
  in the backend's sandbox process and judges the result against the shipped reference
  (`FuzzWorker.judge`): one row and, for a non-pass, a finding. A backend with `merge` k > 1
  compiles up to k cases of a batch as one merged test and splits the result back, one row
  per case; a case the merged run did not pass cleanly is re-run alone (`campaign.merge`).

Both take a batch per call, so the per-call costs (Ray's, the driver's) are paid once per batch.
A failure of our own code on one test becomes `CaseError` in that test's place, never a lost
batch. `campaign.driver` (the only module importing Ray) wraps both in actors; tests use them
directly.

Wire format (`pack_case`): a pickle of plain data between our own processes, never written to
disk: the sandbox `Job` bytes (graph ops travel as registry name + attributes), the coverage,
the reference outputs and time, the shared row fields and the per-output tolerances. The
evaluator hands the `Job` bytes to its sandbox process as they came.
"""
from __future__ import annotations

import dataclasses
import faulthandler
import os
import pickle
import sys
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from campaign.artifacts import Materialized
from campaign.compiler_coverage import Covered
from campaign.known import matching
from campaign.merge import merge as build_merged
from campaign.merge import note as merge_note
from campaign.merge import plan as merge_plan
from campaign.reference import ReferenceResult
from campaign.row import ResultRow, utc_now
from campaign.sandbox import Job, JobMaterialized
from campaign.worker import Finding, FuzzWorker, Prepared, TestReport, WorkerConfig, make_finding

#: the end of a traceback kept in a harness failure's message and log line (where it failed)
TRACE_TAIL = 2000
#: a test whose generation runs this long has every thread's stack dumped to the actor's stderr
#: (Ray's worker log): where a hang is, before the driver kills the actor at test_timeout_s
STACK_DUMP_S = float(os.environ.get("DYNSMITH_STACK_DUMP_S", "60"))


@dataclass
class CaseError:
    """Our own code failed on one test (not the compiler: that is a row): the message and
    traceback, for the driver's `WorkerError` row."""

    message: str


@dataclass
class Generated:
    """What generation made of one test: either a valid `case` for the evaluators (with `base`,
    the row its rows copy) or the finished `report` of an invalid
    test."""

    test_id: str
    seed: int
    case: bytes | None
    base: ResultRow | None
    report: TestReport | None
    ms: float  #: generation + ONNX build + reference, wall time in the actor
    #: backend -> the known bug (bucket id) whose trigger the graph matches (`campaign.known`)
    known: dict[str, str] = dataclasses.field(default_factory=dict)


def pack_case(prep: Prepared) -> bytes:
    """A prepared test as bytes for an evaluator (see the module doc)."""
    payload = {
        "job": Job.of(prep.m).pack(), "coverage": prep.tc.coverage,
        "ref_outputs": prep.ref.outputs, "ref_ms": prep.ref.ms, "base": prep.base,
        "ref_forward": prep.ref.forward,
        "tolerances": prep.tolerances, "precisions": prep.precisions,
    }
    return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_case(data: bytes) -> Prepared:
    p = pickle.loads(data)
    job = Job.unpack(p["job"])
    job._packed = p["job"]  # the sandbox process gets the bytes as they came
    m = JobMaterialized(job)
    m.tc.coverage = p["coverage"]
    return Prepared(m, ReferenceResult(p["ref_outputs"], p["ref_ms"], forward=p["ref_forward"]),
                    p["base"],
                    p["tolerances"], p["precisions"])


def case_finding(data: bytes, row: ResultRow) -> Finding:
    """The artifacts of a packed test for a row the driver made itself (its evaluator died or
    hung on it): graph, model, inputs, expected outputs, info.json."""
    prep = unpack_case(data)
    return make_finding(prep.m, row, prep.ref, None)


def _error(test_id: str) -> CaseError:
    return CaseError(f"harness error on {test_id}: {traceback.format_exc()[-TRACE_TAIL:]}")


class Generator:
    """The generation stage: tests from seeds (plain class; `campaign.driver` makes it an
    actor). `cfg.backends` are all the campaign's backends; each test names those it is for."""

    def __init__(self, cfg: WorkerConfig, name: str = "gen"):
        self.worker = FuzzWorker(dataclasses.replace(cfg, sandbox=False), name)

    def generate(self, items: list[tuple]) -> list[Generated | CaseError]:
        """`items`: (test_id, seed, backends[, avoid]) per test; `avoid`: ops the graph must
        not hold (`FuzzWorker.make_test`)."""
        out: list[Generated | CaseError] = []
        for test_id, seed, backends, *rest in items:
            faulthandler.dump_traceback_later(STACK_DUMP_S, file=sys.stderr)
            try:
                out.append(self.generate_one(test_id, seed, backends, rest[0] if rest else ()))
            except Exception:
                out.append(_error(test_id))
            finally:
                faulthandler.cancel_dump_traceback_later()
        return out

    def generate_one(self, test_id: str, seed: int, backends: list[str],
                     avoid: Iterable[str] = ()) -> Generated:
        w = self.worker
        t0 = time.perf_counter()
        # an invalid test's rows: one per backend the test is for
        prep = w.make_prepared(test_id, seed, avoid, backends)
        ms = (time.perf_counter() - t0) * 1e3
        if isinstance(prep, TestReport):
            return Generated(test_id, seed, None, None, prep, ms)
        known = (matching(w.cfg.known, prep.tc.graph, backends, prep.tc.shapes.dynamic)
                 if w.cfg.known else {})
        return Generated(test_id, seed, pack_case(prep), prep.base, None, ms, known)

    def feedback(self, outcomes: list[tuple[str, str]]) -> int:
        """Backend verdicts, (test id, `backend:verdict:error_sig`), for the seed pool
        (docs/mutation.md); ids of tests another actor made are ignored."""
        return self.worker.feedback(outcomes)

    def coverage_feedback(self, outcomes: list[tuple[str, str, int]]) -> int:
        """Compiler coverage, (test id, backend, new lines) (docs/coverage.md), for the seed
        pool; ids of tests another actor made are ignored."""
        return self.worker.coverage_feedback(outcomes)

    def close(self) -> None:
        self.worker.close()


class Evaluator:
    """The evaluation stage of one backend (plain class; `campaign.driver` makes it an actor on
    a node with what the backend's target needs). Its sandbox process starts with it, so a
    backend that cannot even be imported fails the actor's start, with the reason."""

    def __init__(self, cfg: WorkerConfig, backend: str, name: str = "eval"):
        self.worker = FuzzWorker(dataclasses.replace(cfg, backends=[backend]), name)
        self.backend = self.worker.backends[0]
        self.label = f"{name}@{os.getpid()}"
        sandbox = self.worker.sandboxes.get(self.backend.name)
        if sandbox is not None:
            sandbox.start()

    def evaluate(self, cases: list[bytes]) -> list[TestReport | CaseError]:
        """One report per case, in order. A backend with `merge` k > 1 (`WorkerConfig.merge`)
        compiles groups of up to k mergeable cases as one merged test (`campaign.merge`: the
        rows are those of alone runs wherever the merged one did not pass cleanly)."""
        out: list[TestReport | CaseError | None] = [None] * len(cases)
        preps: list[Prepared | None] = [None] * len(cases)
        for i, data in enumerate(cases):
            try:
                preps[i] = unpack_case(data)
            except Exception:
                out[i] = _error("?")
        k = self.worker.cfg.merge.get(self.backend.name, 1)
        groups: list[list[int]] = []
        if k > 1:
            try:
                groups = merge_plan(preps, k, key=lambda p: self.backend.merge_key(p.tc.seed, p.tc.graph))
            except Exception:  # our bug: every case runs alone
                groups = []
        for group in groups:
            self._evaluate_merged(group, preps, out)
        for i, prep in enumerate(preps):
            if out[i] is None and prep is not None:
                out[i] = self._alone(prep)
        return cast(list[TestReport | CaseError], out)  # every case has its report by now

    def _alone(self, prep: Prepared,
               pass_note: str | None = None) -> TestReport | CaseError:
        """`prep` run alone; `pass_note`: added to the row's `error_msg` if it passes."""
        try:
            # an evaluator's tests come from `unpack_case`: the sandbox's job rebuilt them
            job = cast(JobMaterialized, prep.m).job if self.worker.sandboxes else None
            result = self.worker.evaluate(self.backend, prep.m, job)
            row, finding = self.worker.judge(self.backend, prep, result)
            if pass_note is not None and row.verdict == "pass":
                row.add_note(pass_note)
            return self._report(row, finding, self.worker.blame_finding(self.backend, result),
                                result.cov_added)
        except Exception:
            return _error(prep.tc.test_id)

    def _report(self, row: ResultRow, finding: Finding | None,
                blamed: Finding | None = None, added: Covered | None = None) -> TestReport:
        """`blamed`: the finding of an earlier test that left the sandbox process unusable
        (`FuzzWorker.blame_finding`); `added`: the compiler lines the evaluation added to this
        actor's union (None: not measured)."""
        # where and when the backend ran, not where and when the test was made
        row.update(host=self.worker.host, worker=self.label, ts=utc_now())
        coverage = [] if added is None else [(row.test_id, self.backend.name, added)]
        return TestReport([row], [f for f in (finding, blamed) if f is not None],
                          coverage)

    def _evaluate_merged(self, group: list[int], preps: list[Prepared | None],
                         out: list) -> None:
        """Evaluate `group` (indices into `preps`) as one merged test and fill `out` for each:
        the merged judgement of a part that passed in a cleanly run module, else the part's
        alone run (`campaign.merge`'s failure rule)."""
        # `merge_plan` groups prepared tests only
        parts = cast(list[Prepared], [preps[i] for i in group])
        try:
            merged = build_merged(parts)
            m = Materialized(merged.tc)
            if self.backend.dialect is None:
                m.onnx_model  # noqa: B018 (builds and checks it) an ONNX backend: a union failing the checker runs alone
            job = Job.of(m) if self.worker.sandboxes else None
            # the limit of k tests (each would have it alone), not confirmed: a timeout re-runs
            # the parts alone, each with its own confirmed limit
            limit = self.worker.cfg.limits.timeout_s * len(group)
            result = self.worker.evaluate(self.backend, m, job, confirm=False, timeout_s=limit)
            split = merged.split(result)
        except Exception:  # our bug, not the compiler's: the parts run alone (said in the log)
            print(f"{self.label}: merging {[p.tc.test_id for p in parts]} failed, they run "
                  f"alone:\n{traceback.format_exc()[-TRACE_TAIL:]}", file=sys.stderr)
            return
        k = len(group)
        if split is None:
            if result.verdict is not None or result.failed:
                verdict = result.verdict.value if result.verdict is not None else "crash"
                stage = f" during {result.stage.value}" if result.stage is not None else ""
                what = (f"the merged module's verdict was {verdict} "
                        f"({result.error_class or 'Error'}{stage})")
            else:
                what = (f"the merged module gave {len(result.outputs or [])} outputs, expected "
                        f"{merged.n_outputs * merged.n_sets}")
        for j, i in enumerate(group):
            prep = parts[j]
            if split is not None:
                try:
                    row, _ = self.worker.judge(self.backend, prep, split[j])
                except Exception:
                    out[i] = _error(prep.tc.test_id)
                    continue
                if row.verdict == "pass":
                    row.merged = k
                    # the merged module's coverage is its first part's (`Merged.split`)
                    out[i] = self._report(row, None, self.worker.blame_finding(self.backend,
                                                                               result)
                                          if j == 0 else None, split[j].cov_added)
                    continue
                # the merged run's finding (if any) is dropped: the alone run decides
                what = f"{row.verdict} ({row.error_sig or row.error_class})"
            out[i] = self._alone(prep, merge_note(k, what))
            if j == 0 and result.cov_added and isinstance(out[i], TestReport):
                # the merged module ran code too: its lines join the campaign's union
                out[i].coverage.insert(0, (prep.tc.test_id, self.backend.name, result.cov_added))

    def close(self) -> None:
        self.worker.close()
