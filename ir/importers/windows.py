"""Windows: connected sub-graphs of a model's GraphIR, cut to be seeds (issue 32).

An imported model (`ir.importers.torch_export`, `ir.importers.onnx_model`) is hundreds of
instructions; a seed is tens. `subgraph(graph, insts)` makes a graph of some of its top-level
instructions: the values entering them become inputs (with their types), the params they read
stay params, and the values they make that the rest of the model reads (or returns) become
outputs. `cut_windows` picks connected runs of k in [k_min, k_max] top-level instructions,
deterministic by seed, overlapping little, each verified and, when asked, checked to have
valid inputs (`ir.numerics.input_search.make_valid`, as a seed is checked: no repair). A
control-flow instruction is one instruction here: its bodies are never cut. Each window knows
its model and its place in it (`Window.lineage`: `resnet18 insts 40-62`), which the `.gir`
file carries as a leading comment (`window_text`, `read_lineage`).
"""
from __future__ import annotations

from collections.abc import Iterable

from ir.core.graph import Graph, Value


def subgraph(graph: Graph, insts: Iterable[int], name: str | None = None) -> Graph:
    """The graph of `graph`'s top-level instructions at indices `insts` (taken in the graph's
    order, duplicates ignored). Values they read that none of them defines become inputs, in
    order of first use, with their types; those that are params of `graph` stay params.
    Outputs: the results the rest of `graph` reads or returns, in definition order; when none
    is, the results of the last instruction. Bodies come whole. The result is not verified
    (`ir.core.verify.verify` says whether it is well formed: an in-place write to what is
    now an input may not be)."""
    idx = sorted(set(insts))
    if not idx:
        raise ValueError("subgraph: no instructions")
    if idx[0] < 0 or idx[-1] >= len(graph.insts):
        raise IndexError(f"subgraph: instruction {idx[0] if idx[0] < 0 else idx[-1]} is not in "
                         f"graph {graph.name} ({len(graph.insts)} instructions)")
    types = graph.types()
    param_names = {p.name for p in graph.params}
    chosen = [graph.insts[i] for i in idx]
    defined: set[str] = set()
    inputs: list[Value] = []
    params: list[Value] = []
    entering: set[str] = set()
    for inst in chosen:
        for a in inst.args:
            if a in defined or a in entering:
                continue
            entering.add(a)
            (params if a in param_names else inputs).append(Value(a, types[a]))
        defined.update(inst.result_names)
    inside = set(idx)
    read_outside: set[str] = set(graph.outputs)
    for i, inst in enumerate(graph.insts):
        if i not in inside:
            read_outside.update(inst.args)
    outputs = [r for inst in chosen for r in inst.result_names if r in read_outside]
    if not outputs:
        outputs = list(chosen[-1].result_names)
    return Graph(name or graph.name, tuple(inputs), tuple(chosen), tuple(outputs), tuple(params))
