"""The Parquet results schema, derived from `campaign.row.ResultRow` (each of its fields is a
column: name, type, nullability and meaning are stated there once). docs/results-schema.md's
column table is `docs_table()`, written by `python -m campaign.schema --write`; a test checks
the page holds it. Always write with this explicit schema (an all-null column would otherwise
be typed null and break readers)."""
from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from campaign.row import ResultRow

#: a column's Python type -> its Arrow type (`col(arrow=...)` names another)
_ARROW: dict[Any, pa.DataType] = {
    str: pa.string(), int: pa.int32(), float: pa.float64(), bool: pa.bool_(),
    datetime: pa.timestamp("ms", tz="UTC"),
    list[str]: pa.list_(pa.string()), list[int]: pa.list_(pa.int32()),
}
_NAMED: dict[str, pa.DataType] = {"int64": pa.int64()}
#: how the docs' table writes each Arrow type
_DOC_TYPE: dict[pa.DataType, str] = {
    pa.string(): "string", pa.int32(): "int32", pa.int64(): "int64", pa.float64(): "float64",
    pa.bool_(): "bool", pa.timestamp("ms", tz="UTC"): "timestamp[ms, UTC]",
    pa.list_(pa.string()): "list<string>", pa.list_(pa.int32()): "list<int32>",
}


@dataclasses.dataclass(frozen=True)
class Column:
    """One result column as `ResultRow` states it."""

    name: str
    type: pa.DataType
    nullable: bool
    doc: str

    @property
    def doc_type(self) -> str:
        return _DOC_TYPE[self.type] + ("?" if self.nullable else "")


def columns() -> list[Column]:
    """Every column, in the row's (and the schema's) order."""
    hints = typing.get_type_hints(ResultRow)
    out = []
    for f in dataclasses.fields(ResultRow):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else ()
        nullable = type(None) in args
        base = next(a for a in args if a is not type(None)) if nullable else hint
        named = f.metadata.get("arrow")
        out.append(Column(f.name, _NAMED[named] if named else _ARROW[base], nullable,
                          f.metadata["doc"]))
    return out


RESULT_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in columns()])

COLUMNS = tuple(RESULT_SCHEMA.names)

#: the docs page that holds the table, and the lines its table sits between
DOC_PAGE = Path(__file__).resolve().parents[1] / "docs" / "results-schema.md"
TABLE_HEAD = "| column | type | meaning |\n|---|---|---|\n"


def docs_table() -> str:
    """The docs' column table, one row per column."""
    return TABLE_HEAD + "".join(f"| `{c.name}` | {c.doc_type} | {c.doc} |\n" for c in columns())


def page_with_table(page: str) -> str:
    """`page` (docs/results-schema.md's text) with its column table replaced by `docs_table()`:
    the table runs from `TABLE_HEAD` to the first line that is not a table row."""
    start = page.index(TABLE_HEAD)
    end = start + len(TABLE_HEAD)
    while end < len(page) and page.startswith("|", end):
        end = page.index("\n", end) + 1
    return page[:start] + docs_table() + page[end:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="print or write the results' column table")
    p.add_argument("--write", action="store_true", help=f"rewrite the table in {DOC_PAGE}")
    a = p.parse_args(argv)
    if not a.write:
        sys.stdout.write(docs_table())
        return 0
    DOC_PAGE.write_text(page_with_table(DOC_PAGE.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
