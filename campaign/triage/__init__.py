"""Triage: bucket every finding, reduce the first members of each new bucket, and write a
standalone reproducer per bucket (see docs/triage.md).

This package's `__init__` stays light (the campaign config imports `TriageConfig`); the
heavy parts load on use: `campaign.triage.pipeline.buckets` (keys, the `bugs` table),
`campaign.triage.pipeline.reduction` (the reduction driver), `campaign.triage.pipeline.repro` (bug folders and
`repro.py`), `ir.materialize.torch_source` (GraphIR -> torch source), `campaign.triage.pipeline.campaign_triage`
(the whole pass over a campaign's output), `python -m campaign.triage` (the command line).
"""
from campaign.triage.config import TriageConfig

__all__ = ["TriageConfig"]
