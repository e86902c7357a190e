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


@pytest.mark.parametrize("kernel,padding,ok", [(7, 3, True), (7, 6, True), (7, 7, False),
                                               (3, 2, True), (3, 3, False), (1, 2, True)])
def test_a_given_convolution_padding_reaches_the_kernels_extent(kernel, padding, ok):
    """A model's 7x7 stem pads by 3 (imported); the generator's own paddings stay at most 2."""
    text = f"""graph main(%x: f32[1,3,16,16], %w: param f32[4,3,{kernel},{kernel}]) {{
  %y = conv2d[stride=[1,1], padding=[{padding},{padding}], dilation=[1,1], groups=1](%x, %w) : f32[1,4,{16 + 2 * padding - kernel + 1},{16 + 2 * padding - kernel + 1}]
  return %y
}}"""
    if ok:
        verify(parse(text))
    else:
        with pytest.raises(ValueError, match=r"^graph main, inst 0 \(conv2d\): constraint "
                                             r"violated"):
            verify(parse(text))
