"""Test-case reduction over GraphIR, in the style of Hypothesis's shrinker.

`reduce_graph(graph, values, predicate)` returns the smallest graph (and values) it can find for
which `predicate(graph, values)` still holds ("the test still fails the same way"). It runs named
*passes* (`ir.shrink.passes`) to a fixed point under an adaptive schedule (`ir.shrink.schedule`:
passes reordered by success, failure caps, a random order on a stall). A candidate is accepted
when it is strictly smaller in the total order `size_of` (`ir.shrink.size`: so reduction never
grows a graph), its canonical text is new (the `seen` set: nothing is evaluated twice),
`ir.core.verify` accepts it, inputs valid on the reference exist for it, and the predicate holds.

Values: a candidate's inputs and params start from the current values where name and type still
match (sliced when a shape shrank, cast when a dtype changed); a new input gets the value the
value it replaces had on the current inputs; everything is then made valid by
`ir.numerics.input_search.search_inputs` (which returns at once when the start is valid already).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ir.core.graph import Graph
from ir.core.types import TensorType
from ir.core.verify import verify
from ir.shrink.deadcode import dce
from ir.shrink.passes import PASSES, Candidate, PassFn
from ir.shrink.retype import retype, solve_shapes
from ir.shrink.schedule import Outcome, PassStats, Schedule
from ir.shrink.size import Size, numel, size_of

__all__ = ["PASSES", "Candidate", "PassFn", "PassStats", "Predicate", "ReduceConfig", "ReduceResult",
           "Reducer", "Size", "Step", "dce", "reduce_graph", "retype", "size_of", "solve_shapes"]

#: the predicate: does this graph, on these values (every input and param), still fail the
#: same way?
Predicate = Callable[[Graph, dict[str, np.ndarray]], bool]


@dataclass
class ReduceConfig:
    #: predicate calls at most (each compiles and runs a candidate on the backend)
    max_tests: int = 500
    #: wall-clock budget in seconds (checked between candidates)
    max_seconds: float = 600.0
    #: seed of the input searches and of the schedule's shuffles
    seed: int = 0
    #: passes to run, by name (see PASSES), in the order the schedule starts from
    passes: tuple[str, ...] = tuple(PASSES)
    #: gradient steps of the input search per candidate
    search_iters: int = 16
    #: failures in a row after which a pass is suspended for the round (`ir.shrink.schedule`)
    max_failures: int = 50


@dataclass
class Step:
    pass_name: str
    desc: str
    size: Size


@dataclass
class ReduceResult:
    graph: Graph
    values: dict[str, np.ndarray]
    original: Size
    size: Size
    steps: list[Step]
    tests: int
    seconds: float
    #: why it stopped: "fixed point", "max_tests", "max_seconds"
    stopped: str
    passes: dict[str, PassStats]

    def summary(self) -> dict[str, Any]:
        return {
            "original_insts": self.original.insts, "reduced_insts": self.size.insts,
            "original_elements": self.original.elements, "reduced_elements": self.size.elements,
            "tests": self.tests, "seconds": round(self.seconds, 2), "stopped": self.stopped,
            "steps": [{"pass": s.pass_name, "desc": s.desc, "insts": s.size.insts,
                       "elements": s.size.elements} for s in self.steps],
            "passes": {k: dataclasses.asdict(v) for k, v in self.passes.items() if v.candidates},
        }


class _Budget(Exception):
    pass


def _resized(old: np.ndarray, t: TensorType) -> np.ndarray | None:
    """`old` cut (or cast) to type `t` when it can be: same rank, no dim larger."""
    shape = tuple(int(d) for d in t.shape)
    if old.ndim == len(shape) and all(n <= o for n, o in zip(shape, old.shape, strict=True)):
        cut = old[tuple(slice(0, n) for n in shape)]
    elif old.size == numel(t):
        cut = old
    else:
        return None
    # (np.ascontiguousarray would make a 0-d array 1-d)
    return np.array(cut, dtype=t.dtype.numpy, order="C", copy=True).reshape(shape)


class Reducer:
    """One reduction: the current graph and values, the seen set, the budget, and what each
    pass did (`PassStats`: the summary's `passes`, which the triage logs). It runs a pass for
    the schedule (`run_pass`) and tells it how the run went (`Outcome`)."""

    def __init__(self, graph: Graph, values: dict[str, np.ndarray], predicate: Predicate,
                 cfg: ReduceConfig = ReduceConfig(), log: Callable[[str], None] | None = None):  # noqa: B008 (read, never written)
        self.graph = graph
        self.values = dict(values)
        self.predicate = predicate
        self.cfg = cfg
        self.log = log or (lambda s: None)
        self.size = size_of(graph)
        self.original = self.size
        self.seen: set[str] = {self.size.text}
        self.steps: list[Step] = []
        self.tests = 0
        self.stats = {name: PassStats() for name in cfg.passes}
        self.t0 = time.monotonic()
        self._env: tuple[Graph, dict[str, np.ndarray]] | None = None
        #: pass -> (the graph it was suspended on, its remaining candidates)
        self._suspended: dict[str, tuple[Graph, Iterator[Candidate]]] = {}

    # ---- values ----------------------------------------------------------------------------
    def env(self) -> dict[str, np.ndarray]:
        """Every top-level value of the current graph on the current values (cached)."""
        if self._env is not None and self._env[0] is self.graph:
            return self._env[1]
        import torch

        from ir.materialize.to_torch import evaluate_torch
        from ir.numerics.values import as_tensors

        try:
            with torch.no_grad():
                env = evaluate_torch(self.graph, as_tensors(self.values))
            out = {k: t.detach().numpy().copy() for k, t in env.items() if isinstance(t, torch.Tensor)}
        except Exception:
            out = dict(self.values)
        self._env = (self.graph, out)
        return out

    def start_values(self, g: Graph, extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Start values for every input and param of `g` (see the module doc)."""
        from ir.numerics.values import sample_value

        rng = np.random.default_rng(self.cfg.seed + self.tests)
        out = {}
        for v in (*g.inputs, *g.params):
            old = extra.get(v.name, self.values.get(v.name))
            arr = None
            if old is not None:
                old = np.asarray(old)
                if old.shape == tuple(v.type.shape) and old.dtype == v.type.dtype.numpy:
                    arr = old
                else:
                    arr = _resized(old, v.type)
            if arr is None:
                arr = sample_value(v, rng, 2.0 if v in g.inputs else 1.0, 4)
            out[v.name] = arr
        return out

    def valid_values(self, g: Graph, extra: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        from ir.numerics.input_search import SearchConfig, search_inputs

        start = self.start_values(g, extra)
        try:
            res = search_inputs(g, self.cfg.seed, start=start,
                                cfg=SearchConfig(max_iters=self.cfg.search_iters))
        except Exception:
            return None
        return res.values if res.ok else None

    # ---- one candidate ---------------------------------------------------------------------
    def consider(self, name: str, cand: Candidate) -> bool | None:
        """Accept `cand` if it passes every test (module doc): True; False when it was refused
        after costing a verification, an input search or a predicate call (a failure, for the
        schedule); None when it was refused at once (seen, or not smaller)."""
        st = self.stats[name]
        st.candidates += 1
        size = size_of(cand.graph)
        if size.text in self.seen:
            st.seen += 1
            return None
        self.seen.add(size.text)
        if not size < self.size:
            st.not_smaller += 1
            return None
        try:
            verify(cand.graph)
        except Exception:
            st.invalid += 1
            return False
        values = self.valid_values(cand.graph, cand.values)
        if values is None:
            st.no_inputs += 1
            return False
        self.check_budget()
        self.tests += 1
        st.tests += 1
        try:
            ok = bool(self.predicate(cand.graph, values))
        except Exception as e:  # a predicate that raises says "not interesting"
            self.log(f"predicate raised on a candidate: {type(e).__name__}: {e}")
            ok = False
        if not ok:
            return False
        st.accepted += 1
        self.graph, self.values, self.size = cand.graph, values, size
        self.steps.append(Step(name, cand.desc, size))
        self.log(f"{name}: {cand.desc} -> {size.brief()}")
        return True

    def check_budget(self) -> None:
        if self.tests >= self.cfg.max_tests:
            raise _Budget("max_tests")
        if time.monotonic() - self.t0 >= self.cfg.max_seconds:
            raise _Budget("max_seconds")

    # ---- the loop --------------------------------------------------------------------------
    def run_pass(self, name: str, max_failures: int) -> Outcome:
        """Run one pass until it is exhausted on the current graph, or suspend it after
        `max_failures` failures in a row (its remaining candidates kept for the next run on
        the same graph)."""
        fn: PassFn = PASSES[name]
        start_insts = self.size.insts
        progress = False
        failures = 0
        held = self._suspended.pop(name, None)
        cands = held[1] if held is not None and held[0] is self.graph else fn(self, self.graph)
        while True:
            self.check_budget()
            for cand in cands:
                verdict = self.consider(name, cand)
                if verdict:
                    progress = True
                    failures = 0
                    break
                if verdict is False:
                    failures += 1
                    if failures >= max_failures:
                        self._suspended[name] = (self.graph, cands)
                        self.stats[name].suspended += 1
                        return Outcome(progress, self.size.insts < start_insts, True)
                self.check_budget()
            else:
                return Outcome(progress, self.size.insts < start_insts, False)
            cands = fn(self, self.graph)

    def run(self) -> ReduceResult:
        stopped = "fixed point"
        try:
            Schedule(self.cfg.passes, self.cfg.seed, self.cfg.max_failures).run(self.run_pass)
        except _Budget as b:
            stopped = str(b)
        return ReduceResult(self.graph, self.values, self.original, self.size, self.steps,
                            self.tests, time.monotonic() - self.t0, stopped, self.stats)


def reduce_graph(graph: Graph, values: dict[str, np.ndarray], predicate: Predicate,
                 cfg: ReduceConfig = ReduceConfig(),  # noqa: B008 (read, never written)
                 log: Callable[[str], None] | None = None) -> ReduceResult:
    """Reduce `graph` (on `values`, every input and param) while `predicate` holds; see the
    module doc. The predicate is assumed to hold on the original (not re-checked here)."""
    return Reducer(graph, values, predicate, cfg, log).run()
