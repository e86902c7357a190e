"""Input search: find inputs and weights for which every value of the graph is valid
(`ir.numerics.domain`): no NaN/Inf, no op outside its safe domain, no integer overflow risk.

Gradient-guided, as in NNSmith: evaluate until the first invalid instruction; if the op's domain
is violated, descend on the summed violation measures w.r.t. every float input and param (a step
of fixed size along the normalized gradient); when there is no usable gradient (a non-finite or
overflowing result, or a non-differentiable path), draw fresh data in narrower ranges. Everything
is deterministic given the seed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import torch

from ir.core.graph import Graph, Value
from ir.core.paths import Site
from ir.core.rewrite import remove_insts, remove_unused
from ir.numerics.domain import ControlTrace, Violation, any_positive, evaluate_checked
from ir.numerics.values import ValueRanges, as_tensors, random_values
from ir.ops.control import holds_choice, is_control


@dataclass(frozen=True)
class SearchConfig:
    max_iters: int = 24
    #: gradient step, as a fraction of the input range
    step: float = 0.1
    #: give up after this many iterations in a row without progress over the one before: the
    #: first violation neither later in the graph nor, at the same instruction, by a measure
    #: 1% smaller. What no step or draw moves is structural (topk of sign(x) always ties) or
    #: a plateau the fixed step cannot leave; a search that succeeds rarely stalls this long.
    #: (Not "no progress over the furthest point": a loop body's violation stays at one
    #: instruction while the search fixes trip after trip, each starting from a new high.)
    patience: int = 8


@dataclass
class SearchResult:
    values: dict[str, np.ndarray]
    ok: bool
    #: gradient steps + redraws taken (0: the first draw was valid)
    iters: int
    violation: str | None = None
    #: top-level instruction of the last violation (-1: an input itself), None when ok
    index: int | None = None
    #: the violating instruction's path, nested bodies included (`ir.numerics.domain.Violation.path`)
    path: tuple[int, ...] = ()
    #: the last violation was in a body the inputs do not run (explore mode)
    not_taken: bool = False


def _narrow(r: ValueRanges) -> ValueRanges:
    return replace(r, input_scale=r.input_scale / 2, param_scale=r.param_scale / 2,
                   int_range=max(1, r.int_range // 2))


#: extra penalties a search must also drive to zero once every value is valid (e.g. "this
#: predicate is true"), from the evaluated values; each >= 0, == 0 where satisfied
Goal = Callable[[dict[str, torch.Tensor]], list[torch.Tensor]]


#: how far an evaluation got: the violating instruction's path (`Violation.path`, (-1,) for an
#: input, (inf,) for the goal, asked once every value is valid) and the violation measure
#: there (inf for a violation without one: a non-finite or overflowing value)
Progress = tuple[tuple[float, ...], float]


def _progress(violation: Violation | None, penalties: list[torch.Tensor]) -> Progress:
    where = (float("inf"),) if violation is None else tuple(map(float, violation.path or (-1,)))
    measure = float(sum(float(p.detach().sum()) for p in penalties)) if penalties else float("inf")
    return where, measure


def _further(a: Progress, b: Progress) -> bool:
    """Whether `a` is progress over `b`: a later violation, or the same one 1% smaller."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] < 0.99 * b[1])


def search_inputs(g: Graph, seed: int, ranges: ValueRanges = ValueRanges(),
                  cfg: SearchConfig = SearchConfig(), start: dict[str, np.ndarray] | None = None,
                  goal: Goal | None = None, frozen: frozenset[str] = frozenset(),
                  explore: bool = False,
                  trace: Callable[[], ControlTrace] | None = None) -> SearchResult:
    """Values for every input and param of `g` that make every value valid (and meet `goal`).

    `start`: the first values tried (default: a random draw); `frozen`: names never changed
    (e.g. the params of a test whose other input sets are being searched); `explore`: the
    branches of every `if` not taken must be valid too (`ir.numerics.domain.evaluate_checked`);
    `trace`: makes the trace of each evaluation, which sees every control-flow instruction
    run before `goal` is asked (a goal on values inside bodies records them there)."""
    rng = np.random.default_rng(seed)
    values = dict(start) if start is not None else random_values(g, rng, ranges)
    pinned = {k: values[k] for k in frozen}
    params = {p.name for p in g.params}
    message, index, path, not_taken = None, None, (), False
    last, stalled = None, 0  # the last iteration's progress; iterations in a row without
    for it in range(cfg.max_iters + 1):
        leaves = as_tensors(values)
        movable = [k for k, t in leaves.items() if t.dtype.is_floating_point and k not in frozen]
        floats = [leaves[k] for k in movable]
        for t in floats:
            t.requires_grad_(True)
        with torch.enable_grad():
            env, violation = evaluate_checked(g, leaves, trace=trace() if trace else None,
                                              explore=explore)
            if violation is None:
                penalties = [p for p in (goal(env) if goal else []) if any_positive(p)]
                if not penalties:
                    return SearchResult(values, True, it)
                message, index, path, not_taken = "goal not met", None, (), False
            else:
                message, index = violation.message, violation.index
                path, not_taken = violation.path, violation.not_taken
                penalties = violation.penalties
            reached = _progress(violation, penalties)
            stalled = 0 if last is None or _further(reached, last) else stalled + 1
            last = reached
            if stalled >= cfg.patience:
                break
            grads = None
            if penalties and floats:
                loss = cast(torch.Tensor, sum(p.sum() for p in penalties))  # penalties: not empty
                if loss.requires_grad:
                    grads = torch.autograd.grad(loss, floats, allow_unused=True)
        if grads is None or all(gr is None or not bool(gr.abs().sum() > 0) for gr in grads):
            ranges = _narrow(ranges)
            values = {**random_values(g, rng, ranges), **pinned}
            continue
        peak = max(float(gr.abs().max()) for gr in grads if gr is not None)
        for name, t, gr in zip(movable, floats, grads, strict=True):
            if gr is None:
                continue
            scale = ranges.param_scale if name in params else ranges.input_scale
            new = t.detach() - cfg.step * scale * 2 * gr / peak
            values[name] = new.numpy().astype(values[name].dtype)
    return SearchResult(values, False, it, message, index, path, not_taken)

# ---------------------------------------------------------------------------------------------
# repair: drop what no input can make valid


def _start(g: Graph, seed: int, ranges: ValueRanges,
           params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The random draw of `search_inputs`, with the given params' values where a param of
    that name has that shape and dtype; None when none has."""
    values = random_values(g, np.random.default_rng(seed), ranges)
    hits = 0
    for p in g.params:
        a = params.get(p.name)
        if a is not None and a.shape == values[p.name].shape and a.dtype == values[p.name].dtype:
            values[p.name] = np.array(a, copy=True)
            hits += 1
    return values if hits else None


@dataclass
class ValidTest:
    graph: Graph
    search: SearchResult
    #: instructions dropped because no input could make them valid ("op@path" per drop, the
    #: path as in `ir.numerics.flow_coverage` sites: "3" top-level instruction 3, "3/1/0" instruction 0 of
    #: body 1 of instruction 3)
    dropped: list[str]


def drop_instruction(g: Graph, index: int) -> Graph | None:
    """`g` without instruction `index`: its single result is replaced by an operand of the same
    type when there is one, else it goes with every instruction reading it; outputs that go are
    dropped, then dead code and unread inputs/params. None when no output or no instruction
    would remain (a graph returning its inputs tests no compiler)."""
    inst = g.insts[index]
    types = g.types()
    same = [a for a in inst.args if len(inst.results) == 1 and types[a] == inst.results[0].type]
    if same:
        h = remove_insts(g, [index], lambda r, only_outputs: same[0])
        assert h is not None  # every removed result is reconnected: no output goes
        kept = remove_unused(h)
        return kept if kept.insts else None
    gone = set(inst.result_names)
    users = []
    for i, other in enumerate(g.insts):
        if i == index or gone & set(other.args):
            gone |= set(other.result_names)
            users.append(i)
    out = remove_insts(g, users, lambda r, only_outputs: None)
    if out is None or not out.insts:
        return None
    return remove_unused(out)


def drop_nested(g: Graph, path: tuple[int, ...]) -> Graph | None:
    """`g` without the instruction at `path` (`ir.numerics.domain.Violation.path`), at any depth. At the
    top level see `drop_instruction`. In a body, whose outputs are its signature, each result
    read later is replaced by a value of the same type: an operand of the instruction, else
    the latest one defined before it in the body (its inputs included), then dead code goes.
    A control-flow instruction in a body (its own domain failed: a loop's trip count) goes
    the same way unless it holds an `if`. None when that is not possible: no such value, an
    `if` inside, or an in-place write."""
    if len(path) == 1:
        return drop_instruction(g, path[0])
    if len(path) < 3:
        return None
    index, block, rest = path[0], path[1], path[2:]
    inst = g.insts[index]
    body = _drop_in_body(inst.blocks[block], rest)
    if body is None:
        return None
    blocks = list(inst.blocks)
    blocks[block] = body
    insts = list(g.insts)
    insts[index] = replace(inst, blocks=tuple(blocks))
    return g.with_insts(insts)


def _drop_in_body(body: Graph, path: tuple[int, ...]) -> Graph | None:
    if len(path) > 1:
        return drop_nested(body, path) if len(path) >= 3 else None
    index = path[0]
    inst = body.insts[index]
    if inst.op.effect.writes_memory or any(holds_choice(b) for b in inst.blocks):
        return None
    types = body.types()
    earlier = [v.name for v in (*body.inputs, *body.params)]
    for before in body.insts[:index]:
        earlier += [r.name for r in before.results]

    def reconnect(r: Value, only_outputs: bool) -> str | None:
        i = inst.result_names.index(r.name)
        same = [a for a in inst.args if types[a] == r.type]
        start = inst.op.passthrough_operand(i) if is_control(inst.op) else None
        if start is not None:  # what the result is when no body runs: the likeliest stand-in
            same.insert(0, inst.args[start])
        same += [a for a in reversed(earlier) if types[a] == r.type]
        return same[0] if same else None

    out = remove_insts(body, [index], reconnect, keep_outputs=True)
    return None if out is None else remove_unused(out, keep_inputs=True)




def make_valid(g: Graph, seed: int, max_drops: int = 8, ranges: ValueRanges = ValueRanges(),
               cfg: SearchConfig = SearchConfig(),
               params: Mapping[str, np.ndarray] | None = None) -> ValidTest | None:
    """Search inputs for `g`; while the search fails at an instruction, drop it (see
    `drop_instruction`; a failure inside a body drops the top-level instruction holding it) and
    search again. None when nothing valid remains.

    A graph with an `if` or a `loop` is first searched for values valid on the branches not
    taken and the loop bodies not run too (explore mode), so that other input sets can run them
    (`ir.numerics.flow_coverage`); failing that, for values valid on what runs, then again in explore mode
    from those. When explore mode fails inside a body not run, the failing instruction there
    is dropped (`drop_nested`: only it, the `if` or `loop` stays), as no input made it valid
    together with the rest, and the search starts over; when the instruction cannot be
    dropped alone, what runs suffices. Such a drop never costs validity: if the graph after it
    needs a top-level drop (or the drops run out), the valid test before it is returned.

    `params`: values the search starts from for params of those names and types (a model's
    weights, `mutation.model_weights: real`); the rest is drawn as always."""
    dropped: list[str] = []
    #: the valid test before the last drop in a body not run: what a failure after it returns
    before: ValidTest | None = None
    for _ in range(max_drops + 1):
        explore = any(is_control(inst.op) and inst.op.may_skip_bodies for inst, _ in g.walk())
        start = _start(g, seed, ranges, params) if params else None
        if explore:
            explored = search_inputs(g, seed, ranges, cfg, start=start, explore=True)
            if explored.ok:
                return ValidTest(g, explored, dropped)
        result = search_inputs(g, seed, ranges, cfg, start=start)
        if not result.ok and before is not None:
            return before  # a drop for explore mode never costs what runs
        if not result.ok:
            index = result.index
            if index is None or index < 0:
                return None
            smaller = drop_instruction(g, index)
            if smaller is None:
                return None
            dropped.append(f"{g.insts[index].op.name}@{index}")
            g = smaller
            continue
        if not explore:
            return ValidTest(g, result, dropped)
        # valid on what runs: what breaks is in a body not run, where the search starts
        with torch.no_grad():
            _, blocked = evaluate_checked(g, as_tensors(result.values), explore=True)
        if blocked is None:
            return ValidTest(g, result, dropped)
        explored = search_inputs(g, seed, ranges, cfg, start=result.values, explore=True)
        if explored.ok:
            return ValidTest(g, explored, dropped)
        # (a graph with in-place writes names only the top-level instruction: nothing to drop)
        nested = blocked.not_taken and len(blocked.path) >= 3
        smaller = drop_nested(g, blocked.path) if nested else None
        if smaller is None:
            return ValidTest(g, result, dropped)
        before = ValidTest(g, result, list(dropped))
        site = cast(Site, blocked.path)  # nested: a site inside a body
        dropped.append(f"{site.inst(g).op.name}@{site}")
        g = smaller
    return before
