"""The maker of a test and the judge of its results, each usable without a worker."""
from __future__ import annotations

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends import BackendResult, make_backend
from campaign.judge import Judge, Prepared
from campaign.maker import TestMaker
from campaign.reference import run_reference
from campaign.row import ResultRow
from campaign.worker import FuzzWorker, WorkerConfig, make_dyn_test
from ir.core.text import graph_hash
from ir.gen.builder import GenConfig
from mutators.source import MutationSource


def test_the_maker_alone_makes_the_workers_test():
    cfg = WorkerConfig(generator=GenConfig(p_grad=0.5, p_if=0.2), backends=[], sandbox=False)
    maker = TestMaker(cfg.generator, cfg.coverage, MutationSource(cfg.mutation, cfg.generator))
    worker = FuzzWorker(cfg)
    for seed in range(4):
        a, b = maker.make_test(f"t{seed}", seed), worker.make_test(f"t{seed}", seed)
        assert graph_hash(a.graph) == graph_hash(b.graph) and a.mode is b.mode
        assert all(np.array_equal(a.values[k], b.values[k]) for k in a.values)


def test_a_dynamic_shape_test_needs_no_worker():
    cfg = WorkerConfig(generator=GenConfig(p_dynshape=0.0), backends=[], sandbox=False)
    made = [make_dyn_test(cfg, f"t{seed}", seed) for seed in range(3)]
    assert any(tc.dynshape is not None for tc in made)


def test_the_judge_alone_passes_eagers_result_and_fails_a_wrong_one():
    cfg = WorkerConfig(generator=GenConfig(), backends=[], sandbox=False)
    maker = TestMaker(cfg.generator, cfg.coverage, MutationSource(cfg.mutation, cfg.generator))
    tc = maker.make_test("t0", 3)
    m = Materialized(tc)
    ref = run_reference(m)
    assert ref.outputs is not None and ref.problem is None
    base = ResultRow.of_test(tc, 0.0, None, "host", "w")
    prep = Prepared(m, ref, base, *tc.mode.tolerances(tc))
    eager, judge = make_backend("eager"), Judge()
    row, finding = judge.judge(eager, prep, BackendResult(outputs=list(ref.outputs)))
    assert (row.verdict, finding) == ("pass", None)
    wrong = [o + 1.0 if o.dtype.kind == "f" else o for o in ref.outputs]
    assert any(o.dtype.kind == "f" for o in ref.outputs)  # seed 3's graph has one
    row, finding = judge.judge(eager, prep, BackendResult(outputs=wrong))
    assert row.verdict == "mismatch" and finding is not None
    assert row.error_sig.startswith("Mismatch: output ")
