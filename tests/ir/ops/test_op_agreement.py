"""Every op, alone: generated single-op graphs verify, round-trip through the text form, and
torch eager agrees with ONNX Runtime (optimizations off) on inputs searched into the op's domain."""
from __future__ import annotations

import pytest
from opcheck import LIBRARY_OPS, check_against, op_graphs

from campaign.backends import make_backend
from ir import parse, print_graph, verify
from ir.core.op import OP_REGISTRY

GRAPHS_PER_OP = 4


@pytest.fixture(scope="module")
def ort_noopt():
    import torch

    torch.set_num_threads(1)
    return make_backend("ort_noopt")


@pytest.mark.parametrize("name", LIBRARY_OPS)
def test_op_verifies_round_trips_and_agrees_with_ort(name: str, ort_noopt):
    graphs = op_graphs(name, GRAPHS_PER_OP, nodes=1)
    assert graphs, f"the generator never placed {name}"
    valid = 0
    for seed, g in enumerate(graphs):
        verify(g)
        assert list(g.op_counts()) == [name]
        text = print_graph(g)
        assert parse(text) == g and print_graph(parse(text)) == text
        outcome = check_against(g, seed, ort_noopt)
        valid += outcome.valid
        assert outcome.agrees, f"{outcome.message}\n{text}"
    assert valid, f"no valid inputs found for any {name} graph"


def test_every_signature_is_exercised():
    """op_graphs cycles through signatures, so each declared dtype combination gets generated."""
    for name in ("where", "eq", "topk", "pad_constant", "clip"):
        op_cls = OP_REGISTRY[name]
        sigs = {s for n in op_cls.arities() for s in op_cls.signatures(n)}
        seen = set()
        for g in op_graphs(name, 8 * len(sigs), nodes=1):
            inst = g.insts[0]
            types = g.types()
            seen.add((tuple(types[a].dtype for a in inst.args), tuple(r.type.dtype for r in inst.results)))
        assert seen == sigs, sorted(map(str, sigs - seen))
