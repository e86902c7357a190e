"""The seed/mutant pool: which graph the next mutated test starts from.

Entries are the corpus seeds, generated seeds, and tests that showed something new. A test
*is novel* when its graph has a feature the pool has not seen (`features`: an op with its result
dtype, a def-use edge between two ops, an op nested in a control-flow body, a nesting depth) or
when its outcome carries a verdict signature not seen before (the reference's verdict at
generation; each backend's verdict and error signature, fed back later by the campaign driver).
A third signal comes from the compilers: a test whose evaluation ran lines of a backend's Python
code not seen before (compiler coverage, `coverage_feedback`, docs/coverage.md) is novel too.
The signals combine by *or* for keeping a test (any one makes it novel) and multiply in its
energy. Only valid novel tests join the pool (AFL keeps only inputs with new coverage); the
parent of a novel test is credited with a *find*, and the mutators the test applied itself
with one each (`mutator_finds`).

Power schedule (`weight`), in the spirit of AFLFast's FAST schedule: an entry's chance to be
chosen grows with the finds of its children and with a new verdict signature of its own, and
shrinks with the times it was chosen and with the frequency of its *class* (its set of op names:
a common op mix gets less energy, a rare one more):

    weight(e) = (1 + finds(e)) * (4 if e found a new verdict signature else 1)
                * (2 if e reached new compiler code else 1)
                / (sqrt(1 + chosen(e)) * freq(class(e)))

`freq` counts every test observed, kept or not. Seeds never leave the pool; when it is full the
lowest-weight mutant is evicted. Everything is deterministic given the sequence of calls and
the rng passed to `choose` (no clocks, no hashing of ids).
"""
from __future__ import annotations

import math
import random
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ir.core.graph import Graph


def features(g: Graph) -> frozenset[str]:
    """The op/feature pattern of a graph (see the module doc)."""
    out: set[str] = {f"depth:{g.max_depth()}"}
    _features(g, "", out)
    return frozenset(out)


def _features(g: Graph, ctx: str, out: set[str]) -> None:
    producer = {v.name: "in" for v in (*g.inputs, *g.params)}
    for inst in g.insts:
        name = inst.op.name
        dt = inst.results[0].type.dtype.short if inst.results else "-"
        out.add(f"op:{name}:{dt}")
        if ctx:
            out.add(f"nest:{ctx}/{name}")
        for a in inst.args:
            out.add(f"edge:{producer.get(a, 'in')}>{name}")
        for r in inst.results:
            producer[r.name] = name
        for body in inst.blocks:
            _features(body, name, out)


def op_class(g: Graph) -> str:
    return ",".join(sorted(g.op_counts()))


@dataclass
class Outcome:
    """What a test made from a graph showed."""

    test_id: str
    #: the test's lineage (`[{header}, {step}, ...]`, see docs/mutation.md)
    lineage: list[dict[str, Any]]
    #: valid on the reference (a test the backends ran)
    valid: bool
    #: verdict signatures known so far, e.g. "reference:valid", "ort:crash:Fail: ..."
    signatures: tuple[str, ...] = ()
    #: the pool entry it was made from (None: generated from scratch)
    parent: str | None = None


@dataclass
class Entry:
    id: str
    graph: Graph
    lineage: list[dict[str, Any]]
    seed_id: str
    klass: str
    seed: bool = False
    chosen: int = 0
    finds: int = 0
    new_signature: bool = False
    #: its evaluation reached compiler code no earlier test had (`coverage_feedback`)
    new_coverage: bool = False
    parent: str | None = None
    #: the model its root seed is a window of ("" for other seeds; docs/mutation.md)
    model: str = ""


@dataclass
class _Recent:
    graph: Graph
    lineage: list[dict[str, Any]]
    parent: str | None
    valid: bool


class SeedPool:
    """`add_seed(id, graph)`, `add(graph, outcome)` after each test, `feedback(test_id,
    signatures)` when backend verdicts come back, `choose(rng)` for the next parent."""

    def __init__(self, max_size: int = 256, recent: int = 512):
        self.max_size = max_size
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.seen_features: set[str] = set()
        self.seen_signatures: set[str] = set()
        self.freq: Counter[str] = Counter()
        #: tests not kept, by id, for a while: a late verdict signature may still promote them
        self.recent: OrderedDict[str, _Recent] = OrderedDict()
        self.recent_size = recent
        self.counts: Counter[str] = Counter()
        #: per mutator: novel tests kept whose own steps it applied
        self.mutator_finds: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self.entries)

    # ---- filling -------------------------------------------------------------------------------
    def add_seed(self, seed_id: str, graph: Graph, model: str = "") -> Entry:
        head: dict[str, Any] = {"seed_id": seed_id, **({"model": model} if model else {})}
        e = Entry(seed_id, graph, [head], seed_id, op_class(graph), seed=True, model=model)
        self.entries[seed_id] = e
        self.seen_features |= features(graph)
        self.freq[e.klass] += 1
        return e

    def novelty(self, graph: Graph) -> frozenset[str]:
        """Features of `graph` the pool has not seen."""
        return features(graph) - self.seen_features

    def add(self, graph: Graph, outcome: Outcome) -> Entry | None:
        """Observe a test: update what was seen; keep the graph as an entry when the test was
        valid and novel (returned), crediting its parent."""
        self.counts["observed"] += 1
        klass = op_class(graph)
        self.freq[klass] += 1
        new_f = features(graph) - self.seen_features
        self.seen_features |= new_f
        new_s = set(outcome.signatures) - self.seen_signatures
        self.seen_signatures |= new_s
        if not (new_f or new_s) or not outcome.valid:
            self.recent[outcome.test_id] = _Recent(graph, outcome.lineage, outcome.parent,
                                                   outcome.valid)
            while len(self.recent) > self.recent_size:
                self.recent.popitem(last=False)
            return None
        self.counts["novel"] += 1
        return self._keep(outcome.test_id, graph, outcome.lineage, outcome.parent, bool(new_s))

    def feedback(self, test_id: str, signatures: Iterable[str]) -> bool:
        """Verdict signatures of a test seen after it was added (its backends' verdicts).
        Returns whether one was new (the test is then kept, if it is still known)."""
        new = set(signatures) - self.seen_signatures
        if not new:
            return False
        self.seen_signatures |= new
        self.counts["new_signatures"] += len(new)
        self._late_find(test_id, signature=True)
        return True

    def coverage_feedback(self, test_id: str, new_lines: int) -> bool:
        """Compiler coverage of a test seen after it was added: `new_lines` lines of a
        backend's code no earlier test had run. Returns whether that made it novel (it is then
        kept, if still known, with the energy of new coverage); 0 new lines: not novel."""
        if new_lines <= 0:
            return False
        self.counts["new_coverage"] += 1
        return self._late_find(test_id, signature=False)

    def _late_find(self, test_id: str, signature: bool) -> bool:
        """A test found novel after it was added, by a new verdict signature (`signature`) or
        by new compiler lines: its entry is marked, or, if it is still among the recent tests
        and was valid, it is kept now. Returns whether it is an entry."""
        e = self.entries.get(test_id)
        if e is not None:
            if signature:
                e.new_signature = True
            else:
                e.new_coverage = True
            return True
        r = self.recent.pop(test_id, None)
        if r is None or not r.valid:
            return False
        self._keep(test_id, r.graph, r.lineage, r.parent, signature, new_coverage=not signature)
        return True

    def _keep(self, test_id: str, graph: Graph, lineage, parent: str | None,
              new_signature: bool, new_coverage: bool = False) -> Entry:
        seed_id = lineage[0].get("seed_id", test_id) if lineage else test_id
        model = str(lineage[0].get("model", "")) if lineage else ""
        e = Entry(test_id, graph, lineage, seed_id, op_class(graph), parent=parent,
                  new_signature=new_signature, new_coverage=new_coverage, model=model)
        self.entries[test_id] = e
        if parent is not None and parent in self.entries:
            self.entries[parent].finds += 1
        for step in lineage[1:] if lineage else ():
            if step.get("test") == test_id and "mutator" in step:
                self.mutator_finds[step["mutator"]] += 1
        self.counts["kept"] += 1
        self._evict()
        return e

    def _evict(self) -> None:
        while len(self.entries) > self.max_size:
            victims = [e for e in self.entries.values() if not e.seed]
            if not victims:
                return
            worst = min(victims, key=self.weight)  # first of equals: the oldest
            del self.entries[worst.id]
            self.counts["evicted"] += 1

    # ---- choosing ------------------------------------------------------------------------------
    def weight(self, e: Entry) -> float:
        return ((1 + e.finds) * (4.0 if e.new_signature else 1.0)
                * (2.0 if e.new_coverage else 1.0)
                / (math.sqrt(1 + e.chosen) * max(1, self.freq[e.klass])))

    def choose(self, rng: random.Random) -> Entry | None:
        """The next parent, drawn by weight (None when the pool is empty)."""
        if not self.entries:
            return None
        entries = list(self.entries.values())
        e = rng.choices(entries, [self.weight(x) for x in entries])[0]
        e.chosen += 1
        return e

    def donor(self, rng: random.Random) -> tuple[str, Graph] | None:
        """A graph to splice code from: any entry, uniformly."""
        if not self.entries:
            return None
        e = rng.choice(list(self.entries.values()))
        return e.id, e.graph

    def summary(self) -> dict[str, Any]:
        top = sorted(self.entries.values(), key=self.weight, reverse=True)[:5]
        return {**self.counts, "entries": len(self.entries),
                "seeds": sum(1 for e in self.entries.values() if e.seed),
                "features": len(self.seen_features), "signatures": len(self.seen_signatures),
                "mutator_finds": dict(self.mutator_finds),
                "top": [(e.id, round(self.weight(e), 4), e.finds) for e in top]}
