"""Where a campaign's results go: rows into the result sink, findings into their store, the
compiler lines the tests ran into the campaign's union, the verdicts for the seed pools'
feedback, and the counts the summary reports (`Tally`).

Invariant: every test a backend was given gets exactly one row for that backend, its
evaluator's or the driver's (`failure_rows`), unless the deadline cut it off (`cut`)."""
from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from campaign.compiler_coverage_log import CampaignCoverage
from campaign.driver.stages import GEN
from campaign.driver.work import PipelineTest
from campaign.findings import FindingStore
from campaign.row import ResultRow, utc_now
from campaign.storage import ResultSink
from campaign.verdict import Verdict, verdict_signature

log = logging.getLogger(__name__)

#: the campaign's compiler coverage (union, growth), beside results/ (docs/coverage.md)
COVERAGE_DIR = "coverage"


@dataclass
class Tally:
    """What a campaign counted as it ran, for its summary."""

    tests_done: int = 0  #: tests with at least one row
    skipped_tests: int = 0  #: tests that reached no backend
    #: per backend: rows by verdict
    verdicts: dict[str, Counter[str]] = field(default_factory=dict)
    #: per backend: CPU-seconds its rows measured (`cpu_ms`: the compiler's own work)
    cpu_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    deaths: int = 0  #: actors that died
    timeouts: int = 0  #: actors that hung
    errors: int = 0  #: tests a stage raised on
    requeued: int = 0  #: tests re-run after their actor failed
    #: per stage: tests cut off at the deadline (no row)
    cut_off: Counter[str] = field(default_factory=Counter)


def is_error(result: Any) -> bool:
    """A stage's `CaseError` (our code failed on that test) rather than a result."""
    return hasattr(result, "message")


class Recorder:
    """The campaign's rows, findings, compiler coverage and feedback, and their counts."""

    def __init__(self, sink: ResultSink, findings: FindingStore, coverage: CampaignCoverage,
                 targets: dict[str, str], elapsed_s: Callable[[], float]) -> None:
        """`targets`: per backend, its target (`cpu`/`cuda`), for the rows the driver makes;
        `elapsed_s()`: seconds since the campaign started (when coverage grew)."""
        self.sink = sink
        self.findings = findings
        self.coverage = coverage
        self.targets = targets
        self.elapsed_s = elapsed_s
        self.tally = Tally()
        #: the progress bar, ticked per finished test (None: none shown)
        self.bar: tqdm | None = None
        #: backend verdicts not yet sent to the generation actors' seed pools (docs/mutation.md)
        self.outcomes: list[tuple[str, str]] = []
        #: the tests that reached new compiler lines, not yet sent to the seed pools
        self.cov_outcomes: list[tuple[str, str, int]] = []

    def add_row(self, test: PipelineTest, row: ResultRow) -> None:
        self.sink.add(row)
        self.tally.verdicts.setdefault(row.backend, Counter())[row.verdict] += 1
        if row.cpu_ms is not None:  # a merged module's CPU is on each of its k parts
            self.tally.cpu_s[row.backend] += row.cpu_ms / 1e3 / (row.merged or 1)
        test.rows += 1

    def finish(self, test: PipelineTest) -> None:
        """Every backend `test` was given has reported."""
        test.case = None
        if test.rows:
            self._done()
        else:
            self.tally.skipped_tests += 1

    def _done(self) -> None:
        self.tally.tests_done += 1
        if self.bar is not None:
            self.bar.update(1)

    def record(self, test: PipelineTest, report: Any) -> None:
        """A stage's report of `test`: its findings, then its rows (with their folders)."""
        dirs: dict[tuple[str, str], str] = {}
        for f in report.findings:
            d = self.findings.add(f)
            if d is not None:  # an earlier test's finding may come too (worker.blame_finding)
                dirs.setdefault((f.backend, f.test_id), d)
        for row in report.rows:
            row.update(finding_dir=dirs.get((row.backend, row.test_id)))
            self.add_row(test, row)

    def evaluated(self, test: PipelineTest, report: Any) -> None:
        """A backend's report of `test`."""
        self.add_coverage(report)
        self.record(test, report)
        self.outcomes += [(r["test_id"], verdict_signature(r)) for r in report.rows]

    def add_coverage(self, report: Any) -> None:
        """The compiler lines a report's tests ran (what they added to their evaluator's
        union) into the campaign's union; each row's `cov_new` becomes what is new to the
        campaign, and a test that reached new lines goes to the seed pools as novel."""
        new: Counter[tuple[str, str]] = Counter()
        measured: set[tuple[str, str]] = set()
        for tid, backend, lines in getattr(report, "coverage", None) or ():
            measured.add((tid, backend))
            new[tid, backend] += self.coverage.add(backend, tid, lines, self.elapsed_s())
        for row in report.rows:
            key = (row.test_id, row.backend)
            if key in measured:
                row.update(cov_new=new[key])
        self.cov_outcomes += [(t, b, n) for (t, b), n in new.items() if n]

    def take_feedback(self) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]]]:
        """The verdicts and the novel tests gathered since the last call."""
        out = (self.outcomes, self.cov_outcomes)
        self.outcomes, self.cov_outcomes = [], []
        return out

    def failure_rows(self, test: PipelineTest, stage: str, worker: str, host: str,
                     verdict: Verdict, error_class: str, msg: str) -> list[ResultRow]:
        """Rows for a test whose actor died, hung or raised on it: what the driver knows of it
        (returned as recorded). Its finding folder (on its first row) holds info.json (the
        seed, the error) and, for an evaluation, the test's files;
        `FuzzWorker.make_test(test_id, seed)` with the run's config.yaml rebuilds it."""
        backends = test.backends if stage == GEN else [stage]
        base = (test.base if stage != GEN and test.base is not None
                else ResultRow.graphless(test.test_id, test.seed))
        ts = utc_now()
        rows = [base.lost(b, self.targets.get(b, ""), verdict, error_class, msg, host, worker, ts)
                for b in backends]
        finding_dir = None
        if verdict.is_finding:
            finding_dir = self.findings.add(self._failure_finding(test, rows[0], stage, worker,
                                                                  host))
        rows[0].update(finding_dir=finding_dir)
        for row in rows:
            self.add_row(test, row)
        return rows

    def _failure_finding(self, test: PipelineTest, row: ResultRow, stage: str, worker: str,
                         host: str) -> Any:
        from campaign.worker import Finding

        info = {"test_id": test.test_id, "seed": test.seed, "backend": row.backend,
                "verdict": row.verdict, "error_class": row.error_class,
                "stage": "generation" if stage == GEN else "evaluation",
                "worker": worker, "host": host, "error_msg": row.error_msg,
                "config": "config.yaml in the run's output dir"}
        files: dict[str, bytes] = {}
        if test.case is not None:
            try:
                from campaign.pipeline import case_finding

                files = dict(case_finding(test.case, row).files)
            except Exception as e:  # the artifacts are a courtesy; the row is what counts
                info["artifacts_error"] = f"{type(e).__name__}: {e}"
        files["info.json"] = (json.dumps(info, indent=2, default=str) + "\n").encode()
        return Finding(test.test_id, row.backend, row.verdict, row.error_sig, files)

    def cut(self, stage: str, test: PipelineTest) -> None:
        """`test` was cut off at the deadline in `stage`: no row for it there."""
        if stage == GEN:
            self.tally.cut_off[GEN] += 1
            return
        self.tally.cut_off[stage] += 1
        test.pending.discard(stage)
        if not test.pending:
            test.case = None
            if test.rows:  # reported by another backend: counted, with those rows
                self._done()

    def write_coverage(self, out_dir: Path) -> None:
        """The campaign's compiler coverage as Parquet in `out_dir/coverage/` (nothing when
        none was measured); a write that fails is a warning line."""
        if not self.coverage.unions:
            return
        try:
            self.coverage.write(out_dir / COVERAGE_DIR)
        except OSError as e:
            log.warning("coverage: cannot write to %s (%s)", out_dir / COVERAGE_DIR,
                        e.strerror or e)
