"""`campaign.resume=true`: where the run in `output.dir` left off (same run id, test indices
after the last one recorded, so no test id repeats), with the rows an earlier stop on a full
disk spilled moved back, and the finding folders its signatures already hold."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from campaign.driver.errors import CampaignError
from campaign.findings import FindingStore
from campaign.ids import index_of
from campaign.storage import existing_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run goes on."""

    run_id: str | None  #: the run's id (None: it recorded nothing; a new run starts)
    next_index: int  #: the first test index of this run
    next_seq: int  #: the results files' next sequence number

    @property
    def resumed_at(self) -> int | None:
        return self.next_index if self.run_id is not None else None


def resume_point(out_dir: Path) -> ResumePoint:
    """Continue the run whose results are in `out_dir`."""
    try:
        recover_spilled(out_dir)
        prev = existing_run(out_dir)
    except ValueError as e:
        raise CampaignError(f"campaign.resume: {e}") from None
    if prev.run_id is None:
        log.warning("campaign.resume: %s holds no results yet; starting at test 0", out_dir)
        return ResumePoint(None, 0, prev.next_seq)
    indices = [index_of(t) for t in prev.test_ids]
    point = ResumePoint(prev.run_id, max(indices) + 1, prev.next_seq)
    log.warning("campaign.resume: run %s has %d rows of %d tests; going on at test %d",
                point.run_id, prev.rows, len(indices), point.next_index)
    return point


def count_stored_findings(findings: FindingStore, out_dir: Path) -> None:
    """The per-signature caps count the folders earlier runs wrote."""
    from campaign.storage import read_results

    t = read_results(out_dir).select(["backend", "verdict", "error_sig", "finding_dir"])
    for r in t.to_pylist():
        if r["finding_dir"]:
            findings.stored[(r["backend"], r["verdict"], r["error_sig"] or "")] += 1


def recover_spilled(out_dir: Path) -> int:
    """The rows an earlier stop on a full disk spilled (`ResultSink.spill`), back into
    results/."""
    from campaign.storage import recover_spilled as recover

    try:
        n = recover(out_dir)
    except OSError as e:
        raise CampaignError(f"campaign.resume: cannot move the rows spilled on a full disk "
                            f"back into {out_dir}: {e.strerror or e}") from None
    if n:
        log.warning("campaign.resume: %d results files spilled on a full disk moved back", n)
    return n
