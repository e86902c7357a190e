"""docs/results-schema.md documents exactly the columns and verdicts the code writes."""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from campaign.schema import RESULT_SCHEMA, columns, docs_table, page_with_table
from campaign.verdict import Verdict

DOC = (Path(__file__).resolve().parents[2] / "docs" / "results-schema.md").read_text()


def _table_keys(heading: str) -> list[str]:
    section = DOC.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def test_every_column_documented_in_order():
    assert _table_keys("# Results schema") == RESULT_SCHEMA.names


def test_the_page_holds_the_table_the_row_states():
    """The column table is derived from `ResultRow` (`python -m campaign.schema --write`)."""
    assert docs_table() in DOC and page_with_table(DOC) == DOC
    assert all(c.doc.strip() for c in columns())
    stale = DOC.replace("| `seed` | int64 |", "| `seed` | int32 |")
    assert page_with_table(stale) == DOC


def test_the_schema_is_the_rows_fields():
    assert [(c.name, c.nullable) for c in columns()] == [
        (f.name, f.nullable) for f in RESULT_SCHEMA]
    assert RESULT_SCHEMA.field("seed").type == pa.int64()
    assert RESULT_SCHEMA.field("n_if").type == pa.int32()
    assert RESULT_SCHEMA.field("ts").type == pa.timestamp("ms", tz="UTC")


def test_every_verdict_documented():
    assert _table_keys("## Verdicts") == [v.value for v in Verdict]
