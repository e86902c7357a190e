"""The reference's evaluations: torch eager on the CPU, with a validity check on every value,
and its float64 shadow. Each test mode (`campaign.modes`) composes its reference and shadow of
these; `campaign.reference` runs the one of a test's mode.

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
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from campaign.oracle import Truths
from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op
from ir.materialize.grad import GradSpec, trainable_params, training_step, vjp
from ir.materialize.to_torch import evaluate_torch
from ir.numerics.domain import differentiable, evaluate_checked

if TYPE_CHECKING:
    from campaign.artifacts import Materialized
    from campaign.testcase import TestCase


@dataclass
class ReferenceResult:
    outputs: list[np.ndarray] | None
    ms: float
    problem: str | None = None  #: why the test is invalid, None if valid
    error_class: str | None = None
    #: a transform test's forward outputs of every set (what a backend that does not train
    #: is judged on); None for other tests (a gradient test's are in `outputs`)
    forward: list[np.ndarray] | None = None


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


def forward_reference(m: Materialized, t0: float) -> ReferenceResult:
    """The outputs of every input set; invalid when any set is. Taken as they are when the
    input-set search computed them already (`TestCase.ref_outputs`: the same evaluation,
    `ir.numerics.flow_coverage.Covered.outputs`; never those of a dynamic-shape test's sets,
    whose shapes were drawn after it: `campaign.dynamic_shapes.add_shapes`)."""
    if m.tc.ref_outputs is not None:
        return ReferenceResult(list(m.tc.ref_outputs), (time.perf_counter() - t0) * 1e3)
    sets = m.tc.value_sets()
    outputs: list[np.ndarray] = []
    for k, env in enumerate(sets):
        g = m.tc.graph_of(k)  # dynamic shapes: each set's own concrete graph
        values, invalid = _checked_set(g, env, k, len(sets), t0)
        if invalid is not None:
            return invalid
        outputs += [values[o].numpy() for o in g.outputs]
    return ReferenceResult(outputs, (time.perf_counter() - t0) * 1e3)


def _checked_set(g: Graph, env: dict[str, np.ndarray], k: int, n_sets: int, t0: float
                 ) -> tuple[dict[str, torch.Tensor], ReferenceResult | None]:
    """Input set `k` evaluated and every value checked (`evaluate_checked`; differentiable
    too inside `ir.numerics.domain.differentiable`): its values, or the invalid result."""
    where = f"input set {k}: " if n_sets > 1 else ""
    try:
        with torch.no_grad():
            values, violation = evaluate_checked(g, torch_env(env))
    except Exception as e:
        return {}, ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                   f"{where}eager raised: {e}", type(e).__name__)
    if violation is not None:
        return values, ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                       where + violation.message, "InvalidReference")
    return values, None


def grad_module(g: Graph, tc: TestCase, spec: Any, params: dict[str, np.ndarray],
                dialect: str = "python") -> torch.nn.Module:
    """The eager module a gradient test's reference (and, widened, its shadow) trains."""
    from ir.materialize.dynshape import torch_module

    return torch_module(g, tc.dynshape, params, dialect=dialect,
                        trainable=spec.param_leaves(g))


def run_grad_reference(tc: TestCase, spec: GradSpec, t0: float) -> ReferenceResult:
    """A gradient test's reference (docs/training.md): per input set, every value checked
    valid and differentiable (`ir.numerics.domain.differentiable`), then eager autograd's
    training step (`ir.materialize.grad.training_step`): the outputs, then each leaf's
    gradient, which must be finite. Invalid when eager refuses the backward."""
    module = grad_module(tc.graph, tc, spec, tc.params())
    params = trainable_params(module)
    outputs: list[np.ndarray] = []
    sets = tc.value_sets()
    for k, env in enumerate(sets):
        gk = tc.graph_of(k)
        where = f"input set {k}: " if len(sets) > 1 else ""
        with differentiable():
            _, invalid = _checked_set(gk, env, k, len(sets), t0)
        if invalid is not None:
            return invalid
        inputs = [torch.from_numpy(np.asarray(env[v.name], order="C")).clone() for v in gk.inputs]
        try:
            result = training_step(module, gk, inputs, spec, k, params)
        except Exception as e:  # eager refuses the backward: our generator's bug
            return ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                   f"{where}eager autograd raised: {e}", "EagerAutogradError")
        n = len(gk.outputs)
        for leaf, gr in zip(spec.leaves, result[n:], strict=True):
            if not bool(torch.isfinite(gr).all()):
                return ReferenceResult(None, (time.perf_counter() - t0) * 1e3,
                                       f"{where}the gradient of %{leaf} is not finite",
                                       "InvalidReference")
        outputs += [t.numpy() for t in result]
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

def _nudge(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """`t` (float) with every finite element moved one ulp up or down at random (the move is
    a constant to autograd: the gradient passes through unchanged)."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return t
    inf = torch.tensor(float("inf"), dtype=t.dtype)
    up = torch.rand(t.shape, generator=gen) < 0.5
    d = t.detach()
    moved = torch.where(up, torch.nextafter(d, inf), torch.nextafter(d, -inf))
    return t + (torch.where(torch.isfinite(d), moved, d) - d)


def evaluate_perturbed(g: Graph, env: dict[str, torch.Tensor], gen: torch.Generator
                       ) -> dict[str, torch.Tensor]:
    """`g` (pure: no in-place writes) evaluated as the reference evaluates it, instruction by
    instruction, bodies included, with every float result of a rounding op (not `Op.exact`)
    moved one ulp up or down at random: what another correct implementation could compute.
    Every value of this level by name."""

    def perturb(inst: Inst, t: torch.Tensor) -> torch.Tensor:
        return t if inst.op.exact else _nudge(t, gen)

    return evaluate_torch(g, env, "python", result=perturb)


def rounding_spread(g: Graph, env: dict[str, np.ndarray], truths: list[np.ndarray],
                    samples: int = ROUNDING_SAMPLES, grad: GradSpec | None = None,
                    k: int = 0) -> list[np.ndarray | None]:
    """For each output of `g` on one input set, elementwise: the max over `samples`
    evaluations with perturbed rounding (`evaluate_perturbed` of the pure form, seeded 0, 1, ..)
    of |output - truth| (inf where an evaluation went non-finite). None for a non-float output,
    or when no evaluation gave it with the truth's shape (one that raises or changes a shape
    is left out: it measures nothing). A gradient test (`grad`, input set `k`) gets the
    spread of each gradient too, after the outputs: the backward of each perturbed forward
    (the forward's rounding reaches the gradients through the values the backward reads; the
    backward's own rounding is not perturbed)."""
    from ir.analysis.inplace import pure_form
    from ir.ops.custom import holds_custom, inline_custom

    n = len(g.outputs) + (len(grad.leaves) if grad else 0)
    spread: list[np.ndarray | None] = [None] * n
    try:
        pure = pure_form(g)
        if holds_custom(pure):  # a custom op's kernel rounds inside: perturb its body's ops
            pure = inline_custom(pure)
    except Exception:
        return spread
    for s in range(samples):
        try:
            with torch.set_grad_enabled(grad is not None):
                env_t = torch_env(env)
                leaves = [env_t[x].requires_grad_(True) for x in grad.leaves] if grad else []
                values = evaluate_perturbed(pure, env_t, torch.Generator().manual_seed(s))
                results = [values[o] for o in pure.outputs]
                if grad is not None:
                    results += vjp(results, g.outputs, leaves, grad.cotangents[k])
        except Exception:
            continue
        for i, (y, truth) in enumerate(zip(results, truths, strict=True)):
            y = y.detach()
            if not y.dtype.is_floating_point or tuple(y.shape) != np.shape(truth):
                continue
            err = np.nan_to_num(np.abs(y.to(torch.float64).numpy() - truth), nan=np.inf)
            prev = spread[i]
            spread[i] = err if prev is None else np.maximum(prev, err)
    return spread


def sets_shadow(m: Materialized, grad: GradSpec | None, samples: int | None = None) -> Truths:
    """The graph's outputs (and for a gradient test `grad`, each leaf's gradient) computed
    with every float in float64 (float outputs come back as float64; int/bool outputs keep
    their dtype), for every input set, with their rounding spreads (`rounding_spread`,
    `samples` evaluations per set, None: `ROUNDING_SAMPLES`; 0: not measured)."""
    samples = ROUNDING_SAMPLES if samples is None else samples
    out: list[np.ndarray] = []
    spread: list[np.ndarray | None] = []
    module = None
    if grad is not None:  # one float64 module trains every set (dynamic shapes too)
        params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v
                  for k, v in m.tc.params().items()}
        module = grad_module(widen_graph(m.tc.graph), m.tc, grad, params)
    for k, env in enumerate(m.tc.value_sets()):
        g = m.tc.graph_of(k)  # dynamic shapes: each set's own concrete graph
        wide = widen_graph(g)
        if module is not None and grad is not None:
            wenv = torch_env(env, widen=True)
            results = training_step(module, wide, [wenv[v.name] for v in wide.inputs], grad, k,
                                    trainable_params(module))
        else:
            with torch.no_grad():
                values = evaluate_torch(wide, torch_env(env, widen=True))
            results = [values[o] for o in wide.outputs]
        truths = [(t.to(torch.float64) if t.dtype.is_floating_point else t).numpy()
                  for t in results]
        out += truths
        spread += (rounding_spread(g, env, truths, samples, grad, k) if samples
                   else [None] * len(truths))
    return Truths(out, spread)
