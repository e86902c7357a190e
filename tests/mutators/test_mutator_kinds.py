"""Each mutator on the shipped seeds and on generated graphs with nested control flow: every
candidate it proposes verifies and round-trips through the text form, it applies often enough,
and it does what its name says."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from mutator_graphs import donor, graphs

from ir import GenConfig, parse, print_graph, verify
from mutators import MUTATORS

#: mutator -> least share of proposals that apply (not declined) on the test graphs
MIN_APPLIED = {"insert_op": 0.5, "replace_op": 0.4, "mutate_attrs": 0.2, "mutate_shape": 0.15,
               "duplicate_region": 0.8, "splice": 0.2, "wrap_branch": 0.7, "wrap_loop": 0.5,
               "insert_rnn": 0.4}
N = 60


def _mutants(name: str, n: int = N):
    m = MUTATORS[name]()
    m.donors = donor
    gs = graphs()
    out = []
    for i in range(n):
        g = gs[i % len(gs)]
        mu = m.propose(g, random.Random(1000 + i), GenConfig())
        out.append((g, mu))
    return out


def test_every_mutator_is_registered():
    assert set(MIN_APPLIED) <= set(MUTATORS)


@pytest.mark.parametrize("name", sorted(MIN_APPLIED))
def test_candidates_verify_round_trip_and_apply(name):
    made = _mutants(name)
    applied = [(g, mu) for g, mu in made if mu is not None]
    for g, mu in applied:
        verify(mu.graph)
        assert parse(print_graph(mu.graph)) == mu.graph
        assert mu.graph != g
        assert all(isinstance(k, str) for k in mu.params)
    assert len(applied) >= MIN_APPLIED[name] * len(made), f"{name}: {len(applied)}/{len(made)}"


def _ops(g) -> Counter:
    return g.op_counts()


def test_wrap_branch_adds_an_if_with_a_data_predicate_and_a_threshold_input():
    for g, mu in _mutants("wrap_branch"):
        if mu is None:
            continue
        assert _ops(mu.graph)["if"] > _ops(g)["if"]  # (a wrapped if is copied into the else)
        if "scope" in mu.params:  # nested: the threshold is threaded in from a new graph input
            assert len(mu.graph.inputs) > len(g.inputs)
            continue
        new_if = next(i for i in mu.graph.insts if i.op.name == "if" and i not in g.insts)
        pred = next(i for i in mu.graph.insts if new_if.args[0] in i.result_names)
        assert pred.op.comparison_sign is not None
        threshold = pred.args[1]
        assert threshold in {v.name for v in mu.graph.inputs}
        assert mu.graph.types()[threshold].rank == 0
        then_g, else_g = new_if.blocks
        assert then_g.output_types() == else_g.output_types()
        assert mu.params["else"] in ("chains", "perturbed")


def test_wrap_loop_makes_loops_and_scans_around_regions_of_matching_type():
    kinds = Counter()
    for g, mu in _mutants("wrap_loop", 120):
        if mu is None:
            continue
        kind = mu.params["kind"]
        kinds[kind] += 1
        assert _ops(mu.graph)[kind] > _ops(g)[kind]
    assert kinds["loop"] and kinds["scan"]


def test_wrap_loop_iterates_a_recurrent_layer_whose_output_type_is_its_input_type():
    from ir import parse as p

    g = p("""
graph main(%x: f32[5,2,4], %w: param f32[1,4,4], %r: param f32[1,4,4], %b: param f32[1,8]) {
  %y, %h = rnn[hidden=4, direction=forward, nonlinearity=tanh](%x, %w, %r, %b) : f32[5,2,4], f32[1,2,4]
  %o = relu(%y) : f32[5,2,4]
  return %o
}""")
    m = MUTATORS["wrap_loop"]()
    found = set()
    for i in range(40):
        mu = m.propose(g, random.Random(i), GenConfig())
        if mu is not None and mu.params["ops"] == ["rnn"]:
            verify(mu.graph)
            body_ops = {x.op.name for x, d in mu.graph.walk() if d == 1}
            assert "rnn" in body_ops
            found.add(mu.params["kind"])
    assert "loop" in found


def test_insert_rnn_puts_a_recurrent_layer_in_the_data_path():
    for g, mu in _mutants("insert_rnn"):
        if mu is None:
            continue
        assert sum(_ops(mu.graph)[k] for k in ("lstm", "gru", "rnn")) == \
            sum(_ops(g)[k] for k in ("lstm", "gru", "rnn")) + 1
        assert mu.graph.output_types() == g.output_types()


def test_mutate_shape_changes_an_input_and_re_solves_the_ops_after_it():
    changed = 0
    for g, mu in _mutants("mutate_shape"):
        if mu is None:
            continue
        x = mu.params["input"]
        old = {v.name: v.type for v in g.inputs}[x]
        new = {v.name: v.type for v in mu.graph.inputs}[x]
        assert new.shape[mu.params["axis"]] == mu.params["dim"] != old.shape[mu.params["axis"]]
        changed += 1
    assert changed


def test_mutate_attrs_changes_attributes_or_weights_but_keeps_types():
    for g, mu in _mutants("mutate_attrs"):
        if mu is None:
            continue
        if "scope" not in mu.params:
            assert mu.graph.output_types() == g.output_types()


def test_replace_op_swaps_the_op_and_keeps_the_result_type():
    for g, mu in _mutants("replace_op"):
        if mu is None:
            continue
        assert mu.params["op"] != mu.params["old"]
        assert mu.graph.output_types() == g.output_types()


def test_duplicate_region_computes_something_twice():
    for g, mu in _mutants("duplicate_region"):
        if mu is None:
            continue
        assert mu.graph.num_insts() > g.num_insts()


def test_splice_grafts_ops_of_another_seed():
    n = 0
    for _g, mu in _mutants("splice", 120):
        if mu is None:
            continue
        assert mu.params["donor"].startswith("corpus/") and mu.params["ops"]
        assert "replaces" in mu.params or "returned" in mu.params
        n += 1
    assert n >= 10
