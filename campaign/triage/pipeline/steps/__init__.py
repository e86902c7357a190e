"""The triage's steps, one module each, in the order the pipeline runs them
(`campaign.triage.pipeline.driver`). A new step is one module here and its place in `STEPS`:
the driver checks that what it needs is given before it."""
from __future__ import annotations

from campaign.triage.pipeline.steps.ablate import Ablate
from campaign.triage.pipeline.steps.base import Step
from campaign.triage.pipeline.steps.bucket import Bucketing
from campaign.triage.pipeline.steps.check import Check
from campaign.triage.pipeline.steps.confirm import Confirm
from campaign.triage.pipeline.steps.group import Group
from campaign.triage.pipeline.steps.localize import Localize
from campaign.triage.pipeline.steps.name import Name
from campaign.triage.pipeline.steps.recognize import Recognize
from campaign.triage.pipeline.steps.record import Record
from campaign.triage.pipeline.steps.reduce import Reduce
from campaign.triage.pipeline.steps.table import Table
from campaign.triage.pipeline.steps.write import Write


def campaign_steps() -> list[Step]:
    """A campaign output's triage: from its finding rows to the bugs table and database."""
    return [Recognize(), Reduce(), Bucketing(), Confirm(), Name(), Write(), Ablate(), Check(),
            Localize(), Group(), Table(), Record()]


def folder_steps() -> list[Step]:
    """One finding folder's, once reduced (its bucket and representative set): its bug
    folder, checked, localized, and a one-row bugs table."""
    return [Name(), Write(), Ablate(), Check(), Localize(), Group(), Table()]


__all__ = ["Step", "campaign_steps", "folder_steps"]
