"""`TriageConfig`: the `triage` node of the campaign config (plain data, no heavy imports)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TriageConfig:
    """What the triage after a campaign (and `python -m campaign.triage`) does."""

    #: run the triage when a campaign ends (buckets, the bugs table; reductions and repros)
    enabled: bool = True
    #: reduce the first this many members (with artifact folders) of each new crash bucket
    reduce_first: int = 1
    #: reduce at most this many mismatch folders per backend (a mismatch's bucket is the op
    #: pattern of its reduced graph, so each is reduced until its bucket is known)
    reduce_mismatches: int = 6
    #: verdicts whose findings are reduced (timeouts cost the full timeout per candidate)
    reduce_verdicts: list[str] = field(default_factory=lambda: ["crash", "signal", "mismatch"])
    #: predicate calls per reduction
    max_tests: int = 300
    #: seconds per reduction
    max_seconds: float = 300.0
    #: wall-clock seconds for one triage (reductions, re-runs, repro checks); what does not
    #: fit is left for `python -m campaign.triage`: a duration ("10m"), a share of a
    #: wall-clock campaign budget ("25%"; 15 minutes under a test budget or offline), or "0"
    #: for no reductions. After a campaign it is a hard limit (campaign/budget_plan.py)
    budget: str = "25%"
    #: sandbox timeout (seconds) per candidate, and per re-run of a crash, signal or mismatch
    #: finding; a timeout finding is re-run (and reduced) at the limit the campaign confirmed
    #: it at (its `confirm_limit_s`; this for findings without one)
    timeout_s: float = 60.0
    #: run each written repro.py in a fresh process and record whether it reproduces
    check_repro: bool = True
    #: seconds a repro.py may run when checked (a timeout's waits for its own limit instead)
    repro_timeout_s: float = 300.0
    #: a timeout's repro.py reproduces when there is still no result after the campaign's
    #: confirming limit plus this many seconds (a fresh process's cold start: Inductor's first
    #: compile in a process takes ~15 s)
    repro_cold_start_s: float = 30.0
    #: interpreters with newer releases of the compilers (a venv per torch build, a nightly:
    #: `[/venvs/torch-2.15/bin/python]`): a new bug whose repro.py reproduced here is run
    #: under each, and one that does not reproduce under one of them is fixed upstream, a known
    #: bug (`known-upstream`, `Bucket.fixed_in`), never a new one
    newer_pythons: list[str] = field(default_factory=list)
    #: cross re-runs when grouping buckets into bugs: a reduced graph re-run on another
    #: bucket's compiler (`campaign.triage.pipeline.grouping`), within the budget
    group_reruns: int = 20
    #: earlier bugs tables (bugs.parquet) or output dirs whose buckets are not new
    known: list[str] = field(default_factory=list)
    #: the bug database across campaigns (a directory, `campaign.triage.bugdb.store`): every bucket
    #: in it is known (not new, not reduced again), and each triage adds its buckets to it.
    #: Unset (null): `runs/bugdb` when the output dir lies under `runs/` (Hydra's default run
    #: dirs), else none; `off`: none
    db: str | None = None
    #: reduce findings of buckets already known (`known`, `db`) again
    reduce_known: bool = False
    #: the findings' notes (docs/findings/<bug>.md) whose `triggers:` are known bugs: their
    #: buckets are not new, not reduced, named by the finding in the bugs table (`finding`),
    #: and held back during the campaign (`campaign.triage.pipeline.note_known`). A relative
    #: path is taken from the repository root; '' or null: none
    findings: str | None = "docs/findings"
    #: localize each new compiler bug whose repro.py reproduced (`repro.py --localize`:
    #: which stage, level, pass or flag it needs; the bugs table's `culprit`)
    localize: bool = True
    #: seconds one localization may take at most (less when the triage has less left)
    localize_budget_s: float = 600.0


_VERDICTS = ("crash", "signal", "timeout", "mismatch")


def problem(t: TriageConfig) -> str | None:
    """What is wrong with a triage config (one line naming the field), or None."""
    import re

    text = str(t.budget).strip()
    if not re.fullmatch(r"0|\d+(\.\d+)?[smh]|\d+(\.\d+)?%", text):
        return (f"triage.budget: a duration like 10m, a share like 25% (or 0: no reductions), "
                f"got {t.budget!r}")
    if text.endswith("%") and not 0 < float(text[:-1]) < 100:
        return f"triage.budget: a share must be between 0% and 100%, got {t.budget!r}"
    bad = [v for v in t.reduce_verdicts if v not in _VERDICTS]
    if bad:
        return f"triage.reduce_verdicts: {bad[0]!r} is not one of {', '.join(_VERDICTS)}"
    for name in ("reduce_first", "reduce_mismatches", "max_tests", "group_reruns"):
        if getattr(t, name) < 0:
            return f"triage.{name}: must be >= 0, got {getattr(t, name)}"
    for name in ("max_seconds", "timeout_s", "repro_timeout_s", "localize_budget_s"):
        if getattr(t, name) <= 0:
            return f"triage.{name}: must be > 0, got {getattr(t, name)}"
    if t.repro_cold_start_s < 0:
        return f"triage.repro_cold_start_s: must be >= 0, got {t.repro_cold_start_s}"
    import os

    for python in t.newer_pythons:
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            return f"triage.newer_pythons: {python!r} is not an executable file"
    return None
