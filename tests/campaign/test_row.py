"""`campaign.row.ResultRow`: its fields are RESULT_SCHEMA's columns, a row keeps its one form
from the judge to the sink's Arrow table (read as a mapping of its columns), and `error_msg` is
cut at one place, however it is set."""
from __future__ import annotations

import dataclasses
import pickle
import re
import typing
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from campaign.backends import BackendResult
from campaign.row import DOWNSTREAM, MAX_MSG, ResultRow
from campaign.schema import RESULT_SCHEMA
from campaign.storage import ResultSink, read_results
from campaign.testcase import TestCase
from campaign.verdict import Stage, Verdict
from campaign.worker import FuzzWorker, WorkerConfig
from ir import GenConfig, generate
from mutators import MutationConfig
from mutators.source import MutationSource

CAMPAIGN = Path(__file__).resolve().parents[2] / "campaign"


def _python_type(t: pa.DataType) -> typing.Any:
    if pa.types.is_string(t):
        return str
    if pa.types.is_integer(t):
        return int
    if pa.types.is_floating(t):
        return float
    if pa.types.is_boolean(t):
        return bool
    if pa.types.is_timestamp(t):
        return datetime
    if pa.types.is_list(t):
        return list[_python_type(t.value_type)]
    raise AssertionError(f"no Python type for {t}")


def _row(**columns) -> ResultRow:
    return ResultRow.graphless("t-000001", 1, **columns)


def test_the_fields_are_the_schema_columns_in_order_with_their_types_and_nullability():
    assert [f.name for f in dataclasses.fields(ResultRow)] == RESULT_SCHEMA.names
    hints = typing.get_type_hints(ResultRow)
    for f in RESULT_SCHEMA:
        t = _python_type(f.type)
        assert hints[f.name] == ((t | None) if f.nullable else t), f.name


def test_a_row_keeps_its_form_until_the_sink_writes_it_and_reads_as_its_columns(tmp_path):
    row = _row(backend="ort", target="cpu", verdict="pass", host="h", worker="w")
    assert list(row) == RESULT_SCHEMA.names and row["backend"] == "ort"
    assert row.get("no_such_column") is None and "verdict" in row
    with pytest.raises(KeyError):
        row["update"]  # a method is no column  # noqa: B018
    assert ResultRow.from_dict(dict(row)) == row
    sink = ResultSink(tmp_path, "run", "c", flush_rows=10, flush_every_s=60)
    sink.add(row)  # the object itself: no copy as a dict on the way
    row.update(finding_dir="findings/x")  # set by the driver before the sink writes
    sink.close()
    (written,) = read_results(tmp_path).to_pylist()
    assert written["lineage"] == '[{"seed": 1}]' and written["finding_dir"] == "findings/x"
    assert (written["campaign"], written["run_id"]) == ("c", "run")  # DOWNSTREAM: the sink's
    assert set(DOWNSTREAM) <= set(written)
    assert {k: v for k, v in written.items() if k not in (*DOWNSTREAM, "ts")} == {
        k: v for k, v in dict(row).items() if k not in (*DOWNSTREAM, "ts")}
    assert abs(written["ts"] - row.ts).total_seconds() < 1e-3  # Arrow keeps milliseconds


def test_a_row_crosses_processes_whole():
    row = _row(backend="ort", target="cpu", verdict="crash", error_msg="x" * (2 * MAX_MSG))
    back = pickle.loads(pickle.dumps(row))
    assert back == row and back.error_msg == "x" * MAX_MSG and type(back) is ResultRow
    with pytest.raises(AttributeError):
        back.eror_msg = "x"  # still slotted


def test_no_other_attribute_can_be_set():
    row = _row()
    with pytest.raises(AttributeError):
        row.update(verdcit="pass")
    with pytest.raises(AttributeError):
        row.eror_msg = "x"


def test_error_msg_is_cut_however_it_is_set():
    long = "x" * (3 * MAX_MSG)
    rows = [_row(error_msg=long), _row().for_backend("ort", "cpu", error_msg=long),
            ResultRow.from_dict({**_row(), "error_msg": long}),
            _row().lost("ort", "cpu", Verdict.CRASH, "WorkerDied", long, "h", "w", datetime.now())]
    assigned = _row()
    assigned.error_msg = long
    updated = _row()
    updated.update(error_msg=long)
    noted = _row(error_msg=long)
    noted.add_note("merged")
    for row in [*rows, assigned, updated, noted]:
        assert row.error_msg == long[:MAX_MSG]
    short = _row(error_msg="boom")
    short.add_note("merged")
    assert short.error_msg == "boom; merged" and _row(error_msg=None).error_msg is None


def test_a_backend_s_long_message_is_cut_once_in_its_row_and_finding():
    cfg = WorkerConfig(backends=["ort"], sandbox=False, mutation=MutationConfig(rate=0.0))
    with FuzzWorker(cfg) as w:
        prep = w.prepare(w.make_test("t-000002", 2))
        msg = "no kernel " * MAX_MSG
        row, finding = w.judge(w.backends[0], prep, BackendResult(
            verdict=Verdict.CRASH, stage=Stage.COMPILE, error_class="Fail", error_msg=msg,
            unusable=["fd 1 closed"]))
    assert row.error_msg == msg[:MAX_MSG] and row["error_msg"] == msg[:MAX_MSG]
    assert b'"error_msg": "no kernel' in finding.files["info.json"]


def test_only_the_row_module_cuts_messages():
    """Truncation is the row's: no other campaign module keeps its own message limit or cuts
    with one (a harness error keeps a traceback's tail; the row then cuts the message)."""
    cutters = re.compile(r"MAX_MSG\s*=|\[:MAX_MSG\]|\[:2000\]")
    offenders = [str(p.relative_to(CAMPAIGN)) for p in CAMPAIGN.rglob("*.py")
                 if p.name != "row.py" and cutters.search(p.read_text())]
    assert offenders == []


def test_a_generated_test_s_mutation_columns_with_mutation_off():
    """(Moved from tests/mutators/test_mutation_source.py with the columns, which
    `MutationSource.columns` built before `ResultRow.of_test` did.)"""
    src = MutationSource(MutationConfig(rate=0.0), GenConfig())
    g, lin = src.make("t0", 4)
    assert g == generate(4)
    row = ResultRow.of_test(TestCase("t0", 4, g, {}, lin), 0.0, src.novel(g), "h", "w")
    assert {k: getattr(row, k) for k in ("seed_id", "parent_id", "step_mutators",
                                          "mutation_discarded", "novel")} == {
        "seed_id": "gen/4", "parent_id": None, "step_mutators": [], "mutation_discarded": 0,
        "novel": None}
