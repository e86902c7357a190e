"""torch -> GraphIR round trips: `import_torch(GraphModule(g), inputs)` is `g` up to names
(on the normal form of importer_roundtrip.py), for generated graphs with control flow, the
module in the `hop` dialect (torch.cond, torch.while_loop, scan) that torch.export takes.

Exclusions (see docs/architecture.md, "Importers"):
  - lstm, gru, rnn are not generated: their torch form builds torch's per-gate weights from
    the ONNX-layout params with index ops (`aten.index`, which GraphIR lacks), and the import
    rule (`aten.lstm` of nn.LSTM) wants constant weights;
  - a graph torch.export itself refuses (its higher-order ops' metadata checks, e.g. a loop
    carry whose shape turns symbolic) is skipped and counted: no ATen graph to import.
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch
from importer_roundtrip import CONTROL, same_up_to_names

from ir.core.text import print_graph
from ir.gen.generate import generate
from ir.importers.torch_export import import_torch
from ir.materialize.to_torch import GraphModule
from ir.numerics.values import random_values

#: ops whose torch form no rule reads back (the module docstring)
NOT_ROUND_TRIPPED = ["lstm", "gru", "rnn"]
CFG = dataclasses.replace(CONTROL, ops_exclude=NOT_ROUND_TRIPPED)


def round_trip(seed: int) -> str:
    """'ok', 'export' (torch.export refused the module), or raises with both graphs."""
    g = generate(seed, CFG)
    values = random_values(g, seed)
    params = {p.name: values[p.name] for p in g.params}
    module = GraphModule(g, params, dialect="hop").eval()
    args = tuple(torch.from_numpy(np.array(values[v.name], copy=True)) for v in g.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            program = torch.export.export(module, args)
        except Exception:  # noqa: BLE001  (torch.export's own refusal: nothing to import)
            return "export"
    from ir.importers.torch_export import import_exported

    result = import_exported(program, f"seed{seed}")
    assert result.graph is not None and not result.unmapped
    assert same_up_to_names(g, result.graph, torch=True), (
        f"seed {seed}\n{print_graph(g)}\n{print_graph(result.graph)}")
    for p in result.graph.params:  # the weights come back with their values
        assert p.type.shape == result.params[p.name].shape
    return "ok"


#: graphs in the default suite: a torch.export of a graph with control flow takes 5-30 s on
#: the CI's 2 cores (30 took ~15 minutes there); the 500-graph run below is the figure
DEFAULT_GRAPHS = 8


@pytest.mark.parametrize("seed", range(DEFAULT_GRAPHS))
def test_torch_round_trip_of_generated_graphs_with_control_flow(seed: int):
    if round_trip(seed) == "export":
        pytest.skip("torch.export refuses this module (no ATen graph to import)")


@pytest.mark.slow
def test_torch_round_trip_500_graphs():
    counts: dict[str, int] = {}
    for seed in range(1000, 1500):
        kind = round_trip(seed)
        counts[kind] = counts.get(kind, 0) + 1
    print("torch round trip:", counts)
    assert counts.get("ok", 0) >= 450, counts


def test_weights_come_back_with_their_values():
    from ir.core.text import parse

    g = parse("""graph main(%x0: f32[2,3], %w1: param f32[4,3], %w2: param f32[4]) {
      %v3 = linear(%x0, %w1, %w2) : f32[2,4]
      return %v3
    }""")
    w1 = np.arange(12, dtype=np.float32).reshape(4, 3)
    w2 = np.ones(4, dtype=np.float32)
    module = GraphModule(g, {"w1": w1, "w2": w2}).eval()
    result = import_torch(module, (torch.zeros(2, 3),), "lin")
    assert result.graph is not None and same_up_to_names(g, result.graph)
    w, b = result.graph.params
    np.testing.assert_array_equal(result.params[w.name], w1)
    np.testing.assert_array_equal(result.params[b.name], w2)
    assert result.mapped == 1 and result.mapped_share == 1.0
