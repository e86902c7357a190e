"""GraphIR -> torch: an `nn.Module` whose forward interprets the graph (the eager reference).

Params become buffers; `forward` takes the graph inputs positionally and returns a tuple of the
graph outputs. The interpreter (`ir.core.interpreter`) is plain Python over the instruction list,
which Dynamo traces straight through, so the same module serves eager and `torch.compile`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from ir.analysis.inplace import has_effects, torch_plan
from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import Interpreter

#: what becomes of each result of an instruction (`evaluate_torch`'s `result` hook)
ResultHook = Callable[[Inst, torch.Tensor], torch.Tensor]


class TorchInterpreter(Interpreter):
    """A pure graph on torch: every op's torch form in a dialect, and `result` (when given)
    applied to every tensor result, bodies included (a pure graph's bodies are pure)."""

    def __init__(self, dialect: str = "python", result: ResultHook | None = None):
        super().__init__(dialect)
        self.result = result

    def on_result(self, g: Graph, index: int, inst: Inst, r: Value, t: Any,
                  values: dict[str, torch.Tensor]) -> None:
        if self.result is not None and isinstance(t, torch.Tensor):
            values[r.name] = self.result(inst, t)


def evaluate_torch(g: Graph, env: Mapping[str, torch.Tensor], dialect: str = "python",
                   result: ResultHook | None = None) -> dict[str, torch.Tensor]:
    """Evaluate `g` given tensors for its inputs and params; returns every value of this level
    by name (the reference checks intermediates too, not only outputs). `dialect` selects how
    control flow is expressed (see `Op.torch_call`). A graph with views or in-place writes
    runs as torch would (`ir.analysis.inplace.TorchPlan`), on copies of the inputs it writes.
    `result` (pure graphs only) replaces every instruction's tensor results, bodies included
    (e.g. `campaign.reference.evaluate_perturbed`)."""
    if has_effects(g):
        if result is not None:
            raise ValueError("evaluate_torch: a result hook needs a pure graph (ir.analysis.inplace.pure_form)")
        return torch_plan(g).run(env, dialect)
    return TorchInterpreter(dialect, result).run(g, env)


def run_graph_torch(g: Graph, env: Mapping[str, torch.Tensor], dialect: str = "python"
                    ) -> list[torch.Tensor]:
    """Evaluate `g`; returns its outputs in order."""
    values = evaluate_torch(g, env, dialect)
    return [values[o] for o in g.outputs]


class GraphModule(torch.nn.Module):
    """forward(*inputs) -> tuple of outputs, for a concrete graph and its param values."""

    def __init__(self, g: Graph, params: Mapping[str, np.ndarray], dialect: str = "python"):
        super().__init__()
        self.graph = g
        self.dialect = dialect
        #: views and in-place writes (docs/inplace.md): forward writes its input tensors
        self.plan = torch_plan(g) if has_effects(g) else None
        for p in g.params:
            self.register_buffer(f"p_{p.name}", torch.from_numpy(np.asarray(params[p.name], order="C")))

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env = {v.name: x for v, x in zip(self.graph.inputs, inputs, strict=True)}
        env.update({p.name: getattr(self, f"p_{p.name}") for p in self.graph.params})
        if self.plan is not None:
            values = self.plan.run(env, self.dialect, copy_inputs=False)
            return tuple(values[o] for o in self.graph.outputs)
        return tuple(run_graph_torch(self.graph, env, self.dialect))


def torch_inputs(g: Graph, values: Mapping[str, np.ndarray]) -> list[torch.Tensor]:
    return [torch.from_numpy(np.asarray(values[v.name], order="C")) for v in g.inputs]
