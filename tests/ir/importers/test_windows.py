"""Windows of a model (ir/importers/windows.py): `subgraph` of some instructions, and
`cut_windows`' invariants (every window verifies, its size is in range, its inputs are exactly
the values entering it, it keeps its model's name and place)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ir import Graph, parse, verify
from ir.gen.builder import GenConfig
from ir.gen.generate import generate
from ir.importers.windows import cut_windows, is_valid_material, read_lineage, subgraph

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


def test_subgraph_returns_an_input_it_writes_in_place():
    g = verify(parse("""graph main(%x: f32[2,3]) {
  %a = tanh(%x) : f32[2,3]
  %b = relu_(%a) : f32[2,3]
  %c = sin(%a) : f32[2,3]
  return %c
}"""))
    w = verify(subgraph(g, [1, 2]))  # %a enters and relu_ writes it: returned
    assert [v.name for v in w.inputs] == ["a"] and w.outputs == ("c", "a")
    assert verify(subgraph(g, [0, 1])).outputs == ("a",)  # written inside: as before


def test_subgraph_rejects_empty_and_out_of_range():
    with pytest.raises(ValueError):
        subgraph(MLP, [])
    with pytest.raises(IndexError):
        subgraph(MLP, [7])


def _model(seed: int) -> Graph:
    """A "model" to cut: a generated graph of 30 nodes, with control flow."""
    return generate(seed, GenConfig(nodes=30, p_if=0.15, p_loop=0.1, p_scan=0.1))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 200), k_min=st.integers(1, 8), extra=st.integers(0, 12),
       wseed=st.integers(0, 3))
def test_window_invariants(seed, k_min, extra, wseed):
    model = _model(seed)
    k_max = k_min + extra
    windows = cut_windows(model, "gen", count=4, k_min=k_min, k_max=k_max, seed=wseed,
                          check_valid=False)
    types = model.types()
    params = {p.name for p in model.params}
    for w in windows:
        g = verify(w.graph)
        assert k_min <= g.num_insts() <= k_max
        assert list(w.insts) == sorted(set(w.insts))
        assert g.insts == tuple(model.insts[i] for i in w.insts)  # bodies whole, in order
        # the inputs and params are exactly the values entering, with their types
        defined: set[str] = set()
        entering: list[str] = []
        for inst in g.insts:
            for a in inst.args:
                if a not in defined and a not in entering:
                    entering.append(a)
            defined.update(inst.result_names)
        assert [v.name for v in g.inputs] == [a for a in entering if a not in params]
        assert [v.name for v in g.params] == [a for a in entering if a in params]
        assert all(v.type == types[v.name] for v in (*g.inputs, *g.params))
        assert g.inputs and set(g.outputs) <= defined
        # connected through computed values
        reach, todo = {w.insts[0]}, [w.insts[0]]
        producer = {r: i for i in w.insts for r in model.insts[i].result_names}
        while todo:
            i = todo.pop()
            for j in w.insts:
                if j not in reach and (any(producer.get(a) == i for a in model.insts[j].args)
                                       or any(producer.get(a) == j for a in model.insts[i].args)):
                    reach.add(j)
                    todo.append(j)
        assert reach == set(w.insts)
        # lineage: the model's name and the place, through the text form
        assert w.lineage == f"gen insts {w.first}-{w.last}"
        assert read_lineage(w.text()) == ("gen", w.first, w.last)
        assert parse(w.text()) == g


def test_windows_are_deterministic_overlap_little_and_valid():
    model = _model(7)
    a = cut_windows(model, "gen", count=3, k_min=4, k_max=10, seed=1)
    b = cut_windows(model, "gen", count=3, k_min=4, k_max=10, seed=1)
    assert [w.insts for w in a] == [w.insts for w in b] and a
    for i, w in enumerate(a):
        assert is_valid_material(w.graph)
        for v in a[:i]:
            assert len(set(w.insts) & set(v.insts)) <= 0.5 * len(w.insts)


def test_window_weights_take_the_models_values_by_name_and_shape():
    w = cut_windows(MLP, "mlp", count=1, k_min=3, k_max=3, seed=0)[0]
    real = {p.name: np.full(p.type.shape, 0.5, dtype=np.float32) for p in MLP.params}
    got = w.weights(real)
    assert set(got) == {p.name for p in w.graph.params}
    first = w.graph.params[0]
    real[first.name] = np.zeros((1,), dtype=np.float32)  # another shape: drawn afresh
    assert first.name not in w.weights(real)


def test_read_lineage_only_from_leading_comments():
    assert read_lineage("# a comment\n# model: resnet18 insts 40-62\ngraph main() {") == (
        "resnet18", 40, 62)
    assert read_lineage("graph main() {\n# model: x insts 1-2\n") is None
    assert read_lineage((REPO / "seeds" / "mlp.gir").read_text()) is None


def test_windows_are_valid_from_the_models_weights_too():
    real = {p.name: np.full(p.type.shape, 0.25, dtype=np.float32) for p in MLP.params}
    windows = cut_windows(MLP, "mlp", count=3, k_min=2, k_max=4, seed=0, params=real)
    assert windows
    for w in windows:
        assert is_valid_material(w.graph, 0, w.weights(real))
