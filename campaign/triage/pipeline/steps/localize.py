"""Step `localize`: each new compiler bug whose repro.py reproduced, and not localized by an
earlier triage of this output, is localized (`repro.py --localize`,
`localization.localize_folder`): the culprit into the bucket and its folder's info.json
(`localization`). Each takes up to `triage.localize_budget_s`, within the step's share under
a hard deadline."""
from __future__ import annotations

from typing import ClassVar

from campaign.triage.pipeline.clock import MIN_RUN_S, StepClock
from campaign.triage.pipeline.localization import localize_folder
from campaign.triage.pipeline.state import TriageState


class Localize:
    name: ClassVar[str] = "localize"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "folders", "repro_checks")
    gives: ClassVar[tuple[str, ...]] = ("localizations",)
    share: ClassVar[float] = 0.1

    def run(self, state: TriageState, clock: StepClock) -> None:
        if not state.cfg.localize:
            return
        for key, folder in state.folders.items():
            b = state.buckets[key]
            if not (key.kind == "bug" and b.new and b.repro_status == "reproduced"
                    and b.culprit is None):
                continue
            budget = state.cfg.localize_budget_s
            if clock.hard:
                budget = min(budget, clock.time_left())
            if budget < 2 * MIN_RUN_S or not clock.fits(budget):
                continue
            clock.tick(f"localizing {key.id}")
            loc = localize_folder(folder.dest, budget)
            b.culprit = loc.text
            state.log(f"triage:   {key.id}: {loc.text}")
            state.update_info(key, localization=loc.to_json())
