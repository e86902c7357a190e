"""The reference: torch eager on the CPU, with a validity check on every value, and its float64
shadow.

A test is *invalid* (our generator's problem, never a finding against a compiler) when eager
raises or any value, intermediate or output, fails `ir.numerics.domain`'s check (the one the input search
uses too): an op's inputs outside its safe domain (e.g. near-ties in argmax/topk, values near a
floor/sign jump, log near 0), a non-finite float, or an integer so large that an int op could have
wrapped around (|x| < 2**(bits/2 - 1)).

The *float64 shadow* evaluates the same graph with every float value (inputs, params, every
intermediate, float dtype attributes such as a cast's target) widened to float64: a close
approximation of the exact result, against which the float32 reference and a target can both be
judged when they disagree (`campaign.oracle.judge_with_truth`). With the truth it measures the
*rounding spread* (`rounding_spread`): the graph evaluated again in its own precision a few
times, every float result of a rounding op moved by one ulp up or down at random, each output's
elementwise max distance from the truth. A correct float32 implementation (another summation
order, fused ops, other exp/erf approximations) differs from the reference by roundings of
this size, often larger, so a target no farther off than the spread is no evidence of a bug.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch

from campaign.artifacts import Materialized
from campaign.oracle import Truths
from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op
from ir.materialize.to_torch import evaluate_torch
from ir.numerics.domain import evaluate_checked


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
    the same evaluation, `ir.numerics.coverage.Covered.outputs`)."""
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


#: float32 evaluations with perturbed rounding that measure the rounding spread
ROUNDING_SAMPLES = 4

#: op families whose float results every implementation computes exactly (data movement,
#: selection, correctly rounded casts), and control flow (its results are its bodies'):
#: never perturbed
EXACT_FAMILIES = frozenset({"shape", "view", "index", "pad", "cast", "control", "inplace"})
#: ops of the other families whose float results are exact (selections, sign changes,
#: rounding to integers)
EXACT_OPS = frozenset({
    "max", "min", "where", "masked_fill", "abs", "neg", "relu", "ceil", "floor", "round",
    "sign", "clip", "reduce_max", "reduce_min", "maxpool1d", "maxpool2d", "resize_nearest",
})


def _nudge(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """`t` (float) with every finite element moved one ulp up or down at random."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return t
    inf = torch.tensor(float("inf"), dtype=t.dtype)
    up = torch.rand(t.shape, generator=gen) < 0.5
    moved = torch.where(up, torch.nextafter(t, inf), torch.nextafter(t, -inf))
    return torch.where(torch.isfinite(t), moved, t)


def evaluate_perturbed(g: Graph, env: dict[str, torch.Tensor], gen: torch.Generator
                       ) -> dict[str, torch.Tensor]:
    """`g` (pure: no in-place writes) evaluated as the reference evaluates it, instruction by
    instruction, bodies included, with every float result of a rounding op (not in
    `EXACT_FAMILIES` / `EXACT_OPS`) moved one ulp up or down at random: what another correct
    implementation could compute. Every value of this level by name."""

    def perturb(inst: Inst, t: torch.Tensor) -> torch.Tensor:
        exact = inst.op.family in EXACT_FAMILIES or inst.op.name in EXACT_OPS
        return t if exact else _nudge(t, gen)

    return evaluate_torch(g, env, "python", result=perturb)


def rounding_spread(g: Graph, env: dict[str, np.ndarray], truths: list[np.ndarray],
                    samples: int = ROUNDING_SAMPLES) -> list[np.ndarray | None]:
    """For each output of `g` on one input set, elementwise: the max over `samples`
    evaluations with perturbed rounding (`evaluate_perturbed` of the pure form, seeded 0, 1, ..)
    of |output - truth| (inf where an evaluation went non-finite). None for a non-float output,
    or when no evaluation gave it with the truth's shape (one that raises or changes a shape
    is left out: it measures nothing)."""
    from ir.analysis.inplace import pure_form

    spread: list[np.ndarray | None] = [None] * len(g.outputs)
    try:
        pure = pure_form(g)
    except Exception:
        return spread
    for s in range(samples):
        try:
            with torch.no_grad():
                values = evaluate_perturbed(pure, torch_env(env), torch.Generator().manual_seed(s))
        except Exception:
            continue
        for i, (o, truth) in enumerate(zip(pure.outputs, truths, strict=True)):
            y = values[o]
            if not y.dtype.is_floating_point or tuple(y.shape) != np.shape(truth):
                continue
            err = np.nan_to_num(np.abs(y.to(torch.float64).numpy() - truth), nan=np.inf)
            prev = spread[i]
            spread[i] = err if prev is None else np.maximum(prev, err)
    return spread


def run_shadow(m: Materialized, samples: int = ROUNDING_SAMPLES) -> Truths:
    """The graph's outputs computed with every float in float64 (float outputs come back as
    float64; int/bool outputs keep their dtype), for every input set as `run_reference` lays
    them out, with their rounding spreads (`rounding_spread`, `samples` evaluations per set;
    0: not measured). Raises what eager raises."""
    out: list[np.ndarray] = []
    spread: list[np.ndarray | None] = []
    for k, env in enumerate(m.tc.value_sets()):
        g = m.tc.graph_of(k)  # dynamic shapes: each set's own concrete graph
        wide = widen_graph(g)
        with torch.no_grad():
            values = evaluate_torch(wide, torch_env(env, widen=True))
        truths = []
        for o in wide.outputs:
            t = values[o]
            truths.append((t.to(torch.float64) if t.dtype.is_floating_point else t).numpy())
        out += truths
        spread += (rounding_spread(g, env, truths, samples) if samples
                   else [None] * len(truths))
    return Truths(out, spread)
