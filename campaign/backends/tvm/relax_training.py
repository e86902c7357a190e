"""A gradient test trained with TVM's own reverse mode (docs/training.md), as the fuzzer's `tvm`
backend trains one: the ONNX model with its leaf params as graph inputs, `main` re-emitted as
the loss `L = sum_i sum(o_i * c_i)` over the fixed cotangents, `relax.transform.Gradient`, then
compile and run (`relax`) of `loss_adjoint`: per input set its outputs, then the gradient of
every leaf, in `LEAVES` order.

Also dynsmith's own: `campaign.backends.tvm` imports `leaf_params_as_inputs`, `loss_module`,
`differentiate` and `training_results`, so the backend and its repro train alike.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from campaign.backends.repro_scripts.prelude import INPUTS, PARAMS, failed, load, stage
from campaign.backends.tvm.relax import (
    GRAD_TYPES_ENV,
    GRADIENT_PASS,
    PASS_LOG_ENV,
    compile_and_run,
)

# ---- per-test values
#: the gradient test: L = sum over float outputs of <out_i, c_i>, differentiated with respect
#: to LEAVES (graph inputs and params); cotangents.npz holds each c_i ("s<k>/<output>" for
#: input set k). A result is the outputs, then the gradient of every leaf.
LEAVES: list[str] = []
OUTPUTS: list[str] = []
# ---- end of per-test values

#: the function `relax.transform.Gradient` makes of the loss function `loss`
ADJOINT = "loss_adjoint"


def leaf_params_as_inputs(model: Any, params: Sequence[str],
                          leaves: Sequence[str]) -> tuple[Any, list[np.ndarray]]:
    """A copy of the ONNX `model` whose leaf params (the `params`, graph order, that are in
    `leaves`) are graph inputs, after the graph's own, in graph order, instead of
    initializers; and their values (the initializers'), in that order."""
    import onnx
    from onnx import helper, numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {init.name: init for init in out.graph.initializer}
    values = []
    for name in params:
        if name not in leaves:
            continue
        init = inits[name]
        values.append(numpy_helper.to_array(init))
        out.graph.initializer.remove(init)
        out.graph.input.append(helper.make_tensor_value_info(name, init.data_type,
                                                             list(init.dims)))
    return out, values


def loss_module(mod: Any, cts: Sequence[int], n_outputs: int) -> Any:
    """The imported `mod` (its `main` returning `n_outputs` values) with `main`'s bindings
    re-emitted into `loss(main's params..., cotangents...)` (a cotangent per output index of
    `cts`, typed as that output) returning `(L, outputs...)`, `L = sum_i sum(o_i * c_i)`,
    each term cast to float32 (dL/dterm is 1 whatever the sum's dtype); no `main`."""
    from tvm import relax

    main = mod["main"]
    params = list(main.params)
    ret = main.ret_ty
    n_out = len(ret.fields) if isinstance(ret, relax.TupleType) else 1
    if n_out != n_outputs:
        raise ValueError(f"the imported main returns {n_out} values, the graph {n_outputs}")
    types = list(ret.fields) if isinstance(ret, relax.TupleType) else [ret]
    ct_vars = [relax.Var(f"cotangent{i}", types[i]) for i in cts]

    body = main.body
    dataflow = all(isinstance(b, relax.DataflowBlock) for b in body.blocks)
    bb = relax.BlockBuilder()
    with bb.function("loss", params=params + ct_vars):
        with bb.dataflow() if dataflow else contextlib.nullcontext():
            for block in body.blocks:
                for binding in block.bindings:
                    bb.emit_normalized(binding)
            outs = ([bb.emit(relax.TupleGetItem(body.body, i)) for i in range(n_out)]
                    if isinstance(ret, relax.TupleType) else [body.body])
            loss = None
            for i, c in zip(cts, ct_vars, strict=True):
                term = bb.emit(relax.op.astype(relax.op.sum(relax.op.multiply(outs[i], c)),
                                               "float32"))
                loss = term if loss is None else bb.emit(relax.op.add(loss, term))
            if loss is None:  # no float output: L = 0
                loss = bb.emit(relax.const(0.0, "float32"))
            emit = bb.emit_output if dataflow else bb.emit
            returned = [emit(x) for x in (loss, *outs)]
        bb.emit_func_output(relax.Tuple(returned))
    loss_mod = bb.get()
    for gv, func in mod.functions_items():  # the importer's other functions, if any
        if gv.name_hint != "main":
            loss_mod[gv] = func
    return loss_mod


def differentiate(loss_mod: Any, inputs: Sequence[str], leaf_params: Sequence[str],
                  leaves: Sequence[str]) -> Any:
    """`relax.transform.Gradient("loss", require_grads=<the leaves, in `leaves` order>)` of
    `loss_module`'s module, whose `loss` takes the graph `inputs`, then the `leaf_params`
    (graph order), then the cotangents; `loss` itself is dropped. The module's `loss_adjoint`
    returns `((L, outputs...), (grad per leaf...))`."""
    import tvm
    from tvm import relax

    loss_params = list(loss_mod["loss"].params)
    n_in = len(inputs)
    if len(loss_params) < n_in + len(leaf_params):
        raise ValueError(f"the imported main takes {len(loss_params)} params and cotangents, "
                         f"expected {n_in} inputs and {len(leaf_params)} leaf params first")
    position = {name: i for i, name in enumerate(inputs)}
    position.update({name: n_in + j for j, name in enumerate(leaf_params)})
    require = [loss_params[position[x]] for x in leaves]
    graded = relax.transform.Gradient("loss", require_grads=require)(loss_mod)
    adjoint = tvm.IRModule({gv: f for gv, f in graded.functions_items()
                            if gv.name_hint != "loss"})
    path = os.environ.get(GRAD_TYPES_ENV)
    if path:
        with open(path, "w") as f:
            json.dump(mistyped_gradients(adjoint, leaves, require), f)
    return adjoint


def mistyped_gradients(adjoint: Any, leaves: Sequence[str], require: Sequence[Any]
                       ) -> list[dict[str, str]]:
    """The gradients `loss_adjoint` declares with another shape or dtype than their leaf
    (`require`: the leaves' loss params): whatever the build does after, a gradient has its
    leaf's type, so such a gradient is the Gradient pass's own error."""
    grads = adjoint[ADJOINT].ret_ty.fields[1].fields
    out = []
    for leaf, var, got in zip(leaves, require, grads, strict=True):
        if tensor_type(got) != tensor_type(var.ty):
            out.append({"leaf": leaf, "gradient": str(got), "leaf_type": str(var.ty)})
    return out


def tensor_type(t: Any) -> tuple[str, list[str]]:
    """A Relax tensor type's dtype and dims (static dims as numbers, symbolic ones by name)."""
    shape = getattr(t, "shape", None)
    return str(getattr(t, "dtype", t)), [str(d) for d in (shape if shape is not None else [])]


def training_results(out: Any) -> list[np.ndarray]:
    """`loss_adjoint`'s result `((L, outputs...), (grads...))` as the outputs, then the
    gradients."""
    forward, grads = out
    return [o.numpy() for o in list(forward)[1:]] + [x.numpy() for x in grads]


def train_relax(model: Any, sets: list[dict[str, np.ndarray]]) -> list[Any]:
    """The repro's training step, the backend's stages: import (the ONNX `model` with its leaf
    params as inputs, `from_onnx`, then `loss_module`: the forward), compile (`differentiate`,
    which the pass log records as the pass `Gradient`, then the build), run (`loss_adjoint`
    on every input set); the outputs, then the gradients, of every set."""
    from tvm.relax.frontend.onnx import from_onnx

    print(f"a gradient test: relax.transform.Gradient of the loss with respect to "
          f"{', '.join(LEAVES)}", flush=True)
    stage("import")
    cotangents = load("cotangents.npz")
    cts = [i for i, o in enumerate(OUTPUTS) if f"s0/{o}" in cotangents]
    try:
        with_leaves, leaf_values = leaf_params_as_inputs(model, PARAMS, LEAVES)
        mod = from_onnx(with_leaves)
        loss_mod = loss_module(mod, cts, len(OUTPUTS))
    except Exception as e:
        failed(e)
    stage("compile")
    log = os.environ.get(PASS_LOG_ENV)
    try:
        if log:
            with open(log, "a") as f:
                f.write(f"0 {GRADIENT_PASS}\n")
        adjoint = differentiate(loss_mod, INPUTS, [p for p in PARAMS if p in LEAVES], LEAVES)
        if log:
            with open(log, "a") as f:
                f.write(f"0 /{GRADIENT_PASS}\n")
    except Exception as e:
        failed(e)
    feeds = [[s[n] for n in INPUTS] + leaf_values
             + [cotangents[f"s{k}/{OUTPUTS[i]}"] for i in cts] for k, s in enumerate(sets)]
    return compile_and_run(adjoint, feeds, ADJOINT, training_results)
