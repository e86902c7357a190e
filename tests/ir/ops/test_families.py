"""Per family: generated graphs mixing the family's ops with a few simple ones verify and
round-trip through the text form (Hypothesis over seeds and sizes)."""
from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opcheck import ALL_DTYPES, LIBRARY_OPS

from ir import GenConfig, generate, parse, print_graph, verify
from ir.core.op import OP_REGISTRY

FAMILIES: dict[str, list[str]] = defaultdict(list)
for _name in LIBRARY_OPS:
    FAMILIES[OP_REGISTRY[_name].family].append(_name)

#: simple ops that connect a family's ops (dtype changes, broadcasting, rank changes)
GLUE = ["add", "relu", "cast", "reshape", "lt", "where"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_graphs_verify_and_round_trip(family: str):
    ops = sorted(set(FAMILIES[family] + GLUE))

    @settings(max_examples=12, deadline=None, derandomize=True)
    @given(seed=st.integers(0, 2**31 - 1), nodes=st.integers(1, 12))
    def check(seed: int, nodes: int):
        g = generate(seed, GenConfig(nodes=nodes, ops_include=ops, dtypes=ALL_DTYPES, max_elems=1024))
        verify(g)
        text = print_graph(g)
        assert parse(text) == g
        assert print_graph(parse(text)) == text

    check()


def test_every_op_is_placed_by_its_family_config():
    """Within a few dozen seeds each op of each family shows up (no op is unplaceable)."""
    for family, names in sorted(FAMILIES.items()):
        cfg = GenConfig(nodes=8, ops_include=sorted(set(names + GLUE)), dtypes=ALL_DTYPES, max_elems=1024)
        seen: set[str] = set()
        for seed in range(60):
            seen.update(generate(seed, cfg).op_counts())
            if set(names) <= seen:
                break
        assert set(names) <= seen, (family, sorted(set(names) - seen))
