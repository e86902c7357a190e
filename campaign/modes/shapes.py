"""A test's shapes, static or dynamic (docs/dynshape.md): the one place that asks whether a
test keeps some dims symbolic. A dynamic-shape test (`TestCase.dynshape`, an
`ir.materialize.dynshape.DynShape`) runs one model, compiled with symbolic dims, on input sets
of several shapes; every test mode composes with it where the mode allows
(`TestMode.combines_with_dynshape`).

`shapes_of(tc)` (also `TestCase.shapes`) is `STATIC` or `DYNAMIC`; each answers: the concrete
graph of an input set, the ONNX model and torch module a backend is given, the files and row
columns it adds, which input sets a mismatch fails on, the symbolic dims, and whether the
reducer and the merger may take the test.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import onnx
    import torch

    from campaign.testcase import TestCase
    from ir.core.graph import Graph


class StaticShapes:
    """Every input set of one shape: the test's graph is every set's."""

    #: whether the sets differ in shape (the known bugs' triggers match on it)
    dynamic: ClassVar[bool] = False
    #: why the reducer does not reduce such a test (None: it does)
    unreduced: ClassVar[str | None] = None
    #: why such a test is not merged with others (None: it may be)
    unmergeable: ClassVar[str | None] = None

    def graph_of(self, tc: TestCase, k: int) -> Graph:
        return tc.graph

    def onnx_model(self, tc: TestCase) -> onnx.ModelProto:
        from ir.materialize.to_onnx import to_onnx

        return to_onnx(tc.graph, tc.params())

    def torch_module(self, tc: TestCase) -> torch.nn.Module:
        from ir.materialize.to_torch import GraphModule

        return GraphModule(tc.graph, tc.params())

    def files(self, tc: TestCase) -> dict[str, bytes]:
        return {}

    def row_fields(self, tc: TestCase) -> dict[str, Any]:
        return {"dyn_dims": [], "dyn_shapes": []}

    def dims(self, tc: TestCase) -> dict[str, tuple]:
        """Per graph input with a symbolic dim: its dims (ints and symbols)."""
        return {}

    def judges_sets(self) -> bool:
        """Whether a mismatch's row names the sets it fails on (`failing_sets`)."""
        return False


class DynamicShapes(StaticShapes):
    """Some dims symbolic: set k runs the concrete graph of its shapes (`graph_of`), every
    backend gets one model with symbolic dims."""

    dynamic = True
    unreduced = "a dynamic-shape test: confirmed, not reduced"
    unmergeable = "dynamic shapes"

    def graph_of(self, tc: TestCase, k: int) -> Graph:
        sets = tc.__dict__.get("_graph_sets")
        if sets is None or sets.g is not tc.graph:
            from ir.materialize.dynshape import GraphSets

            sets = tc.__dict__["_graph_sets"] = GraphSets(tc.graph, tc.dynshape)
        return sets(k)

    def onnx_model(self, tc: TestCase) -> onnx.ModelProto:
        from ir.materialize.dynshape import to_onnx_dyn

        return to_onnx_dyn(tc.graph, tc.dynshape, tc.params())

    def torch_module(self, tc: TestCase) -> torch.nn.Module:
        from ir.materialize.dynshape import torch_module

        return torch_module(tc.graph, tc.dynshape, tc.params())

    def files(self, tc: TestCase) -> dict[str, bytes]:
        """Its symbolic dims and each set's shape."""
        return {"dynshape.json": tc.dynshape.dumps().encode()}

    def row_fields(self, tc: TestCase) -> dict[str, Any]:
        return {"dyn_dims": tc.dynshape.input_dims(tc.graph),
                "dyn_shapes": tc.dynshape.shape_labels()}

    def dims(self, tc: TestCase) -> dict[str, tuple]:
        return dict(tc.dynshape.dims)

    def judges_sets(self) -> bool:
        return True


STATIC = StaticShapes()
DYNAMIC = DynamicShapes()


def shapes_of(tc: TestCase) -> StaticShapes:
    """`DYNAMIC` for a test with symbolic dims, else `STATIC`."""
    return STATIC if tc.dynshape is None else DYNAMIC
