"""The repeat mode (campaign/modes/repeat.py): a mode added as one module."""
from __future__ import annotations

import numpy as np
from buggy_backends import StaleAfterOther

from campaign.modes import INFER, MODES, REPEAT, drawn_mode
from campaign.worker import FuzzWorker, WorkerConfig
from ir.gen.builder import GenConfig


def _worker(p_repeat: float, **gen) -> FuzzWorker:
    cfg = WorkerConfig(generator=GenConfig(p_repeat=p_repeat, p_if=0.2, **gen), backends=[],
                       sandbox=False)
    return FuzzWorker(cfg)


def test_it_is_registered_and_drawn_among_the_inference_tests_only():
    assert MODES["repeat"] is REPEAT
    assert all(drawn_mode(s, GenConfig(p_repeat=1.0)) is REPEAT for s in range(20))
    assert all(drawn_mode(s, GenConfig()) is INFER for s in range(20))
    assert all(drawn_mode(s, GenConfig(p_repeat=1.0, p_grad=1.0)).name == "grad"
               for s in range(20))


def test_a_repeat_tests_last_set_is_its_first_and_so_is_the_reference():
    repeat = _worker(1.0)
    for seed in range(5):
        b = repeat.make_test(f"t{seed}", seed)
        assert b.mode is REPEAT and b.repeat.of_set == 0 and b.n_sets >= 2
        assert all(np.array_equal(b.extra_inputs[-1][v.name], b.values[v.name])
                   for v in b.graph.inputs)
        report = repeat.run_case(b)
        assert report.rows == [] and report.findings == []  # no backend: nothing judged
        n, ref = len(b.graph.outputs), b.ref_outputs
        assert ref is not None  # the input-set search's outputs, the repeat's included
        assert all(np.array_equal(x, y) for x, y in zip(ref[-n:], ref[:n], strict=True))


def test_a_stale_cache_passes_every_set_once_and_fails_the_repeat():
    worker = _worker(1.0)
    stale = StaleAfterOther()
    stale.name = "stale"
    worker.backends = [stale]
    found = 0
    for seed in range(6):
        tc = worker.make_test(f"t{seed}", seed)
        rows = worker.run_case(tc).rows
        assert rows[0]["mode"] == "repeat"
        if tc.n_sets > 2:  # another set ran between set 0 and its repeat
            assert rows[0]["verdict"] == "mismatch", rows[0]
            assert rows[0]["mismatch_input_set"] == tc.n_sets - 1
            found += 1
    assert found
    plain = _worker(0.0)
    plain.backends = [stale]
    assert all(plain.run_case(plain.make_test(f"t{s}", s)).rows[0]["verdict"] == "pass"
               for s in range(6))


def test_a_repeat_test_keeps_its_mode_through_the_evaluators_packing():
    """The campaign sends a prepared test to the evaluators as bytes (`pipeline.pack_case`,
    `sandbox.Job`): each mode's spec travels with it, so their rows say `repeat` too."""
    from campaign.pipeline import pack_case, unpack_case

    worker = _worker(1.0)
    prep = worker.make_prepared("t0", 0)
    assert prep.tc.mode is REPEAT
    back = unpack_case(pack_case(prep))
    assert back.tc.mode is REPEAT and back.tc.n_sets == prep.tc.n_sets
    stale = StaleAfterOther()
    row, _ = worker.judge(stale, back, stale.evaluate(back.m))
    assert row.mode == "repeat"
