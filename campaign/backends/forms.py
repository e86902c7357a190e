"""Torch program forms as backend options (docs/configs.md): every backend that compiles the
test's torch module (Inductor, the torch.onnx exporter, TVM's torch frontend) takes the options
`scalars`, `params` and `inplace` (`ir.materialize.form.TorchForm`), and its configuration
space holds them (`FORM_SPACE`), so a test draws its form like any option, the row's
`backend_config` records it, the reducer shrinks it and repro.py rebuilds it. The row's
`dialect` is the form's label (`hop+params=parameter`).

Each option is drawn only for graphs it changes (`Option.applies`): `scalars` for a graph with
a loop (its counter) or a 0-d param, `params` for a graph with params, `inplace` for a graph
with in-place writes.
"""
from __future__ import annotations

from campaign.backends.configs import Option
from ir.core.graph import Graph
from ir.materialize.form import FORM_VALUES, TorchForm


def _has_loop_or_scalar_param(g: Graph) -> bool:
    return (any(inst.op.name == "loop" for inst, _ in g.walk())
            or any(p.type.rank == 0 for p in g.params))


def _has_params(g: Graph) -> bool:
    return bool(g.params)


def _has_writes(g: Graph) -> bool:
    from ir.analysis.inplace import has_writes

    return has_writes(g)


#: the form options of a torch backend's configuration space
FORM_SPACE = (
    Option("scalars", FORM_VALUES["scalars"], "scalars as Python numbers and SymInts: the loop "
           "counter an int (a SymInt carried by torch.while_loop), 0-d weights Python "
           "constants, numbers as binary ops' scalar operands: Dynamo's constant and SymInt "
           "handling, the Scalar overloads of the lowerings", applies=_has_loop_or_scalar_param),
    Option("params", FORM_VALUES["params"], "weights as nn.Parameters: Dynamo's parameter "
           "handling (static addresses, parameter lifting in AOT and torch.export, freezing of "
           "parameters)", applies=_has_params),
    Option("inplace", FORM_VALUES["inplace"], "the graph's in-place writes rewritten to pure "
           "ops before tracing (the functional program ONNX gets): the compiler's own paths for "
           "scatters instead of its functionalization of mutation", applies=_has_writes),
)


def form_option(backend: str, scalars: str, params: str, inplace: str) -> TorchForm:
    """The form of a backend's options; raises ValueError naming the backend for a bad value."""
    try:
        return TorchForm(scalars=scalars, params=params, inplace=inplace)
    except ValueError as e:
        raise ValueError(f"{backend}: {e}") from None
