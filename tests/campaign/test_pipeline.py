"""The two Ray-free stages: a test generated once, shipped as bytes and evaluated by a backend's
own evaluator gets exactly the row `FuzzWorker.run` gives it; failures stay per test."""
from __future__ import annotations

from campaign.pipeline import CaseError, Evaluator, Generated, Generator, case_finding, unpack_case
from campaign.worker import FuzzWorker, TestReport, WorkerConfig
from ir import GenConfig

#: columns that differ between two runs of the same test (time, process)
VOLATILE = {"ts", "worker", "host", "gen_ms", "ref_ms", "compile_ms", "run_ms", "cpu_ms"}


def _same(a: dict, b: dict) -> dict:
    return {k: (a[k], b.get(k)) for k in a if k not in VOLATILE and a[k] != b.get(k)}


def test_generate_then_evaluate_gives_the_rows_of_the_one_process_worker():
    backends = ["ort", "ort_noopt"]
    cfg = WorkerConfig(backends=backends, sandbox=False)
    gen = Generator(cfg, "g")
    items = [(f"t-{i:06d}", i, backends) for i in range(12)]
    made = gen.generate(items)
    assert all(isinstance(g, Generated) for g in made)
    evaluators = {b: Evaluator(cfg, b, f"e-{b}") for b in backends}
    got = {}
    for g in made:
        if g.report is not None:  # an invalid test: rows for its backends, made at generation
            for r in g.report.rows:
                got[(r["test_id"], r["backend"])] = r
            continue
        for b, ev in evaluators.items():
            (report,) = ev.evaluate([g.case])
            assert isinstance(report, TestReport) and len(report.rows) == 1
            row = report.rows[0]
            assert row["worker"].startswith(f"e-{b}@") and row["backend"] == b
            got[(row["test_id"], b)] = row
    worker = FuzzWorker(cfg)
    want = {(r["test_id"], r["backend"]): r for t, s, _ in items for r in worker.run(t, s).rows}
    assert got.keys() == want.keys()
    assert all(not _same(want[k], got[k]) for k in want), [_same(want[k], got[k]) for k in want]


def test_invalid_tests_get_rows_only_for_their_backends_and_errors_stay_per_test():
    cfg = WorkerConfig(generator=GenConfig(ops_include=["nope"]), backends=["ort", "ort_noopt"],
                       sandbox=False)
    (g,) = Generator(cfg, "g").generate([("t-000001", 1, ["ort_noopt"])])
    assert g.case is None and [r["backend"] for r in g.report.rows] == ["ort_noopt"]
    assert g.report.rows[0]["verdict"] == "invalid" and g.report.rows[0]["stage"] == "generate"
    ev = Evaluator(WorkerConfig(backends=["ort"], sandbox=False), "ort", "e")
    good = Generator(WorkerConfig(backends=["ort"], sandbox=False), "g").generate(
        [("t-000002", 2, ["ort"])])[0]
    out = ev.evaluate([b"not a case", good.case])
    assert isinstance(out[0], CaseError) and "harness error" in out[0].message
    assert isinstance(out[1], TestReport) and out[1].rows[0]["test_id"] == "t-000002"


def test_a_shipped_case_evaluates_in_the_sandbox_and_makes_artifacts():
    cfg = WorkerConfig(backends=["ort"])
    good = Generator(cfg, "g").generate([("t-000003", 3, ["ort"])])[0]
    prep = unpack_case(good.case)
    assert prep.tc.test_id == "t-000003" and prep.ref.outputs is not None
    ev = Evaluator(cfg, "ort", "e")
    try:
        (report,) = ev.evaluate([good.case])
    finally:
        ev.close()
    assert report.rows[0]["verdict"] == "pass"
    row = report.rows[0]
    f = case_finding(good.case, row.for_backend(row.backend, row.target, verdict="crash",
                                                error_sig="WorkerDied"))
    assert {"graph.gir", "model.onnx", "inputs.npz", "expected.npz", "info.json"} <= set(f.files)
