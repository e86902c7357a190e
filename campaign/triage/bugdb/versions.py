"""The compiler versions a backend runs on, as installed here: what the bug database records
per sighting of a bug (`campaign.triage.bugdb.store`) and per re-check (`campaign.triage.bugdb.recheck`).

Result rows carry no version column, so the versions are read where the triage (or the
re-check) runs, which is where the campaign ran: from the installed distributions'
metadata (`importlib.metadata`), without importing the libraries themselves. A backend
states the distributions its stack is made of (`campaign.backends.BackendInfo.packages`); a
backend loaded by dotted path (a user's own, or a test double) gets the whole stack dynsmith
tests.
"""
from __future__ import annotations

import importlib.metadata


def distributions(spec: str) -> tuple[str, ...]:
    """The distributions backend `spec` (`name?options`) runs on (`BackendInfo.packages`)."""
    from campaign.backends import info_of

    return info_of(spec).packages


def installed(spec: str) -> list[str]:
    """`name==version` of each distribution of `spec`'s stack installed here (sorted; one
    that is not installed is left out)."""
    return installed_of(distributions(spec))


def installed_of(dists: tuple[str, ...]) -> list[str]:
    """`name==version` of each of `dists` installed here (sorted; one that is not installed
    is left out)."""
    out = []
    for dist in dists:
        try:
            out.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return sorted(out)
