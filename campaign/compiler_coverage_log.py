"""`CampaignCoverage`: the campaign's compiler coverage, per backend: the union of the lines its
evaluators reported and how it grew, written as Parquet beside `results/` when the campaign
ends (docs/coverage.md):

- `coverage/union.parquet`: one row per (backend, file, line) covered;
- `coverage/growth.parquet`: one row per measured test that reached new lines: `backend`,
  `t_s` (seconds since the campaign started), `test_id`, `new` (lines it added), `lines` (the
  backend's union after it).

Owned by the driver, the only holder of every backend's reports: an evaluator actor that dies
loses its own union, never this one. On resume the union is read back from `union.parquet`,
so `cov_new` goes on counting against what the earlier runs saw.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from campaign.compiler_coverage import CoverageUnion

UNION_SCHEMA = pa.schema([pa.field("backend", pa.string(), nullable=False),
                          pa.field("file", pa.string(), nullable=False),
                          pa.field("line", pa.int32(), nullable=False)])
GROWTH_SCHEMA = pa.schema([pa.field("backend", pa.string(), nullable=False),
                           pa.field("t_s", pa.float64(), nullable=False),
                           pa.field("test_id", pa.string(), nullable=False),
                           pa.field("new", pa.int32(), nullable=False),
                           pa.field("lines", pa.int64(), nullable=False)])


@dataclass(frozen=True)
class Growth:
    """One step of a backend's union: a test that added `new` lines, making it `lines`."""

    backend: str
    t_s: float
    test_id: str
    new: int
    lines: int


class CampaignCoverage:
    """Per backend, the union of every measured test's lines and its growth over time.
    Invariant: `growth` lists, per backend, strictly increasing `lines`, whose last value is
    the union's size."""

    def __init__(self) -> None:
        self.unions: dict[str, CoverageUnion] = {}
        self.growth: list[Growth] = []

    def add(self, backend: str, test_id: str, lines: Mapping[str, frozenset[int]],
            t_s: float) -> int:
        """A test's lines for `backend` (what it added to its evaluator's union); returns how
        many are new to the campaign."""
        union = self.unions.setdefault(backend, CoverageUnion())
        new = sum(len(v) for v in union.add(lines).values())
        if new:
            self.growth.append(Growth(backend, round(t_s, 3), test_id, new, len(union)))
        return new

    def totals(self) -> dict[str, int]:
        """Per backend: lines covered."""
        return {b: len(u) for b, u in sorted(self.unions.items())}

    def write(self, folder: Path) -> None:
        """`union.parquet` and `growth.parquet` in `folder` (each written to a temp name and
        renamed into place)."""
        folder.mkdir(parents=True, exist_ok=True)
        union = [(b, f, line) for b, u in sorted(self.unions.items()) for f, line in u.rows()]
        _write(folder / "union.parquet", UNION_SCHEMA, {
            "backend": [r[0] for r in union], "file": [r[1] for r in union],
            "line": [r[2] for r in union]})
        _write(folder / "growth.parquet", GROWTH_SCHEMA, {
            "backend": [g.backend for g in self.growth], "t_s": [g.t_s for g in self.growth],
            "test_id": [g.test_id for g in self.growth], "new": [g.new for g in self.growth],
            "lines": [g.lines for g in self.growth]})

    @staticmethod
    def load(folder: Path) -> CampaignCoverage:
        """What an earlier run of the campaign wrote (empty when nothing was)."""
        cc = CampaignCoverage()
        path = folder / "union.parquet"
        if path.is_file():
            t = pq.read_table(path).to_pydict()
            for b, f, line in zip(t["backend"], t["file"], t["line"], strict=True):
                cc.unions.setdefault(b, CoverageUnion()).lines.setdefault(f, set()).add(line)
        path = folder / "growth.parquet"
        if path.is_file():
            t = pq.read_table(path).to_pydict()
            cc.growth = [Growth(*r) for r in zip(t["backend"], t["t_s"], t["test_id"], t["new"],
                                                  t["lines"], strict=True)]
        return cc


def _write(path: Path, schema: pa.Schema, columns: dict[str, list]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.table(columns, schema=schema), tmp)
    os.replace(tmp, path)
