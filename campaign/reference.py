"""The reference: torch eager on the CPU, with a validity check on every value, and its float64
shadow.

A test is *invalid* (our generator's problem, never a finding against a compiler) when eager
raises or any value, intermediate or output, fails `ir.domain`'s check (the one the input search
uses too): an op's inputs outside its safe domain (e.g. near-ties in argmax/topk, values near a
floor/sign jump, log near 0), a non-finite float, or an integer so large that an int op could have
wrapped around (|x| < 2**(bits/2 - 1)).

The *float64 shadow* evaluates the same graph with every float value (inputs, params, every
intermediate, float dtype attributes such as a cast's target) widened to float64: a close
approximation of the exact result, against which the float32 reference and a target can both be
judged when they disagree (`campaign.oracle.judge_with_truth`).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch

from campaign.artifacts import Materialized
from ir.domain import evaluate_checked
from ir.dtypes import DType
from ir.graph import Graph, Inst, Value
from ir.op import Op
from ir.to_torch import evaluate_torch


@dataclass
class ReferenceResult:
    outputs: list[np.ndarray] | None
    ms: float
    problem: str | None = None  #: why the test is invalid, None if valid
    error_class: str | None = None


def torch_env(values: dict[str, np.ndarray], widen: bool = False) -> dict[str, torch.Tensor]:
    """Tensors for every graph input and param of one input set (float ones widened to float64
    if asked)."""
    env = {}
    for k, v in values.items():
        t = torch.from_numpy(np.asarray(v, order="C"))
        if widen and t.dtype.is_floating_point:
            t = t.to(torch.float64)
        env[k] = t
    return env


def run_reference(m: Materialized) -> ReferenceResult:
    """The outputs of every input set, set after set (one flat list); invalid when any set is.
    Taken as they are when the input-set search computed them already (`TestCase.ref_outputs`:
    the same evaluation, `ir.coverage.Covered.outputs`)."""
    t0 = time.perf_counter()
    if m.tc.ref_outputs is not None and m.tc.dynshape is None:
        return ReferenceResult(list(m.tc.ref_outputs), (time.perf_counter() - t0) * 1e3)
    g = m.tc.graph
    sets = m.tc.value_sets()
    outputs: list[np.ndarray] = []
    for k, env in enumerate(sets):
        g = m.tc.graph_of(k)  # dynamic shapes: each set's own concrete graph
        where = f"input set {k}: " if len(sets) > 1 else ""
        try:
            with torch.no_grad():
                values, violation = evaluate_checked(g, torch_env(env))
        except Exception as e:
            return ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                   f"{where}eager raised: {e}", type(e).__name__)
        if violation is not None:
            return ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                   where + violation.message, "InvalidReference")
        outputs += [values[o].numpy() for o in g.outputs]
    return ReferenceResult(outputs, (time.perf_counter() - t0) * 1e3)


# ---- the float64 shadow --------------------------------------------------------------------


def _widen_dtype(d: DType) -> DType:
    return DType.float64 if d.is_float else d


def _widen_op(op: Op) -> Op:
    """The op with every float dtype attribute (e.g. a cast's `to`) made float64."""
    changes = {}
    for f in dataclasses.fields(op):
        v = getattr(op, f.name)
        if isinstance(v, DType) and v.is_float and v is not DType.float64:
            changes[f.name] = DType.float64
    return dataclasses.replace(op, **changes) if changes else op


def _widen_value(v: Value) -> Value:
    return Value(v.name, v.type.with_dtype(_widen_dtype(v.type.dtype)))


def widen_graph(g: Graph) -> Graph:
    """`g` with every float value and float dtype attribute made float64, sub-graphs included.
    The result is for evaluation only: it may break per-op dtype rules (conv2d is f32-only in
    the op table), which torch eager does not care about."""
    insts = tuple(
        Inst(_widen_op(inst.op), inst.args, tuple(_widen_value(r) for r in inst.results),
             tuple(widen_graph(b) for b in inst.blocks))
        for inst in g.insts
    )
    return Graph(g.name, tuple(_widen_value(v) for v in g.inputs), insts, g.outputs,
                 tuple(_widen_value(v) for v in g.params))


def run_shadow(m: Materialized) -> list[np.ndarray]:
    """The graph's outputs computed with every float in float64 (float outputs come back as
    float64; int/bool outputs keep their dtype), for every input set as `run_reference` lays
    them out. Raises what eager raises."""
    out = []
    for k, env in enumerate(m.tc.value_sets()):
        g = widen_graph(m.tc.graph_of(k))  # dynamic shapes: each set's own concrete graph
        with torch.no_grad():
            values = evaluate_torch(g, torch_env(env, widen=True))
        for o in g.outputs:
            t = values[o]
            out.append((t.to(torch.float64) if t.dtype.is_floating_point else t).numpy())
    return out
