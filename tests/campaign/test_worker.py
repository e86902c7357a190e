"""FuzzWorker without Ray: a generator failure becomes a storable `invalid` row, never a crash."""
from __future__ import annotations

from campaign.storage import ResultSink, read_results
from campaign.worker import FuzzWorker, WorkerConfig
from ir import GenConfig


def test_generator_failure_is_an_invalid_row_the_sink_accepts(tmp_path):
    worker = FuzzWorker(WorkerConfig(generator=GenConfig(ops_include=["nope"]),
                                     backends=["ort", "ort_noopt"], sandbox=False))
    report = worker.run("t0", 7)
    assert [(r["backend"], r["verdict"], r["stage"]) for r in report.rows] == [
        ("ort", "invalid", "generate"), ("ort_noopt", "invalid", "generate")]
    assert report.rows[0]["error_msg"] == (
        "ValueError: generator: unknown op 'nope' in ops_include/ops_exclude")
    assert len(report.findings) == 1 and "info.json" in report.findings[0].files
    sink = ResultSink(tmp_path, "run", "test", flush_rows=10, flush_every_s=60)
    for row in report.rows:
        sink.add(row)
    sink.close()
    assert read_results(tmp_path).num_rows == 2


def test_generated_tests_pass_on_ort_without_sandbox():
    worker = FuzzWorker(WorkerConfig(backends=["ort_noopt"], sandbox=False))
    verdicts = [worker.run(f"t{i}", i).rows[0]["verdict"] for i in range(20)]
    assert "mismatch" not in verdicts
    assert verdicts.count("pass") >= 18
