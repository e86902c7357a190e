"""Input search: find inputs and weights for which every value of the graph is valid
(`ir.domain`): no NaN/Inf, no op outside its safe domain, no integer overflow risk.

Gradient-guided, as in NNSmith: evaluate until the first invalid instruction; if the op's domain
is violated, descend on the summed violation measures w.r.t. every float input and param (a step
of fixed size along the normalized gradient); when there is no usable gradient (a non-finite or
overflowing result, or a non-differentiable path), draw fresh data in narrower ranges. Everything
is deterministic given the seed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch

from ir.domain import evaluate_checked
from ir.graph import Graph
from ir.rewrite import remove_unused, replace_uses
from ir.values import ValueRanges, random_values


@dataclass(frozen=True)
class SearchConfig:
    max_iters: int = 24
    #: gradient step, as a fraction of the input range
    step: float = 0.1


@dataclass
class SearchResult:
    values: dict[str, np.ndarray]
    ok: bool
    #: gradient steps + redraws taken (0: the first draw was valid)
    iters: int
    violation: str | None = None
    #: top-level instruction of the last violation (-1: an input itself), None when ok
    index: int | None = None


def _narrow(r: ValueRanges) -> ValueRanges:
    return replace(r, input_scale=r.input_scale / 2, param_scale=r.param_scale / 2,
                   int_range=max(1, r.int_range // 2))


#: extra penalties a search must also drive to zero once every value is valid (e.g. "this
#: predicate is true"), from the evaluated values; each >= 0, == 0 where satisfied
Goal = Callable[[dict[str, torch.Tensor]], list[torch.Tensor]]


def search_inputs(g: Graph, seed: int, ranges: ValueRanges = ValueRanges(),
                  cfg: SearchConfig = SearchConfig(), start: dict[str, np.ndarray] | None = None,
                  goal: Goal | None = None, frozen: frozenset[str] = frozenset(),
                  explore: bool = False) -> SearchResult:
    """Values for every input and param of `g` that make every value valid (and meet `goal`).

    `start`: the first values tried (default: a random draw); `frozen`: names never changed
    (e.g. the params of a test whose other input sets are being searched); `explore`: the
    branches of every `if` not taken must be valid too (`ir.domain.evaluate_checked`)."""
    rng = np.random.default_rng(seed)
    values = dict(start) if start is not None else random_values(g, rng, ranges)
    pinned = {k: values[k] for k in frozen}
    params = {p.name for p in g.params}
    message, index = None, None
    for it in range(cfg.max_iters + 1):
        leaves = {k: torch.from_numpy(np.array(v, order="C", copy=True)) for k, v in values.items()}
        movable = [k for k, t in leaves.items() if t.dtype.is_floating_point and k not in frozen]
        floats = [leaves[k] for k in movable]
        for t in floats:
            t.requires_grad_(True)
        with torch.enable_grad():
            env, violation = evaluate_checked(g, leaves, explore=explore)
            if violation is None:
                penalties = [p for p in (goal(env) if goal else []) if bool((p.detach() > 0).any())]
                if not penalties:
                    return SearchResult(values, True, it)
                message, index = "goal not met", None
            else:
                message, index = violation.message, violation.index
                penalties = violation.penalties
            grads = None
            if penalties and floats:
                loss = sum(p.sum() for p in penalties)
                if loss.requires_grad:
                    grads = torch.autograd.grad(loss, floats, allow_unused=True)
        if grads is None or all(gr is None or not bool(gr.abs().sum() > 0) for gr in grads):
            ranges = _narrow(ranges)
            values = {**random_values(g, rng, ranges), **pinned}
            continue
        peak = max(float(gr.abs().max()) for gr in grads if gr is not None)
        for name, t, gr in zip(movable, floats, grads):
            if gr is None:
                continue
            scale = ranges.param_scale if name in params else ranges.input_scale
            new = t.detach() - cfg.step * scale * 2 * gr / peak
            values[name] = new.numpy().astype(values[name].dtype)
    return SearchResult(values, False, cfg.max_iters, message, index)

# ---------------------------------------------------------------------------------------------
# repair: drop what no input can make valid


@dataclass
class ValidTest:
    graph: Graph
    search: SearchResult
    #: instructions dropped because no input could make them valid ("op@index" per drop)
    dropped: list[str]


def drop_instruction(g: Graph, index: int) -> Graph | None:
    """`g` without instruction `index`: its single result is replaced by an operand of the same
    type when there is one, else it goes with every instruction reading it; outputs that go are
    dropped, then dead code and unread inputs/params. None when no output would remain."""
    inst = g.insts[index]
    types = g.types()
    same = [a for a in inst.args if len(inst.results) == 1 and types[a] == inst.results[0].type]
    if same:
        out = replace_uses(g, inst.results[0].name, same[0], start=index + 1)
        return remove_unused(out.with_insts(out.insts[:index] + out.insts[index + 1:]))
    gone = set(inst.result_names)
    kept = []
    for i, other in enumerate(g.insts):
        if i == index or gone & set(other.args):
            gone |= set(other.result_names)
            continue
        kept.append(other)
    outputs = [o for o in g.outputs if o not in gone]
    if not outputs or not kept:
        return None
    return remove_unused(g.with_insts(kept, outputs))


def make_valid(g: Graph, seed: int, max_drops: int = 8, ranges: ValueRanges = ValueRanges(),
               cfg: SearchConfig = SearchConfig()) -> ValidTest | None:
    """Search inputs for `g`; while the search fails at an instruction, drop it (see
    `drop_instruction`) and search again. None when nothing valid remains.

    A graph with an `if` is first searched for values valid on the branches not taken too, so
    that other input sets can take them (`ir.coverage`); failing that, the taken ones suffice."""
    dropped: list[str] = []
    for _ in range(max_drops + 1):
        if any(inst.op.name == "if" for inst, _ in g.walk()):
            result = search_inputs(g, seed, ranges, cfg, explore=True)
            if result.ok:
                return ValidTest(g, result, dropped)
        result = search_inputs(g, seed, ranges, cfg)
        if result.ok:
            return ValidTest(g, result, dropped)
        index = result.index
        if index is None or index < 0:
            return None
        name = g.insts[index].op.name
        smaller = drop_instruction(g, index)
        if smaller is None:
            return None
        dropped.append(f"{name}@{index}")
        g = smaller
    return None
