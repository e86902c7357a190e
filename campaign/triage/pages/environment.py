"""What a bug's report.md and repro.py say of where it was seen: the versions it failed on
(`seen_versions`) and the environment as torch's own tool prints it (`collect_env`), which
PyTorch's issue template asks for.

Versions seen, each `name==version` with where it is known from: this run (the compiler stack
of the bug's backend, and torch, as installed here: `campaign.triage.bugdb.versions`), the bug
database (the versions of every sighting of the bug: a bug whose buckets, or whose finding,
the database holds) and the version matrix (`campaign.triage.bugdb.matrix`: the versions
whose column says the finding `reproduces`). Only versions it failed on count: a matrix column
where it is fixed does not.

`collect_env(python)` runs `python -m torch.utils.collect_env` once per interpreter in a
process (cached), time-limited (`COLLECT_ENV_S`); when it cannot (no torch, a timeout) the
text is one line saying so, never an exception: a report must not fail for it.
"""
from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from campaign.triage.bugdb.runner import PACKAGES, last_error, run_process, this_interpreter
from campaign.triage.bugdb.versions import distributions, installed, installed_of

if TYPE_CHECKING:
    from campaign.triage.bugdb.matrix import Matrix
    from campaign.triage.bugdb.store import Bug

#: seconds `python -m torch.utils.collect_env` may take (it imports torch, runs pip, nvidia-smi)
COLLECT_ENV_S = 120.0
#: interpreter -> its collect_env text (one run per interpreter and process)
_COLLECTED: dict[str, str] = {}
#: where a version is known from, in the order a report lists them
THIS_RUN, DATABASE, MATRIX = "this run", "bug database", "version matrix"


def collect_env(python: str | None = None, timeout_s: float = COLLECT_ENV_S) -> str:
    """The output of `python -m torch.utils.collect_env` (`python`: default ours), cached per
    interpreter; a run that fails gives `collect_env failed: <why>`."""
    python = python or this_interpreter()
    if python not in _COLLECTED:
        _COLLECTED[python] = _collect(python, timeout_s)
    return _COLLECTED[python]


def _collect(python: str, timeout_s: float) -> str:
    try:
        run = run_process([python, "-m", "torch.utils.collect_env"], tempfile.gettempdir(),
                          timeout_s)
    except OSError as e:
        return f"collect_env failed: {python}: {type(e).__name__}: {e.strerror or e}"
    if run.expired:
        return f"collect_env failed: timed out after {timeout_s:g} s"
    if run.code != 0 or not run.stdout.strip():
        return f"collect_env failed: {last_error(run.text()) or f'exit {run.code}'}"
    return run.stdout.strip()


@dataclass(frozen=True)
class Seen:
    """One version (`name==version`) a bug failed on, and where that is known from
    (`THIS_RUN`, `DATABASE`, `MATRIX`, in that order)."""

    version: str
    sources: tuple[str, ...]

    def text(self) -> str:
        return f"{self.version} ({', '.join(self.sources)})"


def _stack(spec: str) -> list[str]:
    """This run's versions for backend `spec`: its stack's, and torch's."""
    return sorted(set(installed(spec)) | set(installed_of(("torch",))))


def seen_versions(spec: str, members: Iterable[dict[str, Any]],
                  bugs: dict[str, Bug] | None = None, matrix: Matrix | None = None,
                  this_run: bool = True) -> list[Seen]:
    """The versions the bug of bugs-table rows `members` (backend `spec`) failed on, sorted
    (module doc); `this_run` False: leave this run out (a repro.py written before the run's
    failure is confirmed still says it: the run saw it)."""
    members = list(members)
    found: dict[str, list[str]] = {}

    def add(versions: Iterable[str], source: str) -> None:
        for v in versions:
            if source not in found.setdefault(v, []):
                found[v].append(source)

    if this_run:
        add(_stack(spec), THIS_RUN)
    buckets = {r.get("bucket") for r in members}
    finding = next((r.get("finding") for r in members if r.get("finding")), None)
    for bug in (bugs or {}).values():
        if bug.bug == finding or buckets & set(bug.bucket_ids):
            add(bug.versions, DATABASE)
    if matrix is not None and finding:
        dists = {*distributions(spec), "torch"}
        for col in matrix.columns:
            cell = col.cells.get(finding)
            if cell is not None and cell.outcome == "reproduces":
                add([f"{PACKAGES[k]}=={v}" for k, v in col.versions.items()
                     if v and k in PACKAGES and PACKAGES[k] in dists], MATRIX)
    order = (THIS_RUN, DATABASE, MATRIX)
    return [Seen(v, tuple(sorted(s, key=order.index))) for v, s in sorted(found.items())]


def torch_seen(seen: list[Seen]) -> list[Seen]:
    """The torch versions of `seen`."""
    return [s for s in seen if s.version.startswith("torch==")]


def seen_line(seen: list[Seen]) -> str:
    """The report's line: `**Seen on:** torch==2.13.0 (this run, bug database), ...`."""
    torch = torch_seen(seen)
    other = [s for s in seen if s not in torch]
    return ("**Seen on** (torch versions the bug failed on): "
            + ("; ".join(s.text() for s in torch) or "no torch version recorded")
            + (f". Other packages: {'; '.join(s.text() for s in other)}" if other else "")
            + ".")


def seen_comment(seen: list[Seen]) -> str:
    """repro.py's comment block: the versions seen, one a line."""
    lines = ["# Versions this bug was seen failing on (dynsmith's triage: this run, the bug",
             "# database's sightings, the version matrix):"]
    lines += [f"#   {s.text()}" for s in seen] or ["#   (none recorded)"]
    lines.append("# The full environment (python -m torch.utils.collect_env) is in report.md.")
    return "\n".join(lines) + "\n"
