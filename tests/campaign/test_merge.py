"""Merged tests (campaign/merge.py): k tests compiled as one module, split back into one row per
test exactly as if each had run alone; a part the merged module did not pass cleanly is re-run
alone, and findings come only from alone runs."""
from __future__ import annotations

import io
import json
import time
from collections import Counter

import numpy as np
import pytest

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult
from campaign.merge import MergeError, merge, plan, unmergeable
from campaign.pipeline import Evaluator, pack_case, unpack_case
from campaign.reference import run_reference
from campaign.sandbox import SandboxConfig
from campaign.verdict import Stage
from campaign.worker import FuzzWorker, Prepared, WorkerConfig
from ir.core.rewrite import rename_prefixed
from ir.core.text import parse, print_graph
from ir.core.verify import verify
from ir.gen.builder import GenConfig
from mutators import MutationConfig

#: columns that differ between an alone and a merged run of the same test (time, process, the
#: merged compile's figures, the column telling them apart)
VOLATILE = {"ts", "worker", "host", "gen_ms", "ref_ms", "compile_ms", "run_ms", "cpu_ms", "merged"}


def _make(seeds, cfg: WorkerConfig | None = None) -> list[Prepared]:
    w = FuzzWorker(cfg or WorkerConfig(backends=["ort"], sandbox=False))
    preps = []
    for s in seeds:
        p = w.prepare(w.make_test(f"t{s}", s))
        assert isinstance(p, Prepared), f"seed {s} made an invalid test"
        preps.append(p)
    return preps


@pytest.fixture(scope="module")
def cases() -> list[bytes]:
    """Three valid generated tests: 3 outputs / 1 set, 1 output / 1 set, 1 output / 2 sets
    (an if and a loop), shipped as the generation stage ships them."""
    preps = _make([1, 2, 3])
    assert [len(p.tc.graph.outputs) for p in preps] == [3, 1, 1]
    assert [p.tc.n_sets for p in preps] == [1, 1, 2]
    return [pack_case(p) for p in preps]


def _unique_op(preps: list[Prepared], j: int) -> str:
    """An op only part j holds (top level, so it reaches the outputs)."""
    others = set().union(*(p.tc.graph.op_counts() for i, p in enumerate(preps) if i != j))
    mine = sorted({inst.op.name for inst in preps[j].tc.graph.insts} - others)
    assert mine, "the parts share every op"
    return mine[0]


def _rows(reports) -> list[dict]:
    assert all(len(r.rows) == 1 for r in reports), reports
    return [r.rows[0] for r in reports]


def _diff(a: dict, b: dict) -> dict:
    return {k: (a[k], b.get(k)) for k in a if k not in VOLATILE and a[k] != b.get(k)}


def _evaluate(cases, backend, merge_k=None, sandbox=False, calls=None):
    cfg = WorkerConfig(backends=[backend], sandbox=sandbox,
                       merge={backend: merge_k} if merge_k else {})
    ev = Evaluator(cfg, backend, "e")
    if calls is not None:  # the test ids each backend evaluation got
        inner = ev.worker.evaluate

        def spy(b, m, job=None, confirm=True, timeout_s=None):
            calls.append(m.tc.test_id)
            return inner(b, m, job, confirm, timeout_s)
        ev.worker.evaluate = spy
    try:
        return ev.evaluate(cases)
    finally:
        ev.close()


# ---- the merged test ----------------------------------------------------------------------------

def test_the_union_verifies_round_trips_and_splits_back_into_each_parts_reference(cases):
    preps = [unpack_case(c) for c in cases]
    m = merge(preps)
    g = m.tc.graph
    assert verify(g) is g and parse(print_graph(g)) == g
    names = [v.name for v in g.all_values()]
    assert len(names) == len(set(names))  # unique across every nesting level
    assert g.max_depth() >= 1  # part 2's if/loop bodies came along
    for j, (p, part) in enumerate(zip(preps, m.parts, strict=True)):
        assert part.prefix == f"p{j}_"
        own = rename_prefixed(p.tc.graph, part.prefix)
        # every piece of the part, in part order, at its place
        assert [v.name for v in own.inputs] == [v.name for v in g.inputs
                                                 if v.name.startswith(part.prefix)]
        assert [v.name for v in own.params] == [v.name for v in g.params
                                                 if v.name.startswith(part.prefix)]
        assert [g.outputs[i] for i in part.outputs] == list(own.outputs)
        assert tuple(i for i in g.insts if i.results[0].name.startswith(part.prefix)) == own.insts
    assert [(p.outputs, p.own_sets) for p in m.parts] == [
        (range(0, 3), (0,)), (range(3, 4), (0,)), (range(4, 5), (0, 1))]
    assert m.tc.n_sets == 2 and m.tc.seed == preps[0].tc.seed
    # set 1: part 2's own set 1; parts 0 and 1 repeat their set 0
    set1 = m.tc.feed_sets()[1]
    for j, p in enumerate(preps):
        src = p.tc.feed_sets()[1 if p.tc.n_sets > 1 else 0]
        for name, v in src.items():
            assert np.array_equal(set1[f"p{j}_{name}"], v)
    p2 = preps[2].tc
    assert any(not np.array_equal(set1[f"p2_{v.name}"], p2.values[v.name])
               for v in p2.graph.inputs)  # a set of its own, not a repeat
    # the merged graph's reference, split, is every part's own reference bit for bit
    ref = run_reference(Materialized(m.tc))
    assert ref.problem is None and len(ref.outputs) == 2 * 5
    split = m.split(BackendResult(outputs=ref.outputs, compile_ms=7.0, compiles=[1, 0]))
    for p, r in zip(preps, split, strict=True):
        assert len(r.outputs) == len(p.ref.outputs)
        assert all(a.dtype == b.dtype and np.array_equal(a, b)
                   for a, b in zip(r.outputs, p.ref.outputs, strict=True))
        assert r.compile_ms == 7.0
    assert [r.compiles for r in split] == [[1], [1], [1, 0]]
    # a module that produced no outputs splits into nothing
    assert m.split(BackendResult(stage=Stage.COMPILE, error_class="E")) is None
    assert m.split(BackendResult(outputs=ref.outputs[:-1])) is None


def test_plan_groups_balanced_by_key_and_leaves_singletons_alone(cases):
    p = unpack_case(cases[0])
    preps = [p] * 7
    assert plan(preps, 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert plan(preps, 1) == []
    assert plan([p, None, p], 4) == [[0, 2]]
    # different dialects never share a module; a lone one runs alone
    qs = [unpack_case(cases[0]) for _ in range(5)]
    dialect = {id(q): d for q, d in zip(qs, ["hop", "python", "hop", "hop", "hop"], strict=True)}
    assert plan(qs, 4, key=lambda q: dialect[id(q)]) == [[0, 2, 3, 4]]
    with pytest.raises(MergeError):
        merge([p])


def test_a_dynamic_shape_test_is_not_merged(cases):
    gen = GenConfig(p_dynshape=1.0, nodes=6)
    w = FuzzWorker(WorkerConfig(generator=gen, backends=["ort"], sandbox=False,
                                mutation=MutationConfig(rate=0.0, weights={})))
    dyn = None
    for seed in range(50):
        prep = w.prepare(w.make_test(f"d{seed}", seed))
        if isinstance(prep, Prepared) and prep.tc.dynshape is not None:
            dyn = prep
            break
    assert dyn is not None, "no valid dynamic-shape test in 50 seeds"
    assert unmergeable(dyn) == "dynamic shapes"
    a, b = (unpack_case(c) for c in cases[:2])
    assert plan([dyn, a, b], 3) == [[1, 2]]
    with pytest.raises(MergeError, match="dynamic shapes"):
        merge([a, dyn])
    calls: list[str] = []
    rows = _rows(_evaluate([pack_case(dyn), cases[0], cases[1]], "ort", 3, calls=calls))
    assert [r["merged"] for r in rows] == [None, 2, 2]
    assert [r["verdict"] for r in rows] == ["pass"] * 3
    assert rows[0]["dyn_dims"] and rows[1]["dyn_dims"] == []
    assert Counter(calls) == Counter(["t1+t2", dyn.tc.test_id])


# ---- evaluation ---------------------------------------------------------------------------------

def test_three_tests_merged_on_ort_give_the_alone_rows(cases):
    alone = _rows(_evaluate(cases, "ort", sandbox=True))
    calls: list[str] = []
    reports = _evaluate(cases, "ort", 3, sandbox=True, calls=calls)
    merged = _rows(reports)
    assert calls == ["t1+t2+t3"]  # one compile for the three
    assert [r["test_id"] for r in merged] == ["t1", "t2", "t3"]
    assert [r["verdict"] for r in merged] == [r["verdict"] for r in alone] == ["pass"] * 3
    assert [r["merged"] for r in merged] == [3, 3, 3]
    assert [r["merged"] for r in alone] == [None, None, None]
    assert all(not _diff(a, b) for a, b in zip(alone, merged, strict=True)), \
        [_diff(a, b) for a, b in zip(alone, merged, strict=True)]
    assert len({r["compile_ms"] for r in merged}) == 1 and merged[0]["compile_ms"] > 0
    assert [r["n_compiles"] for r in merged] == [1, 1, 1]
    assert all(not r.findings for r in reports)


@pytest.mark.parametrize("j", [1, 2])
def test_a_part_with_a_wrong_answer_is_rerun_alone_and_its_finding_holds_only_it(cases, j):
    preps = [unpack_case(c) for c in cases]
    tid = f"t{j + 1}"
    backend = f"buggy_backends:WrongOnOp?op={_unique_op(preps, j)}"
    calls: list[str] = []
    reports = _evaluate(cases, backend, 3, calls=calls)
    rows = _rows(reports)
    assert calls == ["t1+t2+t3", tid]  # only the failing part ran again
    assert [r["verdict"] for r in rows] == ["mismatch" if i == j else "pass" for i in range(3)]
    assert [r["merged"] for r in rows] == [None if i == j else 3 for i in range(3)]
    assert rows[j]["error_class"] == "Mismatch"
    assert rows[j]["mismatch_input_set"] in range(preps[j].tc.n_sets)
    # the row is the alone run's, exactly (the input set and output that differ included)
    alone = _rows(_evaluate(cases[j:j + 1], backend))[0]
    assert not _diff(alone, rows[j]), _diff(alone, rows[j])
    assert [len(r.findings) for r in reports] == [int(i == j) for i in range(3)]
    f = reports[j].findings[0]
    assert f.test_id == tid and f.verdict == "mismatch"
    assert parse(f.files["graph.gir"].decode()) == preps[j].tc.graph
    assert "%p0_" not in f.files["graph.gir"].decode()
    info = json.loads(f.files["info.json"])
    assert info["test_id"] == tid and info["input_sets"] == preps[j].tc.n_sets
    n_out = len(preps[j].tc.graph.outputs) * preps[j].tc.n_sets
    assert set(np.load(io.BytesIO(f.files["actual.npz"])).files) == {f"out{i}" for i in range(n_out)}


def test_a_crash_of_the_merged_module_reruns_every_part_alone(cases):
    preps = [unpack_case(c) for c in cases]
    op = _unique_op(preps, 0)
    calls: list[str] = []
    reports = _evaluate(cases, f"buggy_backends:SegfaultOnOp?op={op}", 3, sandbox=True,
                        calls=calls)
    rows = _rows(reports)
    assert calls == ["t1+t2+t3", "t1", "t2", "t3"]
    assert [r["verdict"] for r in rows] == ["signal", "pass", "pass"]
    assert rows[0]["error_class"] == "SIGSEGV" and rows[0]["stage"] == "compile"
    assert [r["merged"] for r in rows] == [None, None, None]
    for r in rows[1:]:  # what the merged module did is noted, not a finding
        assert r["error_msg"].startswith("merged with 2 other test(s): the merged module's "
                                         "verdict was signal (SIGSEGV during compile)")
    assert [len(r.findings) for r in reports] == [1, 0, 0]
    f = reports[0].findings[0]
    assert f.test_id == "t1" and parse(f.files["graph.gir"].decode()) == preps[0].tc.graph


def test_a_hang_of_the_merged_module_is_not_confirmed_merged_but_alone(cases):
    preps = [unpack_case(c) for c in cases]
    backend = f"buggy_backends:HangOnOp?op={_unique_op(preps, 1)}&seconds=600"
    cfg = WorkerConfig(backends=[backend], merge={backend: 3},
                       limits=SandboxConfig(timeout_s=1.0, confirm_timeout_factor=1.5))
    ev = Evaluator(cfg, backend, "e")
    t0 = time.monotonic()
    try:
        reports = ev.evaluate(cases)
        stats = ev.worker.sandboxes[backend].stats
    finally:
        ev.close()
    rows = _rows(reports)
    assert [r["verdict"] for r in rows] == ["pass", "timeout", "pass"]
    assert rows[1]["timeout_confirmed"] is True and rows[1]["merged"] is None
    assert (rows[1]["timeout_limit_s"], rows[1]["confirm_limit_s"]) == (1.0, 1.5)
    # the merged module's one attempt (3 s: the limit of 3 tests, not confirmed), then each
    # part alone: t2 hangs twice (1 s, then 1.5 s in a fresh process)
    assert (stats.timeouts, stats.confirmations, stats.tests) == (3, 1, 5)
    assert 3 + 1 + 1.5 <= time.monotonic() - t0 < 30
    assert [len(r.findings) for r in reports] == [0, 1, 0]
    assert all("verdict was timeout (Timeout during compile)" in rows[i]["error_msg"]
               for i in (0, 2))


class WrongWhenMerged(Backend):
    """The reference's outputs, all off by one when the graph is a merged one: a failure only
    the merged module shows."""

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        outs = self.stage(Stage.RUN, lambda: run_reference(m).outputs, result, "run_ms")
        if m.tc.graph.name == "merged":
            outs = [o + 1 if o.dtype.kind in "iuf" else ~o for o in outs]
        return outs


def test_a_mismatch_only_the_merged_module_shows_is_no_finding(cases):
    calls: list[str] = []
    reports = _evaluate(cases[:2], "test_merge:WrongWhenMerged", 2, calls=calls)
    rows = _rows(reports)
    assert calls == ["t1+t2", "t1", "t2"]
    assert [r["verdict"] for r in rows] == ["pass", "pass"]
    assert [r["merged"] for r in rows] == [None, None]
    assert all(not r.findings for r in reports)
    for r in rows:
        assert r["error_msg"].startswith("merged with 1 other test(s): mismatch (Mismatch: "
                                         "output 0); not reproduced by this test alone")


def test_two_tests_merged_on_inductor_give_the_alone_rows(cases):
    """The slow compiler merging is for: one torch module of the union, compiled once."""
    two = cases[:2]
    alone = _rows(_evaluate(two, "inductor", sandbox=True))
    calls: list[str] = []
    merged = _rows(_evaluate(two, "inductor", 2, sandbox=True, calls=calls))
    assert calls == ["t1+t2"]
    assert [r["verdict"] for r in alone] == ["pass", "pass"]
    assert [r["merged"] for r in merged] == [2, 2]
    assert all(not _diff(a, b) for a, b in zip(alone, merged, strict=True)), \
        [_diff(a, b) for a, b in zip(alone, merged, strict=True)]
    assert merged[0]["compile_ms"] == merged[1]["compile_ms"] > 0
