"""insert_op and the engine: every accepted mutant verifies and keeps the graph's interface."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ir import GenConfig, generate, parse, print_graph, verify
from mutators import MUTATORS, MutationConfig, MutationEngine
from mutators.insert_op import InsertOp


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rseed=st.integers(0, 2**31 - 1))
def test_insert_op_mutants_verify_and_grow_by_one(seed: int, rseed: int):
    g = generate(seed)
    mutant = InsertOp().propose(g, random.Random(rseed), GenConfig())
    if mutant is None:
        return
    verify(mutant.graph)
    assert mutant.graph.num_insts() == g.num_insts() + 1
    assert mutant.graph.output_types() == g.output_types()
    assert parse(print_graph(mutant.graph)) == mutant.graph
    assert mutant.params["op"] in mutant.graph.op_counts()


def test_engine_chains_record_lineage_and_always_verify():
    engine = MutationEngine(MutationConfig(max_steps=5, weights={"insert_op": 1.0}), GenConfig())
    applied = 0
    for seed in range(40):
        out = engine.mutate(generate(seed), random.Random(seed))
        verify(out.graph)
        assert all(s["mutator"] == "insert_op" for s in out.steps)
        applied += len(out.steps)
    assert applied >= 40  # most chains apply at least one step
    stats = engine.stats["insert_op"]
    assert stats["proposed"] == stats["applied"] + stats["declined"] + stats["invalid"] + stats["too_big"]
    assert stats["error"] == 0


def test_unknown_mutator_in_config_is_a_clear_error():
    known = ", ".join(sorted(MUTATORS))
    with pytest.raises(ValueError, match=rf"^mutation.weights: unknown mutator 'wrap_nope' \(known: {known}\)$"):
        MutationEngine(MutationConfig(weights={"wrap_nope": 1.0}), GenConfig())


def test_the_engine_discards_and_counts_mutants_past_the_size_limit():
    engine = MutationEngine(MutationConfig(max_insts=3, weights={"insert_op": 1.0}), GenConfig())
    g = generate(1)
    assert g.num_insts() >= 3
    out = engine.mutate(g, random.Random(1), steps=2)
    assert out.steps == [] and out.graph is g and out.discarded == 2 * engine.cfg.retries
    assert engine.stats["insert_op"]["too_big"] + engine.stats["insert_op"]["declined"] == out.discarded
