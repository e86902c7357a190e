"""FuzzWorker without Ray: a generator failure becomes a storable `invalid` row, never a crash."""
from __future__ import annotations

from pathlib import Path

from campaign.storage import ResultSink, read_results
from campaign.worker import FuzzWorker, WorkerConfig
from ir import GenConfig
from mutators import MutationConfig


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


def test_control_flow_tests_run_every_input_set_on_every_backend():
    """A test with an if and a loop gets input sets covering both branches and zero trips;
    each backend (here in sandboxes, so the sets cross the process boundary) runs them all."""
    from campaign.testcase import TestCase
    from ir import parse, verify
    from ir.numerics.flow_coverage import cover
    from ir.numerics.input_search import make_valid

    g = verify(parse((Path(__file__).parents[1] / "data" / "if_loop.gir").read_text()))
    valid = make_valid(g, 3)
    covered = cover(g, valid.search.values, 3)
    tc = TestCase("t-sets", 3, g, valid.search.values, [{"seed": 3}], covered.extra,
                  covered.coverage.summary())
    with FuzzWorker(WorkerConfig(backends=["ort_noopt", "eager"])) as worker:
        rows = worker.run_case(tc).rows
    assert [(r["backend"], r["verdict"]) for r in rows] == [("ort_noopt", "pass"), ("eager", "pass")]
    assert {r["n_input_sets"] for r in rows} == {tc.n_sets} and tc.n_sets >= 3
    assert {r["branch_coverage"] for r in rows} == {1.0} and 0 in rows[0]["trip_counts"]
    assert {r["n_if_both"] for r in rows} == {g.op_counts()["if"]} and g.op_counts()["if"] >= 1


def test_a_test_slow_only_under_load_gets_its_real_verdict_and_no_timeout_finding(tmp_path):
    """Its first attempt runs past the sandbox's limit (as a compile may on a loaded machine);
    the re-run in a fresh process with 3x the limit finishes: the row has the re-run's verdict,
    says the first attempt timed out and how long the re-run took; there is no finding."""
    from campaign.sandbox import SandboxConfig
    from campaign.testcase import TestCase
    from ir import parse
    from ir.numerics.values import random_values

    g = parse("""graph main(%x0: f32[2,3], %w1: param f32[3,4]) {
      %v2 = matmul(%x0, %w1) : f32[2,4]
      %v3 = relu(%v2) : f32[2,4]
      return %v3
    }""")
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = f"buggy_backends:SlowOnce?seconds=600&marks={marks}"
    cfg = WorkerConfig(backends=[spec], limits=SandboxConfig(timeout_s=1.0,
                                                            confirm_timeout_factor=3.0))
    with FuzzWorker(cfg) as worker:
        report = worker.run_case(TestCase("slow-0", 0, g, random_values(g, 0), [{"seed": 0}]))
    (row,) = report.rows
    assert row["verdict"] == "pass" and report.findings == []
    assert row["timeout_confirmed"] is False
    assert (row["timeout_limit_s"], row["confirm_limit_s"]) == (1.0, 3.0)
    assert 0 <= row["confirm_s"] < 3.0  # in ms steps: a re-run under 0.5 ms reads 0.0
    sink = ResultSink(tmp_path, "run", "test", flush_rows=10, flush_every_s=60)
    sink.add(row)
    sink.close()
    (back,) = read_results(tmp_path).to_pylist()
    assert (back["timeout_confirmed"], back["confirm_limit_s"]) == (False, 3.0)


def test_the_reference_takes_the_outputs_the_input_set_search_computed_unchanged():
    """`cover`'s traced runs are the reference's own evaluation: the outputs a test carries
    (`TestCase.ref_outputs`) are bit for bit what running the reference again gives, set after
    set, for tests with several input sets and without."""
    from dataclasses import replace

    import numpy as np

    from campaign.artifacts import Materialized
    from campaign.reference import run_reference
    from ir import GenConfig

    worker = FuzzWorker(WorkerConfig(generator=GenConfig(p_if=0.3, p_loop=0.2), sandbox=False,
                                     backends=["ort_noopt"]))
    sets = []
    for seed in range(12):
        tc = worker.make_test(f"t{seed}", seed)
        assert tc.ref_outputs is not None
        again = run_reference(Materialized(replace(tc, ref_outputs=None)))
        assert again.problem is None and len(again.outputs) == len(tc.ref_outputs)
        assert len(tc.ref_outputs) == tc.n_sets * len(tc.graph.outputs)
        for a, b in zip(tc.ref_outputs, again.outputs, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        sets.append(tc.n_sets)
    assert max(sets) >= 3 and min(sets) == 1


def test_a_test_made_for_a_backend_holds_none_of_the_ops_it_lacks():
    """Capability routing: `make_test(..., avoid=)` keeps a graph without those ops (a mutant
    or a generated one) and otherwise generates without them; the lineage records them, and
    the same seed with the same `avoid` makes the same test again."""
    from campaign.backends.tvm import TVM_LACKS
    from ir.core.text import print_graph

    gen = GenConfig(p_if=0.15, p_loop=0.3, p_scan=0.3, max_depth=2)
    cfg = WorkerConfig(generator=gen, mutation=MutationConfig(rate=0.5), sandbox=False)
    with_loops = 0
    for seed in range(12):
        plain = FuzzWorker(cfg).make_test(f"t-{seed}", seed)
        with_loops += bool(TVM_LACKS & set(plain.graph.op_counts()))
        made = FuzzWorker(cfg).make_test(f"t-{seed}", seed, avoid=TVM_LACKS)
        assert not TVM_LACKS & set(made.graph.op_counts()), seed
        assert made.lineage[0]["avoid"] == sorted(TVM_LACKS)
        again = FuzzWorker(cfg).make_test(f"t-{seed}", seed, avoid=TVM_LACKS)
        assert print_graph(again.graph) == print_graph(made.graph)
    assert with_loops >= 4  # the restriction had work to do
    assert gen.without({"loop", "if", "lstm"}) == GenConfig(
        p_if=0.0, p_loop=0.0, p_scan=0.3, max_depth=2, ops_exclude=["lstm"])


def test_npz_archives_keep_values_named_like_savez_parameters():
    """A seed may name a value `%file` or `%allow_pickle`: `np.savez(buf, **arrays)` took those
    for its own parameters (a TypeError, or a value silently dropped)."""
    import io

    import numpy as np

    from campaign.testcase import npz_bytes

    arrays = {"file": np.arange(3, dtype=np.float32), "allow_pickle": np.zeros((), np.int64),
              "x0": np.ones((2, 2), np.bool_)}
    with np.load(io.BytesIO(npz_bytes(arrays)), allow_pickle=False) as z:
        assert sorted(z.files) == sorted(arrays)
        for name, a in arrays.items():
            assert z[name].dtype == a.dtype and np.array_equal(z[name], a)
