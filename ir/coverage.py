"""Control-flow coverage of a test's input sets, and the search for input sets that raise it.

A *site* is one control-flow instruction anywhere in a graph, named by its path: "3" is
top-level instruction 3, "3/1/0" instruction 0 of body 1 (an if's else) of instruction 3. Running
an input set through `ir.domain.evaluate_checked` with a trace tells, per site, which bodies ran:
an `if` took branch 0 (then) or 1 (else); a `loop`/`scan` ran its body n times (its trip count).

`cover` adds input sets (graph inputs only; params are the model's weights, shared by every set)
until every `if` has taken both branches and every loop has run a new trip count (zero where
legal), or the attempt budget is spent. Each candidate set must be valid by the same check as
set 0 and is kept only if it adds coverage; the sites a kept set reaches become steerable in
turn (an `if` in a branch set 0 did not take). Ways to a new set:
  - an `if` (at any depth) whose predicate is a comparison `a > b` (>=, <, <=) with one side a
    graph input passed unchanged into the site (the generator makes every predicate threshold
    such an input): the input is moved past every value the other side took in the set where
    the site ran, by a clear gap (no near-tie), so every run of the site takes the other branch;
  - a loop whose trip count is such an input: a count not seen yet (0 first);
  - anything else: fresh random inputs, repaired by the input search (params frozen).
Passing unchanged is seen by tensor identity in the traced run: bodies get their operands (and a
loop's pass-through carried values) as the very tensors of the enclosing scope.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ir.domain import evaluate_checked
from ir.graph import Graph, Inst
from ir.input_search import SearchConfig, search_inputs
from ir.ops.control import MAX_TRIPS
from ir.values import ValueRanges, sample_value

#: comparison op -> the sign s with which (a - b) * s > 0 makes it true
COMPARISONS = {"gt": 1, "ge": 1, "lt": -1, "le": -1}


def sites(g: Graph, prefix: str = "") -> dict[str, Inst]:
    """Every control-flow instruction of `g`, nested ones included, by site path."""
    out: dict[str, Inst] = {}
    for i, inst in enumerate(g.insts):
        if not inst.blocks:
            continue
        here = f"{prefix}{i}"
        out[here] = inst
        for k, body in enumerate(inst.blocks):
            out.update(sites(body, f"{here}/{k}/"))
    return out


@dataclass
class Coverage:
    """What a test's input sets exercised, per control-flow site."""

    #: site -> op name, for every control-flow instruction of the graph
    ops: dict[str, str]
    #: if site -> branches taken (0 then, 1 else)
    branches: dict[str, set[int]] = field(default_factory=dict)
    #: loop/scan site -> trip counts seen
    trips: dict[str, set[int]] = field(default_factory=dict)
    n_sets: int = 0

    @staticmethod
    def of(g: Graph) -> "Coverage":
        return Coverage({s: inst.op.name for s, inst in sites(g).items()})

    def record(self, site: str, ran: list[int]) -> None:
        if self.ops.get(site) == "if":
            self.branches.setdefault(site, set()).update(ran)
        else:
            self.trips.setdefault(site, set()).add(len(ran))

    def gain(self, other: "Coverage") -> bool:
        """Whether `other` saw a branch or trip count this coverage has not."""
        return (any(b - self.branches.get(s, set()) for s, b in other.branches.items())
                or any(t - self.trips.get(s, set()) for s, t in other.trips.items()))

    def merge(self, other: "Coverage") -> None:
        for s, b in other.branches.items():
            self.branches.setdefault(s, set()).update(b)
        for s, t in other.trips.items():
            self.trips.setdefault(s, set()).update(t)
        self.n_sets += other.n_sets

    @property
    def if_sites(self) -> list[str]:
        return [s for s, op in self.ops.items() if op == "if"]

    @property
    def loop_sites(self) -> list[str]:
        """Loops and scans (both record trip counts; only a loop's can vary)."""
        return [s for s, op in self.ops.items() if op != "if"]

    def missing_branches(self) -> list[tuple[str, int]]:
        return [(s, k) for s in self.if_sites for k in (0, 1) if k not in self.branches.get(s, set())]

    def summary(self) -> dict[str, Any]:
        """Plain figures for a results row."""
        ifs = self.if_sites
        seen = sum(len(self.branches.get(s, ())) for s in ifs)
        return {
            "n_sets": self.n_sets,
            "n_ifs": len(ifs),
            "ifs_both_branches": sum(1 for s in ifs if len(self.branches.get(s, ())) == 2),
            "branch_coverage": seen / (2 * len(ifs)) if ifs else None,
            "trip_counts": sorted({t for s in self.loop_sites for t in self.trips.get(s, ())}),
        }


@dataclass
class Observation:
    """How the input sets met one steerable site: a comparison predicate of an `if` whose one
    side is a graph input passed unchanged into the site (the threshold), or a loop whose trip
    count is such an input. `other` holds the other side's values seen, per input set."""

    input: str  #: the graph input that is the threshold or the trip count
    #: for an if: +1 when the predicate is `input > other` (or >=), -1 when `input < other`
    sign: int = 0
    other: dict[int, list[float]] = field(default_factory=dict)
    #: the other side's value name, when the site is at the top level (None: in a body)
    other_name: str | None = None


def _predicate_parts(scope_graph: Graph, inst: Inst) -> tuple[str, str, int] | None:
    """(a, b, s) when `inst` is an if whose predicate is `a <cmp> b` computed in the same graph:
    true iff (a - b) * s > 0."""
    for other in scope_graph.insts:
        if inst.args[0] in other.result_names and other.op.name in COMPARISONS:
            a, b = other.args
            return a, b, COMPARISONS[other.op.name]
    return None


def _scopes(g: Graph, prefix: str = "") -> dict[str, Graph]:
    """Site -> the graph or body the site's instruction is in."""
    out: dict[str, Graph] = {}
    for i, inst in enumerate(g.insts):
        if inst.blocks:
            out[f"{prefix}{i}"] = g
            for k, body in enumerate(inst.blocks):
                out.update(_scopes(body, f"{prefix}{i}/{k}/"))
    return out


class _Tracer:
    """Records coverage and observations of one traced run of input set `index`."""

    def __init__(self, g: Graph, env: dict[str, torch.Tensor], index: int,
                 observations: dict[str, Observation]):
        self.cov = Coverage.of(g)
        self.cov.n_sets = 1
        self.index = index
        self.obs = observations
        self.scopes = _scopes(g)
        self.sites = sites(g)
        self.inputs = {id(t): name for name, t in env.items() if name in {v.name for v in g.inputs}}

    def __call__(self, site: str, ran: list[int], values: dict[str, torch.Tensor]) -> None:
        self.cov.record(site, ran)
        inst = self.sites.get(site)
        if inst is None:
            return
        if inst.op.name == "loop":
            name = self.inputs.get(id(values.get(inst.args[0])))
            if name is not None:
                self.obs.setdefault(site, Observation(name))
            return
        if inst.op.name != "if":
            return
        parts = _predicate_parts(self.scopes[site], inst)
        if parts is None:
            return
        a, b, s = parts
        for side, other, sign in ((b, a, -s), (a, b, s)):
            name = self.inputs.get(id(values.get(side)))
            x = values.get(other)
            if name is not None and x is not None and x.numel() == 1:
                ob = self.obs.setdefault(site, Observation(name, sign, {},
                                                           None if "/" in site else other))
                ob.other.setdefault(self.index, []).append(float(x.detach().reshape(())))
                return


def run_traced(g: Graph, values: dict[str, np.ndarray], index: int = 0,
               observations: dict[str, Observation] | None = None
               ) -> tuple[Coverage, dict | None]:
    """Coverage of input set `index`, and its evaluated values (None when the set is
    invalid); steerable sites are added to `observations` when given."""
    env = {k: torch.from_numpy(np.array(v, order="C", copy=True)) for k, v in values.items()}
    tracer = _Tracer(g, env, index, observations if observations is not None else {})
    with torch.no_grad():
        out, violation = evaluate_checked(g, env, trace=tracer)
    return tracer.cov, (None if violation is not None else out)


#: the input search's effort per candidate set (set 0's search has the default, larger one)
REPAIR = SearchConfig(max_iters=12)


@dataclass(frozen=True)
class CoverConfig:
    #: input sets per test at most, set 0 included
    max_sets: int = 8
    #: candidate sets tried at most
    attempts: int = 24


def cover(g: Graph, values: dict[str, np.ndarray], seed: int,
          cfg: CoverConfig = CoverConfig()) -> tuple[list[dict[str, np.ndarray]], Coverage]:
    """Extra input sets for `g` (graph inputs only) beyond `values` (set 0, valid), and the
    coverage of all sets together. See the module doc for how candidates are made."""
    observations: dict[str, Observation] = {}
    total, env = run_traced(g, values, 0, observations)
    if not total.ops or env is None:
        return [], total
    rng = random.Random(f"cover/{seed}")
    inputs = [v.name for v in g.inputs]
    sets = [values]
    for attempt in range(cfg.attempts):
        if len(sets) >= cfg.max_sets or _complete(total):
            break
        made = _candidate(g, sets, total, observations, rng, seed * 1000 + attempt)
        if made is None:
            continue
        cand, steered, goal = made
        seen: dict[str, Observation] = {}
        cov, cand_env = run_traced(g, cand, len(sets), seen)
        if cand_env is None and steered is not None:
            # the other branch made something invalid: search the rest (the threshold and the
            # params stay; a top-level predicate is held on the wanted side), then see whether
            # the branch still flips
            res = search_inputs(g, seed * 1000 + attempt, start=cand, goal=goal, cfg=REPAIR,
                                frozen=frozenset([steered, *(p.name for p in g.params)]))
            if res.ok:
                cand = res.values
                seen = {}
                cov, cand_env = run_traced(g, cand, len(sets), seen)
        if cand_env is None or not total.gain(cov):
            continue
        total.merge(cov)
        for site, ob in seen.items():
            mine = observations.setdefault(site, Observation(ob.input, ob.sign, {}, ob.other_name))
            mine.other.update(ob.other)
        sets.append(cand)
    return [{k: s[k] for k in inputs} for s in sets[1:]], total


def _complete(cov: Coverage) -> bool:
    """Both branches of every if, and at least two trip counts of every loop (a scan's length
    is its sequence's: fixed)."""
    return not cov.missing_branches() and all(len(cov.trips.get(s, ())) >= 2
                                              for s in cov.loop_sites if cov.ops[s] == "loop")


def _candidate(g: Graph, sets: list[dict], total: Coverage, observations: dict[str, Observation],
               rng: random.Random, seed: int) -> tuple[dict[str, np.ndarray], str | None] | None:
    """A candidate input set, the input steered to make it (None: not steered), and a goal
    that keeps it steered while other inputs are repaired (None: none)."""
    steerable = [(s, k) for s, k in total.missing_branches()
                 if s in observations and observations[s].other]
    if steerable and rng.random() < 0.8:
        site, branch = rng.choice(steerable)
        ob = observations[site]
        cand, goal = _flip(sets, ob, want=(branch == 0))
        return cand, ob.input, goal
    loops = [s for s in total.loop_sites if s in observations and total.ops[s] == "loop"
             and len(total.trips.get(s, ())) < MAX_TRIPS + 1]
    if loops and rng.random() < 0.8:
        site = rng.choice(loops)
        unseen = [t for t in range(MAX_TRIPS + 1) if t not in total.trips.get(site, set())]
        cand = dict(sets[0])
        name = observations[site].input
        cand[name] = np.asarray(0 if 0 in unseen else rng.choice(unseen),
                                dtype=np.asarray(cand[name]).dtype)
        return cand, name, None
    # nothing targeted applies: fresh inputs, made valid by the search (params kept)
    fresh = dict(sets[0])
    nprng = np.random.default_rng(seed)
    r = ValueRanges()
    for v in g.inputs:
        fresh[v.name] = sample_value(v, nprng, r.input_scale, r.int_range)
    res = search_inputs(g, seed, start=fresh, frozen=frozenset(p.name for p in g.params),
                        explore=True, cfg=REPAIR)
    return (res.values, None, None) if res.ok else None


def _gap(x: float, is_float: bool) -> float:
    """A distance past a comparison's other side that no rounding can close."""
    return 0.25 + 0.25 * abs(x) if is_float else max(1, int(abs(x)) // 4 + 1)


def _flip(sets: list[dict], ob: Observation, want: bool):
    """The input set where the site ran, with its threshold moved past every value the other
    side took there, so that every run of the site takes the wanted branch; and for a top-level
    site, a search goal that keeps the other side on its side of the new threshold."""
    index = min(ob.other)  # the first set that ran the site
    xs = ob.other[index]
    cand = dict(sets[index])
    dtype = np.asarray(cand[ob.input]).dtype
    up = (ob.sign > 0) == want  # the threshold must exceed every x (else stay below all)
    x = max(xs) if up else min(xs)
    t = x + _gap(x, dtype.kind == "f") * (1 if up else -1)
    cand[ob.input] = np.asarray(t, dtype=dtype)
    if ob.other_name is None:
        return cand, None
    other, side = ob.other_name, (1 if up else -1)

    def goal(vals: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        d = (vals[ob.input] - vals[other]).reshape(()).to(torch.float64) * side
        margin = _gap(float(vals[other].detach().reshape(())), True) / 2
        return [torch.relu(margin - d)]

    return cand, goal
