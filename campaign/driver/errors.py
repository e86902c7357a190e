"""Why a campaign stops early, as exceptions, and the one-line form of an error's message."""
from __future__ import annotations


class CampaignError(RuntimeError):
    """The campaign cannot go on (no resources, actors that cannot start or keep failing)."""


class DiskFull(Exception):
    """Results could not be written for `campaign.disk_wait_s`: the campaign stops as on
    Ctrl-C (the message says where and how much space is needed)."""


def last_line(e: BaseException) -> str:
    """The last non-empty line of an error's message (Ray's hold a traceback), else its class."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__
