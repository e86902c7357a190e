"""Reducing one finding: load its folder, confirm it still fails, reduce its graph with
`ir.shrink.reducer` and its compiler configuration with `ir.shrink.options` under the predicate
"same bucket", and keep what the last failing run produced.

The finding is re-run in the configuration it ran in (its `backend_config`: the backend spec
`with_config(backend, backend_config)`, which never draws another). The configuration is
reduced first on the finding's graph (options back to their defaults while the failure stays),
then the graph under the options left, then the options again on the reduced graph; should that
drop one more, the graph again, and so on until neither changes (or the budget is spent). The
graph reducer's and the option reducer's steps go in one log (`Reduction.summary["steps"]`).

The predicate re-evaluates each candidate exactly as the campaign judges a test: a
`FuzzWorker` configured with the one backend runs `run_case` (reference, the backend in its
sandbox process, so crashes and hangs are safe, the oracle with the float64 shadow). A crash
candidate must give the same (verdict, stage, normalized signature); a mismatch candidate
must still be a mismatch (confirmed by the shadow: an ill-conditioned candidate is `invalid`,
never accepted). Candidates run on one input set: the one that failed when that alone
reproduces the finding, else every set (extra sets follow a candidate while its inputs keep
their names and types).

A gradient test stays one (docs/training.md): every candidate is run in grad mode, with the
finding's leaves and cotangents refitted to it (`ir.numerics.grad.refit_grad`: the leaves it
still has, the cotangents of the outputs it keeps, fresh ones for changed outputs); a
candidate left without a leaf is rejected. A transform test stays one too, under the same
transform (`ir.materialize.transforms.refit_transform`), on all its input sets (its results
are those of set 0, or of vmap's samples); a candidate that can no longer be one is rejected.

Two kinds of finding are confirmed (re-run as they are) and never reduced (`Reduction` status
`confirmed`, its note why): a dynamic-shape test (its symbolic dims would have to follow every
candidate) and a cache test (`campaign.modes.cache`: its near-twin, rebuilt from the finding
folder, was drawn for its graph; a candidate compiled after it would no longer be compiled
after its own near-twin).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from campaign.triage.pipeline.buckets import BucketKey, bucket_signature, crash_key
from ir.core.graph import Graph


@dataclass
class FindingCase:
    """A finding folder, loaded."""

    folder: Path
    info: dict[str, Any]
    graph: Graph
    #: set 0: every input and param
    values: dict[str, np.ndarray]
    #: sets 1..: graph inputs only
    extra_sets: list[dict[str, np.ndarray]]
    #: a gradient test's leaves and cotangents (`grad.json`, `cotangents.npz`), else None
    grad: Any = None
    #: a transform test's spec (`transform.json`, `transform.npz`), else None
    transform: Any = None
    #: a dynamic-shape test's symbolic dims and shape sets (`dynshape.json`,
    #: `ir.materialize.dynshape.DynShape`; its sets hold inputs of other shapes), else None:
    #: such a finding is re-run and reproduced as it is, never reduced
    dynshape: Any = None
    #: a cache test's near-twin (`cache_twin.json`, `twin.gir`, `twin_inputs.npz`:
    #: `campaign.modes.cache.CacheSpec`), else None: such a finding is re-run as a cache
    #: test (the twin, then the test warm and cold) and reproduced as it is, never reduced
    cache: Any = None

    @property
    def backend(self) -> str:
        """The backend spec the campaign ran (without the drawn configuration)."""
        return self.info["backend"]

    @property
    def config(self) -> str:
        """The configuration the finding ran in (`campaign.backends.configs.config_text`)."""
        return str(self.info.get("backend_config") or "")

    @property
    def spec(self) -> str:
        """The backend spec of the very compiler that failed."""
        from campaign.backends.configs import with_config

        return with_config(self.backend, self.config)

    @property
    def seed(self) -> int:
        return int(self.info.get("seed") or 0)

    @property
    def test_id(self) -> str:
        return str(self.info.get("test_id") or self.folder.name)

    @property
    def verdict(self) -> str:
        return self.info["verdict"]

    def key(self) -> BucketKey:
        return crash_key(self.info)


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def load_finding(folder: Path) -> FindingCase | None:
    """The finding in `folder`; None when it has no graph (e.g. a worker death's info only) or
    cannot be read. A dynamic-shape test (`dynshape.json`) loads with its `DynShape`, a cache
    test (`cache_twin.json`) with its near-twin (`CacheSpec.from_files`)."""
    from ir.core.text import load

    folder = Path(folder)
    info_path = folder / "info.json"
    if not (folder / "graph.gir").is_file() or not (folder / "inputs.npz").is_file():
        return None
    try:
        info = json.loads(info_path.read_text()) if info_path.is_file() else {}
        graph = load(folder / "graph.gir")
        values = _npz(folder / "inputs.npz")
        dynshape = None
        if (folder / "dynshape.json").is_file():
            from ir.materialize.dynshape import DynShape

            dynshape = DynShape.from_json(json.loads((folder / "dynshape.json").read_text()))
        extra = []
        k = 1
        while (folder / f"inputs_set{k}.npz").is_file():
            extra.append(_npz(folder / f"inputs_set{k}.npz"))
            k += 1
        grad = None
        if (folder / "grad.json").is_file():
            from ir.materialize.grad import GradSpec

            grad = GradSpec.from_files((folder / "grad.json").read_bytes(),
                                       (folder / "cotangents.npz").read_bytes())
        transform = None
        if (folder / "transform.json").is_file():
            from ir.materialize.transforms import TransformSpec

            transform = TransformSpec.from_files((folder / "transform.json").read_bytes(),
                                                 (folder / "transform.npz").read_bytes())
        from campaign.modes.cache import (
            CACHE_TWIN_FILE,
            TWIN_GRAPH_FILE,
            TWIN_VALUES_FILE,
            CacheSpec,
        )

        cache = None
        if (folder / CACHE_TWIN_FILE).is_file():  # a cache test: its near-twin
            cache = CacheSpec.from_files(
                {n: (folder / n).read_bytes() for n in
                 (CACHE_TWIN_FILE, TWIN_GRAPH_FILE, TWIN_VALUES_FILE) if (folder / n).is_file()},
                graph)
    except Exception:  # unreadable artifacts: bucketed, not reduced
        return None
    return FindingCase(folder, info, graph, values, extra, grad, transform, dynshape, cache)


def same_failure(expect: dict[str, Any], row: dict[str, Any]) -> bool:
    """Does a result row fail like `expect` (a finding's info or row)?"""
    if row.get("verdict") != expect.get("verdict"):
        return False
    if expect["verdict"] == "mismatch":
        return True
    v = expect["verdict"]
    return (row.get("stage") == expect.get("stage")
            and bucket_signature(v, row.get("error_sig")) == bucket_signature(v, expect.get("error_sig")))


def confirmed_limit(info: dict[str, Any], default: float) -> float:
    """The per-test limit (seconds) a timeout finding was confirmed at: its confirming
    re-run's (`confirm_limit_s`), else the limit it ran past (`timeout_limit_s`: the campaign
    did not re-run it), else `default` (findings from before these columns)."""
    for k in ("confirm_limit_s", "timeout_limit_s"):
        v = info.get(k)
        if v:
            return float(v)
    return float(default)


#: the shortest limit a deadline cuts an evaluation's to
MIN_LIMIT_S = 2.0


class BackendRunner:
    """Evaluates test cases on one backend as the campaign does (`FuzzWorker.run_case`, the
    backend in a sandbox process). Reused across reductions; `close()` stops the sandboxes.

    `spec` is the backend as the campaign names it; each evaluation names the configuration to
    run it in (`config`, '' for the spec's own), and gets a worker of its own for the spec
    `with_config(spec, config)`, which runs exactly that configuration (its options are
    written in the spec, so none is drawn). `drop(config)` stops one configuration's sandbox
    (the option reducer drops the ones it rejected).

    One attempt per evaluation, at `timeout_s` (no confirming re-run, unlike the campaign's
    sandboxes): the triage runs alone after the campaign, and re-runs a timeout finding at the
    limit the campaign confirmed it at, so its first attempt already is a confirmation."""

    def __init__(self, spec: str, timeout_s: float = 60.0, sandbox: bool = True,
                 confirm_timeout_factor: float = 0.0):
        self.spec = spec
        self.timeout_s = timeout_s
        self.sandbox = sandbox
        self.confirm_timeout_factor = confirm_timeout_factor
        #: configuration text -> the worker running it
        self.workers: dict[str, Any] = {}
        self.calls = 0
        #: monotonic time no evaluation may run past (a campaign's wall-clock budget): each
        #: one's limit is cut to the time left, at least `MIN_LIMIT_S`; None: no deadline
        self.deadline: float | None = None
        self.worker_for("")  # a bad spec fails here, as it always did

    def worker_for(self, config: str) -> Any:
        """The `FuzzWorker` of configuration `config` (made on first use)."""
        if config not in self.workers:
            from campaign.backends.configs import with_config
            from campaign.sandbox import SandboxConfig
            from campaign.worker import FuzzWorker, WorkerConfig

            limits = SandboxConfig(timeout_s=self.timeout_s,
                                   confirm_timeout_factor=self.confirm_timeout_factor)
            self.workers[config] = FuzzWorker(
                WorkerConfig(backends=[with_config(self.spec, config)], sandbox=self.sandbox,
                             limits=limits), name="triage")
        return self.workers[config]

    @property
    def worker(self) -> Any:
        """The worker of the spec's own configuration."""
        return self.worker_for("")

    def run(self, test_id: str, seed: int, graph: Graph, values: dict[str, np.ndarray],
            extra_sets: Sequence[dict[str, np.ndarray]] = (), config: str = "",
            grad: Any = None, transform: Any = None, drawn_for: Graph | None = None,
            dynshape: Any = None, keep_leaves: bool = False, cache: Any = None
            ) -> tuple[dict[str, Any], Any, Any]:
        """(row, finding or None, test case) of one evaluation in configuration `config`;
        `grad`: a gradient test's spec (`GradSpec`, refitted to `graph`; the row of a graph
        left without a leaf is `invalid`; `keep_leaves`: no leaf is let go for lack of an output
        depending on it, `ir.numerics.grad.refit_grad`); `transform`: a transform test's spec
        (`TransformSpec`, drawn for the graph `drawn_for`, refitted to `graph`; invalid when
        the graph can no longer be such a test); `dynshape`: a dynamic-shape test's `DynShape`
        (`extra_sets` then hold inputs of its other shapes); `cache`: a cache test's near-twin
        (`CacheSpec`, drawn for `drawn_for`: the run compiles it first, then the test warm and
        cold; invalid for another graph when the twin holds a graph of its own)."""
        from campaign.testcase import TestCase

        worker = self.worker_for(config)
        self.calls += 1
        tc = TestCase(test_id, seed, graph, dict(values), [{"seed": seed}], list(extra_sets),
                      dynshape=dynshape)
        from campaign.modes import MODES

        specs = {"grad": grad, "transform": transform, "cache": cache}
        for mode in MODES.values():  # each mode's spec refitted to the candidate (`TestMode.refit`)
            spec = specs.get(mode.spec_field or "")
            problem = (mode.refit(tc, spec, drawn_for or graph, seed, keep_leaves)
                       if spec is not None else None)
            if problem:
                return {"verdict": "invalid", "error_sig": problem}, None, tc
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            for sb in worker.sandboxes.values():
                sb.cfg.timeout_s = min(self.timeout_s, max(MIN_LIMIT_S, left))
        report = worker.run_case(tc)
        row = report.rows[0]
        finding = report.findings[0] if report.findings else None
        return row, finding, tc

    def drop(self, config: str) -> None:
        """Stop configuration `config`'s worker (the spec's own is kept)."""
        if config and config in self.workers:
            self.workers.pop(config).close()

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self.workers.clear()


def _sets_for(g: Graph, extra_sets: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """The extra input sets that still fit `g` (every input present with its type)."""
    out = []
    for s in extra_sets:
        if all(v.name in s and s[v.name].shape == tuple(v.type.shape)
               and s[v.name].dtype == v.type.dtype.numpy for v in g.inputs):
            out.append({v.name: s[v.name] for v in g.inputs})
    return out


@dataclass
class Reduction:
    """A finding's reduction (or its re-run, or its absence): the graph, values and
    configuration that represent it. Unless `status` is "reduced" (or "cached"), `graph` is
    the finding's own and `config` None."""

    case: FindingCase
    #: "reduced", "not reproducible" (the original no longer fails the same way), "error",
    #: "confirmed" (re-run, not reduced), "not reduced", "cached" (an earlier triage's)
    status: str
    graph: Graph
    values: dict[str, np.ndarray]
    extra_sets: list[dict[str, np.ndarray]]
    #: the last failing evaluation: its row, its finding's files, its test case
    row: dict[str, Any] | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    tc: Any = None
    summary: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    #: the reduced configuration (config text); None: the finding's own (`case.config`)
    config: str | None = None
    #: a cached reduction's bug folder, loaded: the reduced test's own gradient, transform
    #: and dynamic-shape specs (`tc` is None: no run here)
    folder_case: FindingCase | None = None

    @property
    def backend_config(self) -> str:
        """The configuration this reduction's graph fails in."""
        return self.case.config if self.config is None else self.config

    @property
    def spec(self) -> str:
        """The backend spec of the compiler this reduction's graph fails on."""
        from campaign.backends.configs import with_config

        return with_config(self.case.backend, self.backend_config)

    @property
    def original_insts(self) -> int:
        return self.case.graph.num_insts()

    @property
    def reduced_insts(self) -> int:
        return self.graph.num_insts()


def reduce_finding(case: FindingCase, runner: BackendRunner, max_tests: int = 300,
                   max_seconds: float = 300.0, log: Callable[[str], None] | None = None
                   ) -> Reduction:
    """Confirm, then reduce one finding (graph and configuration) on `runner`'s backend (see
    the module doc). `max_tests` and `max_seconds` bound both reducers together."""
    log = log or (lambda s: None)
    expect = dict(case.info)
    config = case.config
    row, finding, tc = runner.run(case.test_id, case.seed, case.graph, case.values,
                                  case.extra_sets, config=config, grad=case.grad,
                                  transform=case.transform, drawn_for=case.graph,
                                  dynshape=case.dynshape, cache=case.cache)
    if not same_failure(expect, row):
        return Reduction(case, "not reproducible", case.graph, case.values, case.extra_sets,
                         row, note=f"re-run gave {row.get('verdict')}: {row.get('error_sig')}")
    # a dynamic-shape test's symbolic dims would have to follow every candidate, a cache
    # test's near-twin was drawn for this graph (`TestMode.unreduced`)
    unreduced = tc.shapes.unreduced or tc.mode.unreduced
    if unreduced:
        return Reduction(case, "confirmed", case.graph, case.values, case.extra_sets, row,
                         dict(finding.files) if finding is not None else {}, tc,
                         note=unreduced)
    best = {"row": row, "finding": finding, "tc": tc}
    # one input set when that alone fails the same way: the failing one first
    sets = [case.values] + [{**case.values, **s} for s in case.extra_sets]
    first = expect.get("mismatch_input_set") or 0
    order = [first] + [k for k in range(len(sets)) if k != first] if len(sets) > 1 else []
    if not tc.mode.per_set:  # a transform's results are of set 0 (vmap: of its samples)
        order = []
    values, extra = case.values, list(case.extra_sets)
    grad = case.grad
    deadline = runner.deadline
    for k in order:
        if deadline is not None and time.monotonic() >= deadline:
            break
        grad_k = case.grad.of_sets([k]) if case.grad is not None else None
        r, f, t = runner.run(case.test_id, case.seed, case.graph, sets[k], [], config=config,
                             grad=grad_k)
        if same_failure(expect, r):
            values, extra = sets[k], []
            best = {"row": r, "finding": f, "tc": t}
            grad = grad_k
            break
    if deadline is not None:
        max_seconds = min(max_seconds, deadline - time.monotonic())
        if max_seconds <= 0:  # confirmed, but no time is left to reduce it
            files = finding.files if finding is not None else {}
            return Reduction(case, "confirmed", case.graph, case.values, list(case.extra_sets),
                             row, files, tc, note="no time left to reduce it")
    red = _Reducing(case, runner, expect, best, extra, max_tests, max_seconds, log, grad)
    graph, values = red.run(case.graph, values, config)
    t = red.best["tc"]
    files = red.best["finding"].files if red.best["finding"] is not None else {}
    return Reduction(case, "reduced", graph, values, list(t.extra_inputs), red.best["row"],
                     files, t, red.summary(case.graph, graph), config=red.config)


class _Reducing:
    """The alternation of the option reducer and the graph reducer on one confirmed finding
    (module doc), within one budget of candidate tests and seconds; `best` holds the last
    failing evaluation (row, finding, test case)."""

    def __init__(self, case: FindingCase, runner: BackendRunner, expect: dict[str, Any],
                 best: dict[str, Any], extra: list[dict[str, np.ndarray]], max_tests: int,
                 max_seconds: float, log: Callable[[str], None], grad: Any = None):
        self.case, self.runner, self.expect, self.best = case, runner, expect, best
        #: a gradient test's spec, for the input sets the reduction runs
        self.grad = grad
        self.extra = extra
        self.max_tests, self.max_seconds = max_tests, max_seconds
        self.log = log
        self.t0 = time.monotonic()
        self.tests = 0  #: candidates evaluated, both reducers
        self.config = case.config
        #: the log: graph steps and option steps, in the order they were accepted
        self.steps: list[dict[str, Any]] = []
        self.graph_runs: list[dict[str, Any]] = []
        self.option_runs: list[dict[str, Any]] = []
        self.stopped = "fixed point"

    def left(self) -> tuple[int, float]:
        return self.max_tests - self.tests, self.max_seconds - (time.monotonic() - self.t0)

    def evaluate(self, g: Graph, vals: dict[str, np.ndarray], config: str) -> bool:
        """Does `g` on `vals` in `config` fail the same way? (keeps the evaluation if so)"""
        r, f, t = self.runner.run(f"{self.case.test_id}-r{self.runner.calls + 1}",
                                  self.case.seed, g, vals, _sets_for(g, self.extra),
                                  config=config, grad=self.grad,
                                  transform=self.case.transform, drawn_for=self.case.graph)
        ok = same_failure(self.expect, r)
        if ok:
            self.best.update(row=r, finding=f, tc=t)
        return ok

    def options(self, g: Graph, vals: dict[str, np.ndarray]) -> bool:
        """Reduce the configuration on (g, vals); True if it dropped any option."""
        from campaign.backends.configs import config_text, parse_config
        from ir.shrink.options import reduce_options

        tests, seconds = self.left()
        if not self.config or tests <= 0 or seconds <= 0:
            return False

        def predicate(opts: dict[str, Any]) -> bool:
            text = config_text(opts)
            ok = self.evaluate(g, vals, text)
            if not ok:
                self.runner.drop(text)  # a rejected configuration's sandbox is not needed again
            return ok

        res = reduce_options(parse_config(self.config), predicate, tests, seconds, self.log)
        self.tests += res.tests
        self.config = config_text(res.options)
        for other in list(self.runner.workers):  # only the current one runs again
            if other != self.config:
                self.runner.drop(other)
        self.option_runs.append(res.summary())
        self.steps += [{"pass": s.pass_name, "desc": s.desc(), "config": config_text(
            {k: v for k, v in res.original.items() if k in s.left})} for s in res.steps]
        if res.stopped != "fixed point":
            self.stopped = res.stopped
        return bool(res.steps)

    def graph(self, g: Graph, vals: dict[str, np.ndarray]
              ) -> tuple[Graph, dict[str, np.ndarray], bool]:
        """Reduce the graph in the current configuration; (graph, values, changed)."""
        from ir.shrink.reducer import ReduceConfig, reduce_graph

        tests, seconds = self.left()
        if tests <= 0 or seconds <= 0:
            self.stopped = "max_tests" if tests <= 0 else "max_seconds"
            return g, vals, False
        config = self.config
        res = reduce_graph(g, vals, lambda cand, v: self.evaluate(cand, v, config),
                           ReduceConfig(max_tests=tests, max_seconds=seconds,
                                        seed=self.case.seed), log=self.log)
        self.tests += res.tests
        summary = res.summary()
        self.graph_runs.append(summary)
        self.steps += summary["steps"]
        if res.stopped != "fixed point":
            self.stopped = res.stopped
        return res.graph, res.values, bool(res.steps)

    def run(self, g: Graph, vals: dict[str, np.ndarray], config: str
            ) -> tuple[Graph, dict[str, np.ndarray]]:
        """Options, graph, options, ... until a round changes nothing (module doc)."""
        self.options(g, vals)
        while True:
            g, vals, _ = self.graph(g, vals)
            if self.stopped != "fixed point" or not self.options(g, vals):
                return g, vals

    def summary(self, original: Graph, reduced: Graph) -> dict[str, Any]:
        """The reduction's log: the graph reducer's summary fields (its last run's, tests and
        seconds over both reducers), the steps of both, and `config` (original, reduced, the
        option reducer's tests)."""
        from ir.shrink.reducer import size_of

        a, b = size_of(original), size_of(reduced)
        passes: dict[str, dict[str, int]] = {}
        for run in self.graph_runs:
            for name, st in run["passes"].items():
                acc = passes.setdefault(name, dict.fromkeys(st, 0))
                for k, v in st.items():
                    acc[k] += v
        return {
            "original_insts": a.insts, "reduced_insts": b.insts,
            "original_elements": a.elements, "reduced_elements": b.elements,
            "tests": self.tests, "seconds": round(time.monotonic() - self.t0, 2),
            "stopped": self.stopped, "steps": self.steps, "passes": passes,
            "config": {"original": self.case.config, "reduced": self.config,
                       "tests": sum(r["tests"] for r in self.option_runs)},
        }
