"""GraphIR -> torch: an `nn.Module` whose forward interprets the graph (the eager reference).

Params become buffers (or `nn.Parameter`s, or Python numbers: the module's `TorchForm`,
`ir.materialize.form`); `forward` takes the graph inputs positionally and returns a tuple of the
graph outputs. The interpreter (`ir.core.interpreter`) is plain Python over the instruction list,
which Dynamo traces straight through, so the same module serves eager and `torch.compile`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from ir.analysis.inplace import has_effects, pure_form, torch_plan
from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import Interpreter, tensor_outputs
from ir.materialize.form import DEFAULT_FORM, TorchForm
from ir.ops.custom import register_all
from ir.ops.region import register_regions

#: what becomes of each result of an instruction (`evaluate_torch`'s `result` hook)
ResultHook = Callable[[Inst, torch.Tensor], torch.Tensor]


class TorchInterpreter(Interpreter):
    """A pure graph on torch: every op's torch form in a dialect, and `result` (when given)
    applied to every tensor result, bodies included (a pure graph's bodies are pure)."""

    def __init__(self, dialect: str = "python", result: ResultHook | None = None,
                 numbers: bool = False):
        super().__init__(dialect, numbers)
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


class FormParams:
    """How a module holds a graph's params in a `TorchForm`: registered on `module` as buffers
    or `nn.Parameter`s (`p_<name>`), except the 0-d ones the `number` scalars form holds as
    Python numbers (`numbers`; never one in `tensors_only`: those a fix must see as tensors).
    A gradient test's leaf params (`trainable`) are `nn.Parameter`s that require grad, in
    every form."""

    def __init__(self, module: torch.nn.Module, g: Graph, params: Mapping[str, np.ndarray],
                 form: TorchForm, tensors_only: frozenset[str] = frozenset(),
                 trainable: frozenset[str] = frozenset()):
        #: param name -> its value as a Python number (the number form's 0-d params)
        self.numbers: dict[str, Any] = {}
        for p in g.params:
            value = np.asarray(params[p.name], order="C")
            if (form.numbers and p.type.rank == 0 and p.name not in tensors_only
                    and p.name not in trainable):
                self.numbers[p.name] = value.item()
                continue
            t = torch.from_numpy(value)
            if p.name in trainable:
                module.register_parameter(f"p_{p.name}", torch.nn.Parameter(t.clone()))
            elif form.params == "parameter":
                module.register_parameter(f"p_{p.name}",
                                          torch.nn.Parameter(t, requires_grad=False))
            else:
                module.register_buffer(f"p_{p.name}", t)

    def env(self, module: torch.nn.Module, g: Graph) -> dict[str, Any]:
        """Each param's value in `forward`, by name."""
        return {p.name: self.numbers[p.name] if p.name in self.numbers
                else getattr(module, f"p_{p.name}") for p in g.params}


class GraphModule(torch.nn.Module):
    """forward(*inputs) -> tuple of outputs, for a concrete graph and its param values, written
    in control-flow `dialect` and `form` (`ir.materialize.form`: the `functional` form
    materializes `pure_form(g)`, whose `graph` attribute it keeps)."""

    def __init__(self, g: Graph, params: Mapping[str, np.ndarray], dialect: str = "python",
                 form: TorchForm = DEFAULT_FORM, trainable: frozenset[str] = frozenset()):
        super().__init__()
        if form.inplace == "functional":
            g = pure_form(g)
        self.graph = g
        self.dialect = dialect
        self.form = form
        register_all(g)  # custom ops exist before any compiler traces the module
        register_regions(g)  # so do the compile regions' functions
        #: views and in-place writes (docs/inplace.md): forward writes its input tensors
        self.plan = torch_plan(g) if has_effects(g) else None
        self.params_of = FormParams(self, g, params, form,
                                    self.plan.fixed_inputs() if self.plan else frozenset(),
                                    trainable)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env = {v.name: x for v, x in zip(self.graph.inputs, inputs, strict=True)}
        env.update(self.params_of.env(self, self.graph))
        numbers = self.form.numbers
        if self.plan is not None:
            values = self.plan.run(env, self.dialect, copy_inputs=False, numbers=numbers)
        else:
            values = TorchInterpreter(self.dialect, numbers=numbers).run(self.graph, env)
        if numbers:
            return tuple(tensor_outputs(self.graph, values))
        return tuple(values[o] for o in self.graph.outputs)


def torch_inputs(g: Graph, values: Mapping[str, np.ndarray]) -> list[torch.Tensor]:
    return [torch.from_numpy(np.asarray(values[v.name], order="C")) for v in g.inputs]
