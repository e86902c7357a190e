"""docs/results-schema.md documents exactly the columns and verdicts the code writes."""
from __future__ import annotations

import re
from pathlib import Path

from campaign.schema import RESULT_SCHEMA
from campaign.verdict import Verdict

DOC = (Path(__file__).resolve().parents[2] / "docs" / "results-schema.md").read_text()


def _table_keys(heading: str) -> list[str]:
    section = DOC.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def test_every_column_documented_in_order():
    assert _table_keys("# Results schema") == RESULT_SCHEMA.names


def test_every_verdict_documented():
    assert _table_keys("## Verdicts") == [v.value for v in Verdict]
