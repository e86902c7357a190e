"""Step `ablate`: a new training bug (a differentiating test, reduced or confirmed here) is
ablated (`training_ablation`): which part of the training step is wrong, and how the
compiler's stage before Inductor fares on the same test; two more runs of it, while the
step's share lasts. The result goes into the bucket and its folder's info.json
(`training_ablation`)."""
from __future__ import annotations

from typing import ClassVar

from campaign.triage.pipeline.clock import MIN_RUN_S, StepClock
from campaign.triage.pipeline.state import TriageState


class Ablate:
    name: ClassVar[str] = "ablate"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "best", "folders")
    gives: ClassVar[tuple[str, ...]] = ("ablations",)
    share: ClassVar[float] = 0.05

    def run(self, state: TriageState, clock: StepClock) -> None:
        from campaign.triage.pipeline.training_ablation import ablate

        for key, folder in state.folders.items():
            b, red = state.buckets[key], state.best[key]
            if (folder.cached or key.kind != "bug" or not b.new
                    or red.status not in ("reduced", "confirmed") or red.tc is None
                    or not red.tc.mode.differentiates
                    or not clock.fits(2 * min(state.limit(red.case.info), MIN_RUN_S))):
                continue
            clock.tick(f"ablating {key.id}")
            limit = state.limit(red.case.info)
            try:
                res = ablate(red, lambda spec: state.runner(spec, limit))  # noqa: B023 (called here)
            except Exception as e:  # a triage bug must not lose the campaign's results
                state.log(f"triage: ablating {key.id} failed: {type(e).__name__}: {e}")
                continue
            if res is None:
                continue
            res.into(b)
            state.log(f"triage:   {key.id}: {res.text()}")
            state.update_info(key, training_ablation=res.to_json())
