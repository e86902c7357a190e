"""Test-suite options: `slow` tests are skipped unless asked for (`pytest --runslow`, or
DYNSMITH_SLOW=1), so the README's `pytest` stays within CI's time budget."""
from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("DYNSMITH_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow test: run with --runslow or DYNSMITH_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No process of ours outlives the suite: kill what sandboxes of this session (or of dead
    owners) started and left running, and say so (a test that leaks is a bug to fix)."""
    from campaign import proctree

    n = proctree.sweep("", owner_dead_only=True)
    n += sum(proctree._kill(p) for p in proctree.marked("")
             if proctree._owner_of(p) == os.getpid())
    if n:
        print(f"\nconftest: killed {n} processes sandboxes left running", flush=True)
