"""Reducing one finding: load its folder, confirm it still fails, reduce it with
`ir.shrink.reducer` under the predicate "same bucket", and keep what the last failing run produced.

The predicate re-evaluates each candidate exactly as the campaign judges a test: a
`FuzzWorker` configured with the one backend runs `run_case` (reference, the backend in its
sandbox process, so crashes and hangs are safe, the oracle with the float64 shadow). A crash
candidate must give the same (verdict, stage, normalized signature); a mismatch candidate
must still be a mismatch (confirmed by the shadow: an ill-conditioned candidate is `invalid`,
never accepted). Candidates run on one input set: the one that failed when that alone
reproduces the finding, else every set (extra sets follow a candidate while its inputs keep
their names and types).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from campaign.triage.buckets import BucketKey, bucket_signature, crash_key
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

    @property
    def backend(self) -> str:
        return self.info["backend"]

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
    """The finding in `folder`; None when it has no graph (e.g. a worker death's info only),
    cannot be read, or is a dynamic-shape test (`dynshape.json`: inputs of several shapes)."""
    from ir.core.text import load

    folder = Path(folder)
    info_path = folder / "info.json"
    if not (folder / "graph.gir").is_file() or not (folder / "inputs.npz").is_file():
        return None
    if (folder / "dynshape.json").is_file():
        return None  # a dynamic-shape test (one graph, inputs of several shapes): not reduced
    try:
        info = json.loads(info_path.read_text()) if info_path.is_file() else {}
        graph = load(folder / "graph.gir")
        values = _npz(folder / "inputs.npz")
        extra = []
        k = 1
        while (folder / f"inputs_set{k}.npz").is_file():
            extra.append(_npz(folder / f"inputs_set{k}.npz"))
            k += 1
    except Exception:  # unreadable artifacts: bucketed, not reduced
        return None
    return FindingCase(folder, info, graph, values, extra)


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
    backend in a sandbox process). Reused across reductions; `close()` stops the sandbox.

    One attempt per evaluation, at `timeout_s` (no confirming re-run, unlike the campaign's
    sandboxes): the triage runs alone after the campaign, and re-runs a timeout finding at the
    limit the campaign confirmed it at, so its first attempt already is a confirmation."""

    def __init__(self, spec: str, timeout_s: float = 60.0, sandbox: bool = True,
                 confirm_timeout_factor: float = 0.0):
        from campaign.sandbox import SandboxConfig
        from campaign.worker import FuzzWorker, WorkerConfig

        self.spec = spec
        self.timeout_s = timeout_s
        limits = SandboxConfig(timeout_s=timeout_s, confirm_timeout_factor=confirm_timeout_factor)
        self.worker = FuzzWorker(WorkerConfig(backends=[spec], sandbox=sandbox, limits=limits),
                                 name="triage")
        self.calls = 0
        #: monotonic time no evaluation may run past (a campaign's wall-clock budget): each
        #: one's limit is cut to the time left, at least `MIN_LIMIT_S`; None: no deadline
        self.deadline: float | None = None

    def run(self, test_id: str, seed: int, graph: Graph, values: dict[str, np.ndarray],
            extra_sets: Sequence[dict[str, np.ndarray]] = ()) -> tuple[dict[str, Any], Any, Any]:
        """(row, finding or None, test case) of one evaluation."""
        from campaign.testcase import TestCase

        self.calls += 1
        tc = TestCase(test_id, seed, graph, dict(values), [{"seed": seed}], list(extra_sets))
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            for sb in self.worker.sandboxes.values():
                sb.cfg.timeout_s = min(self.timeout_s, max(MIN_LIMIT_S, left))
        report = self.worker.run_case(tc)
        row = report.rows[0]
        finding = report.findings[0] if report.findings else None
        return row, finding, tc

    def close(self) -> None:
        self.worker.close()


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
    case: FindingCase
    #: "reduced", "not reproducible" (the original no longer fails the same way), "error"
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

    @property
    def original_insts(self) -> int:
        return self.case.graph.num_insts()

    @property
    def reduced_insts(self) -> int:
        return self.graph.num_insts()


def reduce_finding(case: FindingCase, runner: BackendRunner, max_tests: int = 300,
                   max_seconds: float = 300.0, log: Callable[[str], None] | None = None
                   ) -> Reduction:
    """Confirm, then reduce one finding on `runner`'s backend (see the module doc)."""
    from ir.shrink.reducer import ReduceConfig, reduce_graph

    log = log or (lambda s: None)
    expect = dict(case.info)
    row, finding, tc = runner.run(case.test_id, case.seed, case.graph, case.values,
                                  case.extra_sets)
    if not same_failure(expect, row):
        return Reduction(case, "not reproducible", case.graph, case.values, case.extra_sets,
                         row, note=f"re-run gave {row.get('verdict')}: {row.get('error_sig')}")
    best = {"row": row, "finding": finding, "tc": tc}
    # one input set when that alone fails the same way: the failing one first
    sets = [case.values] + [{**case.values, **s} for s in case.extra_sets]
    first = expect.get("mismatch_input_set") or 0
    order = [first] + [k for k in range(len(sets)) if k != first] if len(sets) > 1 else []
    values, extra = case.values, list(case.extra_sets)
    deadline = runner.deadline
    for k in order:
        if deadline is not None and time.monotonic() >= deadline:
            break
        r, f, t = runner.run(case.test_id, case.seed, case.graph, sets[k], [])
        if same_failure(expect, r):
            values, extra = sets[k], []
            best = {"row": r, "finding": f, "tc": t}
            break
    counter = [0]

    def predicate(g: Graph, vals: dict[str, np.ndarray]) -> bool:
        counter[0] += 1
        r, f, t = runner.run(f"{case.test_id}-r{counter[0]}", case.seed, g, vals,
                             _sets_for(g, extra))
        ok = same_failure(expect, r)
        if ok:
            best.update(row=r, finding=f, tc=t)
        return ok

    if deadline is not None:
        max_seconds = min(max_seconds, deadline - time.monotonic())
        if max_seconds <= 0:  # confirmed, but no time is left to reduce it
            files = finding.files if finding is not None else {}
            return Reduction(case, "confirmed", case.graph, case.values, list(case.extra_sets),
                             row, files, tc, note="no time left to reduce it")
    res = reduce_graph(case.graph, values, predicate,
                       ReduceConfig(max_tests=max_tests, max_seconds=max_seconds,
                                    seed=case.seed), log=log)
    t = best["tc"]
    files = best["finding"].files if best["finding"] is not None else {}
    return Reduction(case, "reduced", res.graph, res.values, list(t.extra_inputs), best["row"],
                     files, t, res.summary())
