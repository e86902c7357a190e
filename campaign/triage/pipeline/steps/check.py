"""Step `check`: each compiler-bug bucket's repro.py not yet run is run fresh
(`repro.check_repro`), its outcome into the bucket and its folder's info.json
(`repro_status`): one written by this triage, or by an earlier one out of time ("continue
with python -m campaign.triage"). A new bug's is checked even past a soft budget; under a
hard deadline only what fits. A new bug whose repro.py reproduced is then run under each
newer interpreter (`TriageConfig.newer_pythons`): the first under which it does not reproduce
names the release that fixed it (`fixed_in`: a known bug)."""
from __future__ import annotations

from typing import ClassVar

from campaign.triage.pipeline.buckets import Bucket, BucketKey
from campaign.triage.pipeline.clock import MIN_RUN_S, StepClock
from campaign.triage.pipeline.state import TriageState

#: seconds a timeout's repro.py is given beyond its own wait when checked (its imports, the
#: watchdog's grace)
REPRO_IMPORT_S = 60.0


class Check:
    name: ClassVar[str] = "check"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "best", "folders")
    gives: ClassVar[tuple[str, ...]] = ("repro_checks",)
    share: ClassVar[float] = 0.1

    def run(self, state: TriageState, clock: StepClock) -> None:
        from campaign.triage.pipeline.repro import check_repro

        if not state.cfg.check_repro:
            return
        for key, folder in state.folders.items():
            b = state.buckets[key]
            if key.kind != "bug" or b.repro is None or b.repro_status is not None:
                continue
            info = state.info(key)
            wait = info.get("repro_wait_s") or {}
            # a timeout's repro ends itself once its wait is over (a watchdog); the check
            # leaves it the time to import its libraries and to say so
            limit = (float(wait.get("confirmed_limit_s", state.cfg.timeout_s))
                     + float(wait.get("cold_start_s", 0.0)) + REPRO_IMPORT_S
                     if key.verdict == "timeout" else state.cfg.repro_timeout_s)
            if clock.hard and key.verdict != "timeout":
                limit = min(limit, clock.time_left())
            if not ((b.new and not clock.hard)
                    or clock.fits(limit if key.verdict == "timeout" else MIN_RUN_S)):
                continue
            clock.tick(f"checking repro {key.id}")
            red = state.best[key]
            error_class = ((red.row or {}).get("error_class")
                           or (info.get("row") or {}).get("error_class"))
            outcome, tail = check_repro(folder.dest, key.verdict, error_class, limit)
            b.repro_status = outcome
            if outcome != "reproduced":
                state.log(f"triage: repro of {key.id}: {outcome}\n{tail}")
            self._newer(state, clock, key, b, error_class, limit)
            state.update_info(key, repro_status=outcome)

    @staticmethod
    def _newer(state: TriageState, clock: StepClock, key: BucketKey, b: Bucket,
               error_class: str | None, limit: float) -> None:
        from campaign.triage.pipeline.repro import fixed_release

        if not (state.cfg.newer_pythons and b.new and b.repro_status == "reproduced"):
            return
        if clock.hard and not clock.fits(MIN_RUN_S * len(state.cfg.newer_pythons)):
            return
        clock.tick(f"checking repro {key.id} on newer releases")
        b.fixed_in = fixed_release(state.folders[key].dest, key.verdict, error_class, limit,
                                   state.cfg.newer_pythons, state.log)
        if b.fixed_in:
            state.log(f"triage: {key.id} is fixed in {b.fixed_in}: its repro.py does not "
                      "reproduce there (a known bug)")
