"""Control-flow coverage of a test's input sets, and the search for input sets that raise it.

A *site* is one control-flow instruction anywhere in a graph, named by its path: "3" is
top-level instruction 3, "3/1/0" instruction 0 of body 1 (an if's else) of instruction 3. Running
an input set through `ir.domain.evaluate_checked` with a trace tells, per site, which bodies ran:
an `if` took branch 0 (then) or 1 (else); a `loop`/`scan` ran its body n times (its trip count).

`cover` adds input sets (graph inputs only; params are the model's weights, shared by every set)
until every `if` has taken both branches and every loop has run a new trip count (zero where
legal), or the attempt budget is spent. Each candidate set must be valid by the same check as
set 0 and is kept only if it adds coverage. Ways to a new set, cheapest first:
  - trip counts: a loop whose trip count is a graph input gets an unseen count (0 first);
  - a top-level `if` whose predicate is a comparison `a > b` (>=, <, <=) with one side a scalar
    graph input: that side is set past the other by a clear gap (no near-tie);
  - the same with no input side, on floats: gradient descent on the gap (`search_inputs` with a
    goal, params frozen);
  - anything else (ifs in bodies): fresh random inputs, repaired by the input search.
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


def run_traced(g: Graph, values: dict[str, np.ndarray]) -> tuple[Coverage, dict | None]:
    """Coverage of one input set, and its evaluated values (None when the set is invalid)."""
    cov = Coverage.of(g)
    cov.n_sets = 1
    env = {k: torch.from_numpy(np.array(v, order="C", copy=True)) for k, v in values.items()}
    with torch.no_grad():
        out, violation = evaluate_checked(g, env, trace=cov.record)
    return cov, (None if violation is not None else out)


@dataclass(frozen=True)
class CoverConfig:
    #: input sets per test at most, set 0 included
    max_sets: int = 4
    #: candidate sets tried at most
    attempts: int = 10


def cover(g: Graph, values: dict[str, np.ndarray], seed: int,
          cfg: CoverConfig = CoverConfig()) -> tuple[list[dict[str, np.ndarray]], Coverage]:
    """Extra input sets for `g` (graph inputs only) beyond `values` (set 0, valid), and the
    coverage of all sets together. See the module doc for how candidates are made."""
    total, env = run_traced(g, values)
    if not total.ops or env is None:
        return [], total
    rng = random.Random(f"cover/{seed}")
    inputs = {v.name for v in g.inputs}
    defs = {r.name: inst for inst in g.insts for r in inst.results}
    extra: list[dict[str, np.ndarray]] = []
    for attempt in range(cfg.attempts):
        if len(extra) + 1 >= cfg.max_sets or _complete(total):
            break
        cand = _candidate(g, values, env, total, defs, inputs, rng, seed * 1000 + attempt)
        if cand is None:
            continue
        cov, cand_env = run_traced(g, cand)
        if cand_env is None or not total.gain(cov):
            continue
        total.merge(cov)
        extra.append({k: cand[k] for k in inputs})
    return extra, total


def _complete(cov: Coverage) -> bool:
    """Both branches of every if, and at least two trip counts of every loop."""
    return not cov.missing_branches() and all(len(cov.trips.get(s, ())) >= 2
                                              for s in cov.loop_sites)


def _candidate(g: Graph, values, env, total: Coverage, defs, inputs, rng: random.Random,
               seed: int) -> dict[str, np.ndarray] | None:
    missing = [(s, k) for s, k in total.missing_branches() if "/" not in s]
    if missing and rng.random() < 0.75:
        site, branch = rng.choice(missing)
        steered = _steer(g, values, env, g.insts[int(site)], want=(branch == 0), defs=defs,
                         inputs=inputs, seed=seed)
        if steered is not None:
            return steered
    cand = dict(values)
    if _new_trip_counts(g, cand, total, inputs, rng):
        return cand
    # nothing targeted applies: fresh inputs, made valid by the search (params kept)
    fresh = dict(values)
    nprng = np.random.default_rng(seed)
    r = ValueRanges()
    for v in g.inputs:
        fresh[v.name] = sample_value(v, nprng, r.input_scale, r.int_range)
    _new_trip_counts(g, fresh, total, inputs, rng)
    res = search_inputs(g, seed, start=fresh, frozen=frozenset(p.name for p in g.params),
                        explore=True)
    return res.values if res.ok else None


def _new_trip_counts(g: Graph, cand: dict, total: Coverage, inputs: set[str],
                     rng: random.Random) -> bool:
    """Give every top-level loop whose trip count is a graph input a count not seen yet."""
    changed = False
    for i, inst in enumerate(g.insts):
        if inst.op.name != "loop" or inst.args[0] not in inputs:
            continue
        seen = total.trips.get(str(i), set())
        unseen = [t for t in range(MAX_TRIPS + 1) if t not in seen]
        if not unseen:
            continue
        trip = 0 if 0 in unseen else rng.choice(unseen)
        cand[inst.args[0]] = np.asarray(trip, dtype=np.asarray(cand[inst.args[0]]).dtype)
        changed = True
    return changed


def _gap(x: float, is_float: bool) -> float:
    """A distance past a comparison's other side that no rounding can close."""
    return 0.25 + 0.25 * abs(x) if is_float else max(1, int(abs(x)) // 4 + 1)


def _steer(g: Graph, cand: dict, env: dict, inst: Inst, want: bool, defs: dict,
           inputs: set[str], seed: int) -> dict[str, np.ndarray] | None:
    """`cand` changed so that the `if` `inst` takes branch then (`want`) or else, or None when
    its predicate is not a comparison this can steer."""
    pred = defs.get(inst.args[0])
    if pred is None or pred.op.name not in COMPARISONS:
        return None
    sign = COMPARISONS[pred.op.name] * (1 if want else -1)  # want (a - b) * sign > 0
    a, b = pred.args
    for side, other, s in ((b, a, -sign), (a, b, sign)):
        if side in inputs and np.asarray(cand[side]).ndim == 0 and env[other].numel() == 1:
            x = float(env[other].reshape(()))
            dtype = np.asarray(cand[side]).dtype
            out = dict(cand)
            out[side] = np.asarray(x + s * _gap(x, dtype.kind == "f"), dtype=dtype)
            return out
    if not (env[a].dtype.is_floating_point and env[a].numel() == 1 and env[b].numel() == 1):
        return None

    def goal(vals: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        d = (vals[a] - vals[b]).reshape(()) * sign
        return [torch.relu(_gap(float(vals[b].detach().reshape(())), True) - d)]

    res = search_inputs(g, seed, start=cand, goal=goal, cfg=SearchConfig(max_iters=16),
                        frozen=frozenset(p.name for p in g.params), explore=True)
    return res.values if res.ok else None
