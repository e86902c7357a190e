"""The results sink: whole Parquet files with the exact schema, readable while temp files lie
around, rows checked against the schema."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from campaign.schema import RESULT_SCHEMA
from campaign.storage import (
    ExistingRun,
    ResultSink,
    RowError,
    existing_run,
    read_results,
    read_sweep,
    sweep_files,
)


def _rows(make_row, n: int) -> list[dict]:
    return [make_row(test_id=f"r-{i:06d}", seed=i, verdict="pass" if i % 3 else "crash",
                     stage=None if i % 3 else "compile", error_class=None if i % 3 else "E",
                     finding_dir=None if i % 3 else f"findings/ort/crash/r-{i:06d}")
            for i in range(n)]


def test_rows_round_trip_with_exact_schema(tmp_path, make_row):
    rows = _rows(make_row, 10)
    sink = ResultSink(tmp_path, "r", "camp", flush_rows=4, flush_every_s=1e9)
    sink.add_many(rows)
    assert [p.name for p in sink.files] == ["part-r-000000.parquet", "part-r-000001.parquet"]
    assert sink.buffered == 2
    sink.close()
    assert sink.rows_written == 10 and len(sink.files) == 3

    for f in sink.files:
        assert pq.read_schema(f).equals(RESULT_SCHEMA)
    table = read_results(tmp_path)
    assert table.schema.equals(RESULT_SCHEMA)
    got = sorted(table.to_pylist(), key=lambda r: r["test_id"])
    expected = [{**r, "campaign": "camp", "run_id": "r", "finding_dir": r.get("finding_dir")}
                for r in rows]
    assert got == [{k: e[k] for k in RESULT_SCHEMA.names} for e in expected]


def test_leftover_temp_files_are_ignored(tmp_path, make_row):
    with ResultSink(tmp_path, "r", "camp") as sink:
        sink.add(make_row())
    # what a kill during a write leaves behind: a partial file under a temp name
    (tmp_path / "results" / ".tmp-part-r-000001.parquet").write_bytes(b"PAR1 truncated")
    (tmp_path / "results" / "_scratch.parquet").write_bytes(b"junk")
    assert read_results(tmp_path).num_rows == 1
    assert pads.dataset(tmp_path / "results", format="parquet").to_table().num_rows == 1


def test_empty_and_missing_results(tmp_path):
    table = read_results(tmp_path)
    assert table.num_rows == 0 and table.schema.equals(RESULT_SCHEMA)
    sink = ResultSink(tmp_path, "r", "camp")
    assert sink.flush() is None
    sink.close()
    assert list((tmp_path / "results").iterdir()) == []


def test_timed_flush(tmp_path, make_row):
    sink = ResultSink(tmp_path, "r", "camp", flush_rows=100, flush_every_s=0.0)
    sink.add(make_row())
    assert sink.maybe_flush() is not None and sink.buffered == 0


def test_all_null_optional_column_keeps_its_type(tmp_path, make_row):
    with ResultSink(tmp_path, "r", "camp") as sink:
        sink.add(make_row())  # every optional column None
    table = read_results(tmp_path)
    assert table.schema.field("max_abs_err").type == pa.float64()
    assert table.column("max_abs_err").null_count == 1


def test_bad_rows_are_rejected_with_the_column_named(tmp_path, make_row):
    sink = ResultSink(tmp_path, "r", "camp")
    with pytest.raises(RowError, match="result row r-000000: unknown column 'verdictt'"):
        sink.add(make_row(verdictt="pass"))
    row = make_row()
    del row["host"]
    with pytest.raises(RowError, match="result row r-000000: column 'host' is missing or null"):
        sink.add(row)
    with pytest.raises(RowError, match="column 'verdict' is missing or null"):
        sink.add(make_row(verdict=None))
    assert sink.buffered == 0


def test_a_resumed_sink_goes_on_after_the_files_there(tmp_path, make_row):
    with ResultSink(tmp_path, "r", "camp", flush_rows=2) as sink:
        sink.add_many(_rows(make_row, 5))
    prev = existing_run(tmp_path)
    assert prev.run_id == "r" and prev.rows == 5 and prev.next_seq == 3
    assert prev.test_ids == {f"r-{i:06d}" for i in range(5)}
    with ResultSink(tmp_path, "r", "camp", seq_start=prev.next_seq) as sink:
        sink.add(make_row(test_id="r-000005"))
    assert sink.files[0].name == "part-r-000003.parquet"
    assert read_results(tmp_path).num_rows == 6
    assert existing_run(tmp_path / "nowhere") == ExistingRun(None, 0, set(), 0)


def test_results_of_several_campaigns_read_as_one(tmp_path, make_row):
    """A Hydra sweep writes one dataset per job (<sweep>/<job>/results/); they read as one."""
    for job, camp in enumerate(["cpu_ort", "cpu_tvm"]):
        with ResultSink(tmp_path / str(job), f"run{job}", camp) as sink:
            sink.add_many(_rows(make_row, 3))
        (tmp_path / str(job) / "findings").mkdir()
        (tmp_path / str(job) / "findings" / "x.json").write_text("{}")  # not a results file
    (tmp_path / "0" / "results" / ".tmp-part-run0-000009.parquet").write_bytes(b"partial")
    assert len(sweep_files(tmp_path)) == 2
    table = read_sweep(tmp_path)
    assert table.schema.equals(RESULT_SCHEMA) and table.num_rows == 6
    assert sorted(set(table.column("campaign").to_pylist())) == ["cpu_ort", "cpu_tvm"]
    assert read_sweep(tmp_path / "empty").num_rows == 0


def test_files_written_before_n_if_both_read_with_it_null(tmp_path, make_row):
    """A results file from before the `n_if_both` column still reads with the current schema."""
    rows = _rows(make_row, 3)
    sink = ResultSink(tmp_path, "new", "camp")
    sink.add_many(rows[:2])
    sink.close()
    old_schema = pa.schema([f for f in RESULT_SCHEMA if f.name != "n_if_both"])
    old = [{k: v for k, v in {**r, "campaign": "camp", "run_id": "old", "finding_dir": None}.items()
            if k != "n_if_both"} for r in rows[2:]]
    pq.write_table(pa.Table.from_pylist(old, schema=old_schema),
                   tmp_path / "results" / "part-old-000000.parquet")
    table = read_results(tmp_path)
    assert table.schema.equals(RESULT_SCHEMA) and table.num_rows == 3
    by_run = {(r["run_id"], r["test_id"]): r["n_if_both"] for r in table.to_pylist()}
    assert by_run[("old", "r-000002")] is None and by_run[("new", "r-000000")] == 1


class _FullDisk:
    """`campaign.storage.write_table` as on a disk that is full until `free()`: the write
    starts (a partial temp file appears) and fails with ENOSPC."""

    def __init__(self, real):
        self.real, self.full, self.calls = real, True, 0

    def __call__(self, table, path):
        import errno

        self.calls += 1
        if self.full:
            path.write_bytes(b"PAR1 partial")
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        self.real(table, path)

    def free(self):
        self.full = False


def test_a_full_disk_keeps_the_rows_in_memory_and_writes_them_when_space_comes_back(
        tmp_path, make_row, monkeypatch, caplog):
    import campaign.storage as storage

    sink = ResultSink(tmp_path, "r", "camp", flush_rows=4, flush_every_s=1e9)
    sink.add_many(_rows(make_row, 4))  # one good file first
    disk = _FullDisk(storage.write_table)
    monkeypatch.setattr(storage, "write_table", disk)
    monkeypatch.setattr(storage, "RETRY_S", 0.0)
    with caplog.at_level("WARNING", logger="campaign.storage"):
        sink.add_many(_rows(make_row, 10)[4:])  # the flush at 4 rows fails: nothing raised
        assert sink.blocked and sink.buffered == 6 and sink.rows_written == 4
        assert sink.maybe_flush() is None and sink.buffered == 6  # still full: retried, kept
        assert not list((tmp_path / "results").glob(".tmp-*"))  # the partial file is gone
        [warning] = [r.getMessage() for r in caplog.records]
        assert warning.startswith(f"results: cannot write to {tmp_path / 'results'} (disk full)"
                                  ": 4 rows kept in memory, generation paused; free at least ")
        disk.free()
        assert sink.maybe_flush() is not None
    assert not sink.blocked and sink.rows_written == 10 and disk.calls == 3
    assert "works again" in caplog.records[-1].getMessage()
    assert sorted(r["test_id"] for r in read_results(tmp_path).to_pylist()) == sorted(
        r["test_id"] for r in _rows(make_row, 10))


def test_rows_a_stop_could_not_write_are_spilled_and_recovered(tmp_path, make_row, monkeypatch):
    import campaign.storage as storage

    sink = ResultSink(tmp_path / "out", "r", "camp", flush_rows=100, flush_every_s=1e9)
    disk = _FullDisk(storage.write_table)
    monkeypatch.setattr(storage, "write_table",
                        lambda t, p: disk(t, p) if "out" in p.parts else disk.real(t, p))
    sink.add_many(_rows(make_row, 5))
    sink.close()
    assert sink.blocked and sink.buffered == 5
    f = sink.spill(tmp_path / "spill")
    assert f == tmp_path / "spill" / "r" / "part-r-000000.parquet" and sink.buffered == 0
    assert storage.recover_spilled(tmp_path / "elsewhere", tmp_path / "spill") == 0
    assert storage.recover_spilled(tmp_path / "out", tmp_path / "spill") == 1
    assert read_results(tmp_path / "out").num_rows == 5
    assert not (tmp_path / "spill" / "r").exists()
