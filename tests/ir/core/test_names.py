"""The fresh-name service (`ir.core.names.Names`): it knows every name of a graph, nested bodies
included, and the names it hands out are new, in the numbering the generator has always used
(graph hashes of fixed-seed runs depend on it)."""
from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ir import GenConfig, generate, parse, verify
from ir.core.names import Names
from ir.core.rewrite import rename_canonically
from ir.core.text import print_graph
from ir.gen.builder import SymbolicGraphBuilder

NESTED = """graph main(%x0: f32[2], %x1: i64[]) {
  %v2 = loop(%x1, %x0) : f32[2] {
    graph body(%i3: i64[], %b4: f32[2]) {
      %b5 = tanh(%b4) : f32[2]
      return %b5
    }
  }
  return %v2
}
"""


def test_names_of_a_graph_are_every_level_s():
    names = Names.of(verify(parse(NESTED)))
    assert names.taken == {"x0", "x1", "v2", "i3", "b4", "b5"}
    assert "b5" in names and "v6" not in names


def test_fresh_numbers_every_prefix_with_one_counter_and_skips_taken_names():
    names = Names({"v1", "x3"})
    assert [names.fresh(p) for p in ("x", "v", "b", "x", "v")] == ["x0", "v2", "b3", "x4", "v5"]
    assert {"x0", "v2", "b3", "x4", "v5", "v1", "x3"} == names.taken


def test_suffixed_names_take_the_smallest_free_suffix():
    names = Names({"v2", "v2_1"})
    assert names.suffixed("v2") == "v2_2"
    assert names.suffixed("v2") == "v2_3"
    assert names.suffixed("x0") == "x0_1"
    names.take("b_1")
    assert names.suffixed("b") == "b_2"


def _old_fresh(taken: set[str], counter, prefix: str) -> str:
    """The generator's numbering before the service (`SymbolicGraphBuilder.fresh_name`)."""
    while True:
        name = f"{prefix}{next(counter)}"
        if name not in taken:
            taken.add(name)
            return name


@settings(max_examples=200, deadline=None)
@given(taken=st.sets(st.sampled_from([f"{p}{i}" for p in "xvbwi" for i in range(12)])),
       prefixes=st.lists(st.sampled_from("xvbwim"), max_size=30))
def test_fresh_gives_the_generators_names_all_new_and_distinct(taken, prefixes):
    names = Names(taken)
    got = [names.fresh(p) for p in prefixes]
    old_taken, counter = set(taken), itertools.count()
    assert got == [_old_fresh(old_taken, counter, p) for p in prefixes]
    assert len(set(got)) == len(got) and not set(got) & taken


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_a_builder_over_a_graph_never_reuses_its_names(seed):
    g = generate(seed, GenConfig(p_if=0.3, p_loop=0.2, max_depth=2, nodes=8))
    b = SymbolicGraphBuilder(None, GenConfig(), Names.of(g))
    new = [b.fresh_name(p) for p in "xvbvx"]
    assert not set(new) & {v.name for v in g.all_values()}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_canonical_names_are_one_counter_in_definition_order(seed):
    g = rename_canonically(generate(seed, GenConfig(p_if=0.3, p_loop=0.2, nodes=8)))
    numbers = [int(v.name[1:]) for v in g.all_values()]
    assert sorted(numbers) == list(range(len(numbers)))
    assert rename_canonically(g) == g and print_graph(rename_canonically(g)) == print_graph(g)
