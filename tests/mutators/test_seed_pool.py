"""The seed pool: novelty, the power schedule, eviction, late feedback; deterministic."""
from __future__ import annotations

import random
from collections import Counter

from mutator_graphs import seeds

from ir import generate
from mutators.seed_pool import Outcome, SeedPool, features


def _pool() -> SeedPool:
    p = SeedPool(max_size=6)
    for sid, g in seeds()[:3]:
        p.add_seed(sid, g)
    return p


def test_features_name_ops_edges_and_nesting():
    g = dict(seeds())["corpus/lstm_tagger"]
    f = features(g)
    assert {"op:lstm:f32", "edge:tanh>lstm", "edge:in>linear", "depth:0"} <= f


def test_only_valid_novel_tests_are_kept_and_their_parents_credited():
    p = _pool()
    g = dict(seeds())["corpus/mlp"]  # not among the first three: novel
    assert p.novelty(g)
    kept = p.add(g, Outcome("t1", [{"seed_id": "corpus/attention", "parent": "corpus/attention"}],
                            True, ("reference:valid",), "corpus/attention"))
    assert kept is not None and kept.seed_id == "corpus/attention"
    assert p.entries["corpus/attention"].finds == 1
    assert p.add(g, Outcome("t2", [{}], True, ("reference:valid",))) is None  # nothing new
    assert p.add(generate(5), Outcome("t3", [{}], False, ("reference:invalid:X",))) is None


def test_late_feedback_promotes_a_recent_test_and_favours_it():
    p = _pool()
    g = dict(seeds())["corpus/cnn_block"]
    p.add(g, Outcome("t1", [{}], True, ("reference:valid",)))
    g2 = generate(3)
    p.add(g2, Outcome("t2", [{}], True, ("reference:valid",)))
    before = len(p)
    assert p.feedback("t9", ["ort:pass"])  # new signature, unknown test: seen, nothing kept
    assert not p.feedback("t1", ["ort:pass"])  # seen already
    if "t2" not in p.entries:
        assert p.feedback("t2", ["ort:crash:Fail: boom"]) and "t2" in p.entries
        assert len(p) == before + 1 and p.entries["t2"].new_signature
    rng = random.Random(0)
    picks = Counter(p.choose(rng).id for _ in range(300))
    assert picks.most_common(1)[0][0] in {e.id for e in p.entries.values() if e.new_signature or e.finds}


def test_the_schedule_prefers_rare_classes_and_productive_parents():
    p = SeedPool()
    a, b = seeds()[0][1], seeds()[1][1]
    p.add_seed("a", a)
    p.add_seed("b", b)
    for _ in range(9):  # many tests of a's class: a gets less energy
        p.freq[p.entries["a"].klass] += 1
    assert p.weight(p.entries["b"]) > p.weight(p.entries["a"])
    p.entries["a"].finds = 20
    assert p.weight(p.entries["a"]) > p.weight(p.entries["b"])
    w = p.weight(p.entries["b"])
    p.entries["b"].chosen = 8
    assert p.weight(p.entries["b"]) < w


def test_eviction_keeps_seeds_and_the_pool_is_deterministic():
    def run():
        p = _pool()
        rng = random.Random(1)
        for i in range(40):
            g = generate(i)
            p.add(g, Outcome(f"t{i}", [{}], True, (f"sig{i % 7}",), p.choose(rng).id))
        return p

    p1, p2 = run(), run()
    assert len(p1) <= 6 and all(s in p1.entries for s, _ in seeds()[:3])
    assert list(p1.entries) == list(p2.entries) and p1.summary() == p2.summary()


def test_coverage_feedback_keeps_a_recent_valid_test_credits_its_parent_and_its_mutators():
    p = _pool()
    g = seeds()[0][1]  # a seed's graph again: nothing new in its features
    steps = [{"seed_id": "corpus/attention", "parent": "corpus/attention"},
             {"mutator": "insert_op", "test": "t0"},  # inherited: not this test's
             {"mutator": "wrap_loop", "test": "t1"}]
    assert p.add(g, Outcome("t0", [{}], True, ("reference:valid",)))  # a new signature: kept
    assert p.add(g, Outcome("t1", steps, True, ("reference:valid",), "corpus/attention")) is None
    assert p.add(g, Outcome("t2", [{}], True, ("reference:valid",))) is None
    assert p.add(g, Outcome("t3", [{}], False, ("reference:invalid:X",))) is None
    assert not p.coverage_feedback("t2", 0) and "t2" not in p.entries  # no new line: not novel
    assert not p.coverage_feedback("t3", 5) and "t3" not in p.entries  # invalid: never kept
    assert p.coverage_feedback("t1", 12)
    e = p.entries["t1"]
    assert e.new_coverage and not e.new_signature
    assert p.entries["corpus/attention"].finds == 1 and p.mutator_finds == {"wrap_loop": 1}
    plain = p.weight(e)
    e.new_signature = True  # the two signals multiply: 2 x 4
    assert p.weight(e) == 4 * plain
    e.new_signature, e.new_coverage = False, False
    assert p.weight(e) * 2 == plain
    # an entry already kept (by its graph) only gains the energy of new code
    n = len(p)
    assert p.coverage_feedback("t0", 3) and p.entries["t0"].new_coverage and len(p) == n
