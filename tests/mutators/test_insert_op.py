"""insert_op and the engine: every accepted mutant verifies and keeps the graph's interface."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ir import GenConfig, generate, parse, print_graph, verify
from mutators import MutationConfig, MutationEngine
from mutators.insert_op import InsertOp


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rseed=st.integers(0, 2**31 - 1))
def test_insert_op_mutants_verify_and_grow_by_one(seed: int, rseed: int):
    g = generate(seed)
    mutant = InsertOp().propose(g, random.Random(rseed), GenConfig())
    if mutant is None:
        return
    verify(mutant.graph)
    assert len(mutant.graph.insts) == len(g.insts) + 1
    assert mutant.graph.output_types() == g.output_types()
    assert parse(print_graph(mutant.graph)) == mutant.graph
    assert mutant.params["op"] in {i.op.name for i in mutant.graph.insts}


def test_engine_chains_record_lineage_and_always_verify():
    engine = MutationEngine(MutationConfig(max_steps=5), GenConfig())
    applied = 0
    for seed in range(60):
        out = engine.mutate(generate(seed), random.Random(seed))
        verify(out.graph)
        assert all(s["mutator"] == "insert_op" for s in out.steps)
        applied += len(out.steps)
    assert applied >= 60  # most chains apply at least one step


def test_unknown_mutator_in_config_is_a_clear_error():
    with pytest.raises(ValueError, match=r"^mutation.weights: unknown mutator 'wrap_nope' \(known: insert_op\)$"):
        MutationEngine(MutationConfig(weights={"wrap_nope": 1.0}), GenConfig())
