"""Step `group`: the buckets into bugs by cause (`grouping`): evidence from the reduced
graphs, the signatures, the front end two backends share, and cross re-runs of one bucket's
reduced graph on another's compiler while the step's share lasts (up to
`triage.group_reruns`). Each bucket gets its bug and the rule that linked it."""
from __future__ import annotations

from typing import Any, ClassVar

from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.state import TriageState
from campaign.triage.pipeline.steps.reduce import MIN_REDUCTION_S


class Group:
    name: ClassVar[str] = "group"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "best", "folders")
    gives: ClassVar[tuple[str, ...]] = ("bugs",)
    share: ClassVar[float] = 0.1

    def run(self, state: TriageState, clock: StepClock) -> None:
        from campaign.backends.base import frontend_of
        from campaign.triage.pipeline.grouping import BucketEvidence, group

        evidence = []
        for key, b in state.buckets.items():
            red = state.best.get(key)
            graph = red.graph if red is not None and red.status in ("reduced", "cached") else None
            evidence.append(BucketEvidence(key.id, key.backend, key.verdict, b.kind, key.stage,
                                           key.error_sig, key.config, b.first_seen, b.count,
                                           graph, frontend_of(key.backend, key.stage)))
        grouping = group(evidence, lambda a, b: cross_rerun(state, clock, a, b),
                         state.cfg.group_reruns)
        reasons: dict[str, str] = {}
        for link in grouping.links:
            for me, other in ((link.a, link.b), (link.b, link.a)):
                if grouping.bug[me] != me:
                    reasons.setdefault(me, f"{link.rule} with {other}")
        for key, b in state.buckets.items():
            b.bug = grouping.bug[key.id]
            b.bug_reason = reasons.get(key.id)
        n = len(set(grouping.bug.values()))
        if n < len(state.buckets):
            state.log(f"triage: {len(state.buckets)} buckets are {n} bugs "
                      f"({len(grouping.links)} links, {grouping.reruns} cross re-runs)")


def cross_rerun(state: TriageState, clock: StepClock, a: Any,
                b: Any) -> tuple[str, str | None, str | None] | None:
    """Re-run bucket `a`'s reduced graph (its bug folder) on bucket `b`'s compiler and
    configuration: (verdict, stage, error_sig), or None when there is no time left or it
    could not run."""
    from campaign.triage.pipeline.reduction import load_finding

    if clock.time_left() < MIN_REDUCTION_S:
        return None
    case = load_finding(state.bugs_dir / a.bucket)
    if case is None:
        return None
    clock.tick(f"re-running {a.bucket} on {b.bucket}")
    try:
        row, _, _ = state.runner(b.backend).run(case.test_id, case.seed, case.graph,
                                                case.values, case.extra_sets, config=b.config,
                                                drawn_for=case.graph, cache=case.cache)
    except Exception as e:
        state.log(f"triage: cross re-run of {a.bucket} on {b.bucket} failed: "
                  f"{type(e).__name__}: {e}")
        return None
    return row.get("verdict"), row.get("stage"), row.get("error_sig")
