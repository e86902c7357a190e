"""The cache mode (campaign/modes/cache.py): drawn among inference tests, its reference each
set's outputs twice (warm, cold), its near-twins, a stale warm cache caught on the warm
outputs only, the mode kept through the evaluators' packing, and Inductor's real caches: a
test paired with itself (compiled in the python dialect, where Dynamo's frames hold no
higher-order op, which the caches bypass) hits both caches and agrees with eager (the
property the oracle rests on)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from buggy_backends import StaleWarmCache

from campaign.modes import CACHE, INFER, MODES, REPEAT, drawn_mode
from campaign.modes.cache import TWINS, CacheSpec, schema_twin
from campaign.worker import FuzzWorker, WorkerConfig
from ir import GenConfig, parse, verify
from ir.ops.custom import Custom

MUTATING = """graph main(%x: f32[4,3], %y: f32[3]) {
  %a = mul(%x, %x) : f32[4,3]
  %c = clone(%a) : f32[4,3]
  custom[label=k1, mutates=[0]](%c, %y) : () {
    graph k1(%c1: f32[4,3], %y1: f32[3]) {
      %n = add(%c1, %y1) : f32[4,3]
      return %n
    }
  }
  %o = sin(%c) : f32[4,3]
  return %o
}
"""


def _worker(**gen) -> FuzzWorker:
    cfg = WorkerConfig(generator=GenConfig(p_cache=1.0, p_if=0.2, **gen), backends=[],
                       sandbox=False)
    return FuzzWorker(cfg)


def test_it_is_registered_and_drawn_among_the_inference_tests_before_repeat():
    assert MODES["cache"] is CACHE
    assert all(drawn_mode(s, GenConfig(p_cache=1.0, p_repeat=1.0)) is CACHE for s in range(20))
    assert all(drawn_mode(s, GenConfig(p_repeat=1.0)) is REPEAT for s in range(20))
    assert all(drawn_mode(s, GenConfig()) is INFER for s in range(20))
    assert all(drawn_mode(s, GenConfig(p_cache=1.0, p_grad=1.0)).name == "grad"
               for s in range(20))


def test_the_reference_is_each_sets_outputs_twice():
    w = _worker()
    for seed in range(4):
        prep = w.make_prepared(f"t{seed}", seed)
        tc = prep.tc
        assert tc.mode is CACHE and tc.cache.twin in TWINS
        n = len(tc.graph.outputs)
        assert CACHE.labels(tc) == [f"warm output {i}" for i in range(n)] + \
            [f"cold output {i}" for i in range(n)]
        ref = prep.ref.outputs
        assert len(ref) == 2 * n * tc.n_sets
        for k in range(tc.n_sets):
            block = ref[2 * n * k:2 * n * (k + 1)]
            assert all(np.array_equal(a, b, equal_nan=True)
                       for a, b in zip(block[:n], block[n:], strict=True))
        assert len(prep.tolerances) == 2 * n


def test_every_twin_kind_is_drawn_and_verifies():
    w = _worker(p_custom=1.0)
    seen = set()
    for seed in range(40):
        tc = w.make_test(f"t{seed}", seed)
        if tc.cache is None:
            continue
        seen.add(tc.cache.twin)
        if tc.cache.twin == "dtype":  # widened: op dtype rules aside, eager runs it
            from campaign.evaluation import torch_env
            from ir.materialize.to_torch import run_graph_torch

            run_graph_torch(tc.cache.graph, torch_env(tc.cache.values))
        else:
            verify(tc.cache.twin_graph(tc))
    assert seen == set(TWINS), seen


def test_a_schema_twin_keeps_the_name_and_changes_the_op():
    g = parse(MUTATING)
    spec = schema_twin(g, random.Random(0))
    (twin_inst,) = [i for i, _ in spec.graph.walk() if isinstance(i.op, Custom)]
    (inst,) = [i for i, _ in g.walk() if isinstance(i.op, Custom)]
    assert twin_inst.op.mutates == () and inst.op.mutates == (0,)
    assert spec.rename == {twin_inst.op.qualname(twin_inst.blocks[0]):
                           inst.op.qualname(inst.blocks[0])}
    verify(spec.graph)


def test_a_stale_warm_cache_is_a_mismatch_of_a_warm_output():
    worker = _worker()
    stale = StaleWarmCache()
    worker.backends = [stale]
    g = parse(MUTATING)
    from campaign.testcase import TestCase, random_values

    tc = TestCase("t0", 0, g, random_values(g, 0))
    tc.cache = schema_twin(g, random.Random(0))
    (row,) = worker.run_case(tc).rows
    assert row["mode"] == "cache"
    assert row["verdict"] == "mismatch", row
    assert row["mismatch_output"] == 0  # warm output 0; the cold ones agree
    tc.cache = CacheSpec("self")
    (row,) = worker.run_case(tc).rows
    assert row["verdict"] == "pass", row


def test_a_backend_that_does_not_cache_is_judged_on_the_forward():
    from campaign.backends import make_backend

    worker = _worker()
    worker.backends = [make_backend("ort")]
    tc = worker.make_test("t0", 0)
    (row,) = worker.run_case(tc).rows
    assert (row["mode"], row["verdict"]) == ("infer", "pass"), row


def test_a_cache_test_keeps_its_mode_through_the_evaluators_packing():
    from campaign.pipeline import pack_case, unpack_case

    prep = _worker().make_prepared("t0", 0)
    back = unpack_case(pack_case(prep))
    assert back.tc.mode is CACHE and back.tc.cache == prep.tc.cache or \
        back.tc.cache.twin == prep.tc.cache.twin


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inductor_paired_with_itself_hits_both_caches_and_agrees(seed, tmp_path, monkeypatch):
    from torch._dynamo.utils import counters

    from campaign.backends import make_backend

    # as in a sandbox process: its cache directory named, not yet made (Inductor makes it
    # when it first writes there; a cache test's fresh directories go inside it)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))

    worker = _worker(nodes=6)
    worker.backends = [make_backend("inductor")]
    tc = worker.make_test(f"t{seed}", seed)
    tc.cache = CacheSpec("self")
    counters.clear()
    (row,) = worker.run_case(tc).rows
    assert (row["mode"], row["verdict"]) == ("cache", "pass"), row
    assert counters["inductor"]["fxgraph_cache_hit"] >= 1
    assert counters["aot_autograd"]["autograd_cache_hit"] >= 1
    assert row["cache_hits"] >= 2  # the row says what the warm compile was served


def test_a_twins_inputs_keep_their_shapes_and_take_the_strides_asked():
    """numpy's ascontiguousarray makes a 0-d array 1-d: a twin fed so compiled another
    program (a masked_fill_ of a 0-d value by a 1-element mask failed to trace: our harness,
    not the compiler)."""
    from campaign.backends.inductor import twin_arrays

    g = parse("""graph main(%s: f32[], %m: f32[2,3]) {
  %r = mul(%m, %s) : f32[2,3]
  return %r
}""")
    values = {"s": np.array(2.0, np.float32), "m": np.arange(6, dtype=np.float32).reshape(2, 3)}
    for strided in (False, True):
        s, m = twin_arrays(g, values, strided)
        assert s.shape == () and m.shape == (2, 3)
        assert np.array_equal(m, values["m"]) and m is not values["m"]
        assert m.flags["F_CONTIGUOUS" if strided else "C_CONTIGUOUS"]
        if strided:
            assert not m.flags["C_CONTIGUOUS"]


def test_every_twin_is_rebuilt_from_its_files():
    """What a finding folder holds of the twin (`CacheSpec.files`) gives it back, a `schema`
    twin's rename included (the triage's re-run rebuilds it: `load_finding`)."""
    import json

    from campaign.modes.cache import draw_twin
    from campaign.testcase import TestCase, random_values

    g = parse(MUTATING)
    tc = TestCase("t0", 0, g, random_values(g, 0))
    seen = set()
    for seed in range(60):
        spec = draw_twin(tc, seed)
        assert spec is not None
        seen.add(spec.twin)
        files = spec.files()
        assert set(files) == {"cache_twin.json"} | ({"twin.gir"} if spec.graph else set()) \
            | ({"twin_inputs.npz"} if spec.values else set())
        back = CacheSpec.from_files(files, g)
        assert (back.twin, back.graph, back.strided, back.config, back.rename) == \
            (spec.twin, spec.graph, spec.strided, spec.config, spec.rename)
        assert (back.values is None) == (spec.values is None)
        for k, v in (spec.values or {}).items():
            assert back.values is not None and back.values[k].dtype == v.dtype
            assert np.array_equal(back.values[k], v)
        if spec.twin == "schema":  # a folder from before the rename was written: derived
            assert spec.rename
            meta = json.loads(files["cache_twin.json"])
            del meta["rename"]
            old = {**files, "cache_twin.json": json.dumps(meta).encode()}
            assert CacheSpec.from_files(old, g).rename == spec.rename
    assert seen == set(TWINS), seen


def test_a_twin_with_a_graph_of_its_own_keeps_only_the_graph_it_was_drawn_for():
    """A re-run's candidate (`TestMode.refit`): the test itself follows any graph, a `schema`
    twin only its own (a reduced graph would not be its near-twin)."""
    from campaign.testcase import TestCase, random_values

    g = parse(MUTATING)
    other = parse(MUTATING.replace("sin(%c)", "cos(%c)"))
    schema = schema_twin(g, random.Random(0))
    for spec, graph, problem in ((schema, g, None),
                                 (schema, other, "a schema twin drawn for another graph"),
                                 (CacheSpec("self"), other, None)):
        tc = TestCase("t0", 0, graph, random_values(graph, 0))
        assert CACHE.refit(tc, spec, g, 0) == problem
        assert tc.cache is (spec if problem is None else None)
        assert tc.mode is (CACHE if problem is None else INFER)
