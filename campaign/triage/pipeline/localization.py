"""Where in the compiler a bug is: the triage's side of `repro.py --localize`
(campaign/backends/repro_scripts/localize.py has the plans and says how they decide).

`localize_folder(folder)` runs a bug folder's repro.py with `--localize` in a fresh process
where importing dynsmith fails (as `check_repro` runs it), and reads its last
`LOCALIZATION: <json>` line into a `Localization`: the culprit (`ort: TransposeOptimizer`,
`tvm: relax.transform.StaticPlanBlockMemory`, `inductor: ...`) or None, why, and every run of
the ablation. A localization that could not run at all says so in `why`; it never raises.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.triage.pipeline.repro import run_fresh

#: the line of repro.py's output that carries the result
RESULT_PREFIX = "LOCALIZATION: "


@dataclass(frozen=True)
class AblationStep:
    """One run of the ablation: what was changed, the values it set, how the failure fared,
    and its seconds."""

    what: str
    values: dict[str, Any]
    outcome: str
    seconds: float


@dataclass(frozen=True)
class Localization:
    """The result: `culprit` None means not localized, and `why` says why."""

    culprit: str | None
    why: str
    steps: tuple[AblationStep, ...] = ()

    @property
    def text(self) -> str:
        """One cell of the bugs table: the culprit, or `not localized: <why>`."""
        return self.culprit if self.culprit else f"not localized: {self.why}"

    def table(self) -> str:
        """The ablation as a Markdown table (report.md)."""
        rows = ["| run | changed | outcome | s |", "|---|---|---|---|"]
        for i, s in enumerate(self.steps, 1):
            values = ", ".join(f"`{k}={json.dumps(v, default=str)}`" for k, v in s.values.items())
            rows.append(f"| {i} | {s.what}{' (' + values + ')' if values else ''} | "
                        f"{s.outcome} | {s.seconds:g} |")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {"culprit": self.culprit, "why": self.why,
                "steps": [s.__dict__ for s in self.steps]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Localization:
        steps = tuple(AblationStep(str(s["what"]), dict(s.get("values") or {}),
                                   str(s["outcome"]), float(s.get("seconds") or 0.0))
                      for s in data.get("steps") or ())
        return Localization(data.get("culprit") or None, str(data.get("why") or ""), steps)


def localize_folder(folder: Path, budget_s: float = 900.0,
                    python: str | None = None) -> Localization:
    """Run `folder/repro.py --localize` within `budget_s` seconds (the script keeps to it; a
    grace beyond it kills the run), with `python` (default ours: its runs use the same)."""
    folder = Path(folder)
    if not (folder / "repro.py").is_file():
        return Localization(None, "there is no repro.py")
    code, text, _, expired = run_fresh(folder, ["--localize", "--budget", f"{budget_s:g}"],
                                       budget_s + 60, python)
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                return Localization.from_json(json.loads(line[len(RESULT_PREFIX):]))
            except (ValueError, KeyError, TypeError) as e:
                return Localization(None, f"its result could not be read: {e}")
    last = (text.strip().splitlines() or [""])[-1][:200]
    if expired:
        return Localization(None, f"it ran past its budget of {budget_s:g} s")
    return Localization(None, f"repro.py --localize gave no result (exit {code}: "
                              f"{last})")
