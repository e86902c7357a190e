"""GraphIR -> ONNX, built directly with `onnx.helper`.

Inputs become ONNX graph inputs, params become initializers carrying their values (so backends
see real constants to fold), and every instruction contributes nodes through `Op.onnx`.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ir.analysis.inplace import pure_form
from ir.core.graph import Graph, Value
from ir.core.onnx_builder import IR_VERSION, OPSET, OnnxBuilder
from ir.ops.call import ONNX_DOMAIN


def value_info(v: Value) -> onnx.ValueInfoProto:
    """The ONNX type of a graph value (graph inputs and outputs)."""
    return helper.make_tensor_value_info(v.name, v.type.dtype.onnx, list(v.type.shape))


def build_body(g: Graph, b: OnnxBuilder, bind: list[str] | None = None) -> onnx.GraphProto:
    """An ONNX sub-graph for a body: outputs typed, nodes from its instructions. Without `bind`
    its inputs are ONNX inputs (Loop, Scan); with `bind` they are Identity copies of those
    outer values (If). Constants are Constant nodes inside it (subgraph initializers are not
    universally supported); names stay unique model-wide because GraphIR names are."""
    inner = OnnxBuilder(prefix=b.fresh("s") + "_", constants_as_nodes=True)
    inner.functions = b.functions
    if bind is not None:
        for v, outer in zip(g.inputs, bind, strict=True):
            inner.node("Identity", [outer], [v.name])
    _emit(g, inner)
    types = g.types()
    outputs = []
    for o in g.outputs:  # ONNX bodies must produce their outputs; an input passed through
        if o in {v.name for v in g.inputs} or o in outputs:  # or repeated needs an Identity
            alias = inner.fresh("o")
            inner.node("Identity", [o], [alias])
            outputs.append(alias)
        else:
            outputs.append(o)
    return helper.make_graph(inner.nodes, g.name + inner.fresh("g"),
                             [] if bind is not None else [value_info(v) for v in g.inputs],
                             [value_info(Value(n, types[o])) for n, o in zip(outputs, g.outputs, strict=True)])


def _emit(g: Graph, b: OnnxBuilder) -> None:
    b.types.update(g.types())
    for inst in g.insts:
        inst.op.onnx_call(b, list(inst.args), list(inst.result_names), inst.blocks,
                          lambda body, bind=None: build_body(body, b, bind))


def to_onnx(g: Graph, params: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    g = pure_form(g)  # in-place writes: ONNX gets the functionalized graph (docs/inplace.md)
    b = OnnxBuilder()
    _emit(g, b)
    inits = [numpy_helper.from_array(np.asarray(params[p.name], order="C"), p.name) for p in g.params]
    types = g.types()
    graph = helper.make_graph(
        b.nodes,
        g.name,
        [value_info(v) for v in g.inputs],
        [value_info(Value(o, types[o])) for o in g.outputs],
        initializer=inits + b.initializers,
    )
    opsets = [helper.make_opsetid("", OPSET)]
    if b.functions:  # custom ops' bodies (`ir.ops.custom`)
        opsets.append(helper.make_opsetid(ONNX_DOMAIN, 1))
    model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="dynsmith",
        ir_version=IR_VERSION,
        functions=list(b.functions.values()),
    )
    return model
