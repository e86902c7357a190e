"""Windows of a model (ir/importers/windows.py): `subgraph` of some instructions, and
`cut_windows`' invariants (every window verifies, its size is in range, its inputs are exactly
the values entering it, it keeps its model's name and place)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ir import parse, verify
from ir.importers.windows import subgraph

REPO = Path(__file__).resolve().parents[3]
MLP = parse((REPO / "seeds" / "mlp.gir").read_text())


def test_subgraph_inputs_params_outputs():
    # insts 2..4: linear(%a1, %w2, %b2), relu, layer_norm(%a2, %ln_s, %ln_b)
    w = verify(subgraph(MLP, [2, 3, 4]))
    assert [v.name for v in w.inputs] == ["a1"]
    assert w.inputs[0].type == MLP.types()["a1"]
    assert [p.name for p in w.params] == ["w2", "b2", "ln_s", "ln_b"]
    assert w.outputs == ("n2",)  # the rest of the model reads n2 only
    assert [i.op.name for i in w.insts] == ["linear", "relu", "layer_norm"]


def test_subgraph_outputs_what_the_rest_reads_or_the_last_results():
    w = verify(subgraph(MLP, [5, 6]))  # the model's own output
    assert w.outputs == ("out",)
    assert [v.name for v in w.inputs] == ["n2"]
    w = verify(subgraph(MLP, [0, 1]))
    assert w.outputs == ("a1",)


def test_subgraph_rejects_empty_and_out_of_range():
    with pytest.raises(ValueError):
        subgraph(MLP, [])
    with pytest.raises(IndexError):
        subgraph(MLP, [7])
