"""Merged tests: k independent tests compiled as one module, for backends whose compile time
barely grows with the graph (Inductor: a median compile of 6.3 s at 10 nodes, 3.9 s at 40).
`BackendOptions.merge` (campaign/config.py) sets k per backend; `campaign.pipeline.Evaluator`
merges the tests of a batch, evaluates the merged test once and splits its result back.

The merged test (`merge`) is the disjoint union of its parts:
  - its graph: every part's values renamed with the part's prefix `p<j>_` (`ir.core.rewrite.
    rename_prefixed`, bodies included, so names stay unique across all nesting levels), then
    inputs, params, instructions and outputs concatenated in part order; it passes `ir.core.verify`
    (checked when it is built). Part j's outputs are `Part.outputs` of the merged outputs;
  - its input sets: as many as the part with the most; merged set s gives part j its own set
    s when it has one, else its set 0 again (a repeat, never judged). `Part.own_sets` are the
    merged sets that are part j's own: its set s is merged set s, for s < its set count;
  - params are the union of the parts' params (the same in every set, as in each part).
  - its seed is its first part's: backends that choose a control-flow dialect by seed
    (`Backend.dialect_of`) compile it in that part's dialect, so `plan` groups only tests
    that get the same one.

Not merged (they run alone): a dynamic-shape test (its sets differ in shape: one module per
shape assignment would not be the test's), a test without reference outputs or graph outputs,
and any batch whose merged test cannot be built (a union that fails verify or the ONNX check
is our bug, not a finding: the parts run alone).

Splitting (`Merged.split`): part j's result holds, for each of its own sets in order, its
outputs of that merged set, which is the layout `FuzzWorker.judge` (`campaign.oracle.
judge_sets`) expects of a test run alone; `compile_ms` and `run_ms` are the merged module's
(one compile served every part), `compiles` the merged counts of its own sets. A merged result
without outputs (crash, signal, timeout, unsupported, invalid, skipped) or with the wrong
number of outputs splits into nothing.

The failure rule: **a finding must be reproducible from that one test's artifacts.** A part's
row comes from the merged evaluation only when the merged module ran cleanly and that part
passed. Otherwise the part is re-run alone and its row (and finding, if any) is the alone
run's, exactly as without merging: for a module-level failure every part is re-run; for one
part's mismatch or ill-conditioned judgement, that part only. So every finding folder holds
the single test that fails alone. A non-pass of the merged module that the part does not
reproduce alone (a miscompile or crash needing the other parts) is no finding: the part's row
is its alone pass, with a note in `error_msg` saying what the merged module did. Column
`merged` is the number of tests compiled together for the row's result (null: alone, also
after such a re-run). The merged run's sandbox limit is k times the per-test limit (each part
would have it alone) and its timeout is not confirmed: the parts re-run alone get their own
limits and confirming re-runs.

Measured (Inductor, CPU, 2 shared cores, one run each, `Evaluator` wall time for 4 tests):
straight-line tests 18.7 s merged vs 32.0 s alone; tests with if/loop 28.0 s vs 38.7 s (one
earlier run under heavier load: 77 s vs 43 s). ORT gains nothing (its compiles take ms).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from campaign.backends.base import BackendResult
from campaign.testcase import TestCase
from campaign.worker import Prepared
from ir.core.graph import Graph
from ir.core.rewrite import rename_prefixed
from ir.core.verify import verify


class MergeError(ValueError):
    """The merged test could not be built (our bug): its parts run alone."""


def prefix(j: int) -> str:
    """Part j's value prefix; the `_` ends the number, so no prefix is a prefix of another."""
    return f"p{j}_"


def unmergeable(prep: Prepared) -> str | None:
    """Why this test must run alone (None: it can be merged)."""
    tc = prep.tc
    if tc.shapes.unmergeable:
        return tc.shapes.unmergeable
    if not tc.mode.mergeable:
        return f"a {tc.mode.name} test"
    n_out = len(tc.graph.outputs)
    if not n_out:
        return "no graph outputs"
    outs = prep.ref.outputs
    if outs is None or len(outs) != n_out * tc.n_sets:
        return "no reference outputs for every input set"
    return None


def plan(preps: Sequence[Prepared | None], k: int,
         key: Callable[[Prepared], Hashable] = lambda p: None) -> list[list[int]]:
    """Groups of indices into `preps` to merge: mergeable tests (None entries and
    `unmergeable` ones left out) with equal `key` (the backend's dialect of the test), in
    batch order, cut into as few groups of at most `k` as possible, of balanced sizes; groups
    of one are left out (those run alone, like the rest)."""
    if k < 2:
        return []
    by_key: dict[Hashable, list[int]] = {}
    for i, p in enumerate(preps):
        if p is not None and unmergeable(p) is None:
            by_key.setdefault(key(p), []).append(i)
    groups: list[list[int]] = []
    for idx in by_key.values():
        n_groups = -(-len(idx) // k)
        size, extra = divmod(len(idx), n_groups)
        start = 0
        for g in range(n_groups):
            end = start + size + (1 if g < extra else 0)
            if end - start >= 2:
                groups.append(idx[start:end])
            start = end
    return groups


@dataclass(frozen=True)
class Part:
    """Where one part lives in the merged test."""

    prefix: str
    #: indices of its outputs among the merged graph's outputs
    outputs: range
    #: the merged input sets that are its own (its set s is merged set s)
    own_sets: tuple[int, ...]


@dataclass
class Merged:
    """The merged test of `preps` (see the module doc) and where each part lives in it."""

    tc: TestCase
    parts: list[Part]
    preps: list[Prepared]

    @property
    def n_sets(self) -> int:
        return self.tc.n_sets

    @property
    def n_outputs(self) -> int:
        return len(self.tc.graph.outputs)

    def split(self, result: BackendResult) -> list[BackendResult] | None:
        """One result per part, as if it had run alone (module doc); None when the merged
        module produced no outputs to split (a failure of the module as a whole)."""
        if result.verdict is not None or result.failed or result.outputs is None:
            return None
        n = self.n_outputs
        if len(result.outputs) != n * self.n_sets:
            return None
        out = []
        for k, part in enumerate(self.parts):
            outputs = [result.outputs[s * n + i] for s in part.own_sets for i in part.outputs]
            compiles = ([result.compiles[s] for s in part.own_sets]
                        if result.compiles is not None and len(result.compiles) == self.n_sets
                        else None)
            # the module's compiler coverage is its first part's (counted once)
            first = k == 0
            out.append(dataclasses.replace(result, outputs=outputs, compiles=compiles,
                                           input_set=None,
                                           covered=result.covered if first else None,
                                           cov_added=result.cov_added if first else None))
        return out


def merge(preps: Sequence[Prepared]) -> Merged:
    """The merged test of at least two mergeable prepared tests (module doc). Raises
    MergeError when a part cannot be merged or the union does not verify."""
    if len(preps) < 2:
        raise MergeError("merging needs at least two tests")
    for p in preps:
        why = unmergeable(p)
        if why is not None:
            raise MergeError(f"{p.tc.test_id} cannot be merged: {why}")
    n_sets = max(p.tc.n_sets for p in preps)
    graphs: list[Graph] = []
    values: dict = {}
    extra: list[dict] = [{} for _ in range(n_sets - 1)]
    parts: list[Part] = []
    offset = 0
    for j, p in enumerate(preps):
        tc, pre = p.tc, prefix(j)
        g = rename_prefixed(tc.graph, pre)
        graphs.append(g)
        values.update({pre + name: v for name, v in tc.values.items()})
        feeds = tc.feed_sets()  # per set: graph input -> value
        for s in range(1, n_sets):
            own = feeds[s] if s < tc.n_sets else feeds[0]
            extra[s - 1].update({pre + name: v for name, v in own.items()})
        parts.append(Part(pre, range(offset, offset + len(g.outputs)), tuple(range(tc.n_sets))))
        offset += len(g.outputs)
    union = Graph("merged", tuple(v for g in graphs for v in g.inputs),
                  tuple(i for g in graphs for i in g.insts),
                  tuple(o for g in graphs for o in g.outputs),
                  tuple(v for g in graphs for v in g.params))
    try:
        verify(union)
    except Exception as e:
        raise MergeError(f"the merged graph does not verify: {e}") from e
    ids = [p.tc.test_id for p in preps]
    tc = TestCase("+".join(ids), preps[0].tc.seed, union, values, [{"merged": ids}], extra)
    return Merged(tc, parts, list(preps))


def note(k: int, what: str) -> str:
    """The `error_msg` note of a part that passed alone after the merged module did not."""
    return (f"merged with {k - 1} other test(s): {what}; not reproduced by this test alone "
            f"(its row is the alone run's, no finding)")
