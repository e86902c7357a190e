"""`BudgetPlan`: how a wall-clock campaign budget is split between testing and the triage.

`campaign.budget=9m` bounds the whole `python run.py` after Ray's start-up: actors starting,
testing, stopping, the summary, the triage and the report. The plan owns that split:

    |<---------------------------- budget ------------------------------>|
    | actors start, testing (fast backends at once) | stop | triage | end |
                                          testing_s ^      ^ triage_s

- the triage gets `triage.budget`: a duration (`5m`), a fraction of the campaign's budget
  (`25%`, the default) or `0` (no reductions);
- `STOP_S` is kept back for stopping the actors, flushing and the summary;
- testing gets the rest. At its deadline work in flight is stopped, not waited for.

A test budget (`campaign.budget=500`) keeps its meaning: every test runs to its row; there is no
testing deadline, and a fractional triage budget means `FRACTION_FALLBACK_S`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from campaign.config import Budget, ConfigError, parse_budget

#: seconds kept back for stopping the actors, flushing the results and the summary, as a
#: fraction of the budget, within [STOP_MIN_S, STOP_MAX_S]
STOP_FRACTION = 0.03
STOP_MIN_S = 0.5
STOP_MAX_S = 15.0
#: the triage's seconds for a fractional `triage.budget` under a test budget
FRACTION_FALLBACK_S = 15 * 60.0

_FRACTION = re.compile(r"(\d+(?:\.\d+)?)%")


def triage_seconds(text: str, campaign_s: float | None) -> float:
    """`triage.budget` in seconds: `0`, a duration, or a percentage of `campaign_s` (a
    wall-clock campaign budget; None: a test budget, `FRACTION_FALLBACK_S`)."""
    t = str(text).strip()
    if t in ("0", "0s", ""):
        return 0.0
    m = _FRACTION.fullmatch(t)
    if m:
        if campaign_s is None:
            return FRACTION_FALLBACK_S
        return campaign_s * float(m.group(1)) / 100.0
    b = parse_budget(t)
    if b.seconds is None:
        raise ConfigError(f"triage.budget: a duration like 10m or a share like 25%, got {text!r}")
    return b.seconds


@dataclass(frozen=True)
class BudgetPlan:
    """The campaign's budget, parsed once (`budget`), and seconds from the campaign's start
    (after Ray's): when testing ends (None: a test budget) and how long the triage may run.
    The driver owns it: `campaign.driver.checks.preflight` makes it, the campaign reads its
    deadline from it (`Campaign.begin`)."""

    testing_s: float | None
    triage_s: float
    total_s: float | None
    budget: Budget = Budget()

    @staticmethod
    def of(budget: Budget, triage_budget: str, triage_enabled: bool = True) -> BudgetPlan:
        total = budget.seconds
        triage = triage_seconds(triage_budget, total) if triage_enabled else 0.0
        if total is None:
            return BudgetPlan(None, triage, None, budget)
        stop = min(STOP_MAX_S, max(STOP_MIN_S, STOP_FRACTION * total))
        testing = total - triage - stop
        if testing <= 0:
            raise ConfigError(
                f"triage.budget: {triage_budget} ({triage:g} s) leaves no time for testing in "
                f"campaign.budget={total:g} s ({stop:g} s are kept for stopping): give the "
                "triage less, or the campaign more")
        return BudgetPlan(testing, triage, total, budget)
