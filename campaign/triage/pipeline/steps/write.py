"""Step `write`: a bug folder per represented bucket (`repro.write_bug_folder`: the reduced
test, a standalone repro.py, info.json), and each bucket's facts from its representative
(sizes, whether it was confirmed, its reduced pattern). A folder an earlier triage of this
output wrote (a `cached` reduction) is kept: what was found there (its repro's outcome, its
training ablation, its localization) is read back. A bucket with no folder points at its
oldest finding."""
from __future__ import annotations

from typing import Any, ClassVar

from campaign.triage.pipeline.buckets import Bucket, BucketKey, op_pattern
from campaign.triage.pipeline.clock import StepClock
from campaign.triage.pipeline.localization import Localization
from campaign.triage.pipeline.state import Folder, TriageState
from campaign.triage.pipeline.training_ablation import TrainingAblation


class Write:
    name: ClassVar[str] = "write"
    needs: ClassVar[tuple[str, ...]] = ("buckets", "best")
    gives: ClassVar[tuple[str, ...]] = ("folders",)
    share: ClassVar[float] = 0.0

    def run(self, state: TriageState, clock: StepClock) -> None:
        state.bugs_dir.mkdir(parents=True, exist_ok=True)
        for key, red in state.best.items():
            b = state.buckets[key]
            self._facts(b, red)
            dest = state.bugs_dir / key.id
            b.artifact_path = dest.relative_to(state.out).as_posix()
            if red.status == "cached":
                state.folders[key] = Folder(dest, cached=True)
                self._read_back(state, key, b)
                continue
            try:
                written = self._write(state, key, red)
            except Exception as e:
                b.note = f"writing the bug folder failed: {type(e).__name__}: {e}"[:500]
                state.log(f"triage: {b.note}")
                continue
            state.folders[key] = Folder(dest, cached=False)
            if written.get("repro"):
                b.repro = (dest / "repro.py").relative_to(state.out).as_posix()
            else:
                b.repro_status = "none"
                state.update_info(key, repro_status="none")
                if written.get("codegen_error"):
                    b.note = f"no repro.py: {written['codegen_error']}"[:500]
        for b in state.buckets.values():
            if b.artifact_path is None:  # no bug folder (no graph, dynamic shapes): the finding's
                dirs = [d for _, _, d in sorted(b.members, key=lambda m: (m[0] is None, m[0] or 0))
                        if d]
                b.artifact_path = dirs[0] if dirs else None

    @staticmethod
    def _facts(b: Bucket, red: Any) -> None:
        reduced = red.status in ("reduced", "cached")
        b.original_insts = red.original_insts
        b.reduced_insts = red.reduced_insts if reduced else None
        if reduced:
            b.reduced_pattern = op_pattern(red.graph)
        b.confirmed = (True if red.status in ("reduced", "cached", "confirmed") else
                       False if red.status == "not reproducible" else None)
        b.reduction_tests = red.summary.get("tests")
        b.reduction_s = red.summary.get("total_seconds", red.summary.get("seconds"))
        if red.status not in ("reduced", "cached", "confirmed") and not b.note:
            b.note = f"{red.status}: {red.note}"[:500] if red.note else red.status

    @staticmethod
    def _read_back(state: TriageState, key: BucketKey, b: Bucket) -> None:
        dest = state.folders[key].dest
        earlier = state.info(key)
        if earlier:
            b.repro_status = earlier.get("repro_status")
            TrainingAblation.from_json(earlier.get("training_ablation")).into(b)
            if earlier.get("localization"):
                b.culprit = Localization.from_json(earlier["localization"]).text
        if (dest / "repro.py").is_file():
            b.repro = (dest / "repro.py").relative_to(state.out).as_posix()

    @staticmethod
    def _write(state: TriageState, key: BucketKey, red: Any) -> dict[str, Any]:
        from campaign.triage.pages.environment import seen_versions
        from campaign.triage.pipeline.repro import write_bug_folder

        key_fields = {"backend": key.backend, "target": key.target, "verdict": key.verdict,
                      "stage": key.stage, "error_sig": key.error_sig,
                      "pattern": key.pattern, "backend_config": key.config}
        # a timeout's repro.py reproduces when there is still no result after the limit the
        # campaign confirmed it at, plus a fresh process's cold start
        wait: dict[str, Any] = ({"timeout_s": state.limit({**red.case.info,
                                                           "verdict": "timeout"}),
                                 "cold_start_s": state.cfg.repro_cold_start_s}
                                if key.verdict == "timeout" else {})
        seen = seen_versions(key.backend,
                             [{"bucket": key.id, "finding": state.findings.get(key.id)}],
                             *state.seen_sources())
        # the compiler the representative failed on: the reduced configuration (or, not
        # reduced, the one it ran)
        return write_bug_folder(state.bugs_dir / key.id, red.spec, key.id, key_fields, red,
                                red.case.seed, seen=seen, **wait)
