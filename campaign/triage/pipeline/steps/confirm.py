"""Step `confirm`: a new compiler-bug bucket represented by a finding as it is (`not
reduced`) is re-run, while its share of time lasts, to confirm it still fails the same way:
`confirmed` (its row, files and test case kept for the bug folder) or `not reproducible`. A
cache test is re-run as one (its near-twin first: `FindingCase.cache`)."""
from __future__ import annotations

from typing import ClassVar

from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import TriageState
from campaign.triage.pipeline.steps.reduce import MIN_REDUCTION_S


class Confirm:
    name: ClassVar[str] = "confirm"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "best")
    gives: ClassVar[tuple[str, ...]] = ("best",)
    share: ClassVar[float] = 0.05

    def run(self, state: TriageState, clock: StepClock) -> None:
        from campaign.triage.pipeline.reduction import same_failure

        for key, red in state.best.items():
            b = state.buckets.get(key)
            if (red.status != "not reduced" or key.kind != "bug" or b is None or not b.new
                    or not clock.fits(min(state.limit(red.case.info), MIN_REDUCTION_S))):
                continue
            case = red.case
            clock.tick(f"re-running {case.backend} {case.verdict}")
            try:
                row, finding, tc = state.runner(case.backend, state.limit(case.info)).run(
                    case.test_id, case.seed, case.graph, case.values, case.extra_sets,
                    config=case.config, grad=case.grad, transform=case.transform,
                    drawn_for=case.graph, dynshape=case.dynshape, cache=case.cache)
            except Exception as e:
                red.note = f"re-run failed: {type(e).__name__}: {e}"
                continue
            if same_failure(case.info, row):
                red.status, red.row, red.tc = "confirmed", row, tc
                red.files = dict(finding.files) if finding is not None else {}
            else:
                red.status = "not reproducible"
                red.note = f"re-run gave {row.get('verdict')}: {row.get('error_sig')}"
