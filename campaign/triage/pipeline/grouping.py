"""Cause-level grouping: buckets that share a cause are one *bug*.

A bucket is one failure as the compiler reported it (a signature, or a mismatch's op pattern);
one cause often gives several: a TVM importer that turns a BatchNormalization inside an If
into a tuple fails in every consumer of that tuple, each with a message of its own. `group`
links two compiler-bug buckets of one compiler (the backend spec's name before `?`: the
configuration and the spec's options do not make another compiler) and one verdict when:

1. `same graph`: both were reduced, to the same **structure** (`structure`: every op
   signature with the control-flow ops around it, and every producer -> consumer edge, as a
   multiset; value names, shapes, attributes and the order of branches left out);
2. `shared core`: both were reduced, and their **cores** are equal and hold two ops or more
   (`core`: the set of the structure's entries without its *consumers*, peeled off
   repeatedly: ops whose result no remaining op reads that read a remaining op's result, the
   ops that tripped over a broken value, where the cause is what produced it); the stage may
   differ (a broken value can fail in the importer or only when run);
3. `signature`: crash-like (not a timeout: where a killed process was says nothing), same
   stage and the same **cause signature** (`campaign.signature.cause_signature`: exception
   type, message head with names, numbers, argument lists and shapes stripped, the throwing
   site), unless both were reduced and their graphs share no op but control flow (the reduced
   graphs say they are two causes that share a message);
4. `re-run`: a `rerun` callable is given, the two ran on different backend specs or
   configurations, one was reduced, and its reduced graph, re-run on the other's (backend and
   configuration), fails with the other's verdict, stage and cause signature. At most
   `max_reruns` re-runs, biggest buckets first.

Across compilers, two more rules:

5. `front end`: two compilers whose stage runs one shared front end fail in that stage,
   crash-like, with the same cause signature (whose throwing site is part of it), unless both
   were reduced and their graphs share no op but control flow: at import `Backend.FRONTEND`
   (the exporter and TVM's torch frontend both run `torch.export` and its decompositions), at
   compile `Backend.COMPILE_FRONTEND` (Inductor and `aot_eager` both run Dynamo and AOT
   autograd: the same failure on `aot_eager` cannot be Inductor's own);
6. `reference`: dynsmith's own `invalid` buckets (`ours`) with the same signature, whatever
   the backend: an invalid test fails the reference run, which no backend takes part in, so
   its rows on every backend are one cause.

Links are transitive (a bug is a connected component). A bug's id is the id of its oldest
bucket (earliest `first_seen`, then the most rows, then the smallest id), so it stays what it
was as long as that bucket is in the table; buckets keep their own ids. Buckets that are not
compiler bugs (`ours`, `known`) are bugs of their own, but for rule 6.

Pure: buckets, their reduced graphs and an optional re-run callable in, a `Grouping` out; no
compiler is called here (the triage passes a callable that runs its sandboxes).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from campaign.signature import cause_signature
from ir.core.graph import Graph

#: verdicts whose signatures are evidence of a cause (a timeout's is only where it was killed)
SIGNATURE_VERDICTS = ("crash", "signal")
#: verdicts a re-run can reproduce by signature
RERUN_VERDICTS = SIGNATURE_VERDICTS
#: a core must hold this many ops to group on its own (one op in common says little)
MIN_CORE_OPS = 2


@dataclass(frozen=True)
class BucketEvidence:
    """What grouping knows of one bucket: its key's fields, its size and age, and its reduced
    graph (None when it was not reduced)."""

    bucket: str
    #: the backend spec as the campaign names it (the configuration is `config`)
    backend: str
    verdict: str
    kind: str = "bug"
    stage: str | None = None
    error_sig: str | None = None
    config: str = ""
    first_seen: datetime | None = None
    count: int = 0
    graph: Graph | None = None
    #: the shared front end the backend runs in the bucket's stage (`Backend.FRONTEND` at
    #: import, e.g. `torch.export`; `Backend.COMPILE_FRONTEND` at compile), if any
    frontend: str | None = None

    @property
    def compiler(self) -> str:
        """The compiler: the spec's name without its options (`inductor?dialect=hop` ->
        `inductor`)."""
        return self.backend.split("?", 1)[0]

    @property
    def cause(self) -> str:
        """The cause signature (`campaign.signature.cause_signature`); '' for verdicts whose
        signature is no evidence."""
        if self.verdict not in SIGNATURE_VERDICTS:
            return ""
        return cause_signature(self.error_sig)


#: (verdict, stage, error_sig) of a re-run, or None when it could not run
Failure = tuple[str, str | None, str | None]
#: re-run bucket `a`'s reduced graph on bucket `b`'s compiler (backend and configuration)
Rerun = Callable[[BucketEvidence, BucketEvidence], Failure | None]


@dataclass(frozen=True)
class Link:
    """Why two buckets are one bug: the rule (`same graph`, `shared core`, `signature`,
    `re-run`) and what they share."""

    a: str
    b: str
    rule: str
    detail: str


@dataclass
class Grouping:
    """The outcome: bucket -> bug id (every bucket given), the links that made each bug, and
    the re-runs spent."""

    bug: dict[str, str]
    links: list[Link] = field(default_factory=list)
    reruns: int = 0

    def members(self) -> dict[str, list[str]]:
        """bug id -> its buckets, the representative first, then by id."""
        out: dict[str, list[str]] = {}
        for bucket, bug in sorted(self.bug.items(), key=lambda kv: (kv[0] != kv[1], kv[0])):
            out.setdefault(bug, []).append(bucket)
        return out


# ---- graph evidence ------------------------------------------------------------------------------

def _sig(inst, types) -> str:
    from ir.gen.builder import signature_key

    if inst.blocks:  # a control-flow op's operands are whatever its bodies capture
        return inst.op.name
    return signature_key(inst.op.name, [types[a].dtype for a in inst.args],
                         [r.type.dtype for r in inst.results])


def _consumers(g: Graph) -> set[int]:
    """The instructions of `g`'s scope peeled off as consumers: repeatedly, an op (not control
    flow) whose results no remaining op reads and that reads a remaining op's result."""
    made = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
    peeled: set[int] = set()
    while True:
        read = {a for i, inst in enumerate(g.insts) if i not in peeled for a in inst.args}
        more = {i for i, inst in enumerate(g.insts)
                if i not in peeled and not inst.blocks
                and not any(r.name in read for r in inst.results)
                and any(a in made and made[a] not in peeled for a in inst.args)}
        if not more:
            return peeled
        peeled |= more


def _entries(g: Graph, drop_sinks: bool, path: str = "") -> list[str]:
    types = g.types()
    made = {r.name: i for i, inst in enumerate(g.insts) for r in inst.results}
    peeled = _consumers(g) if drop_sinks else set()
    out: list[str] = []
    kept: dict[int, str] = {}
    for i, inst in enumerate(g.insts):
        if i in peeled:
            continue
        kept[i] = _sig(inst, types)
        out.append(path + kept[i])
        for body in inst.blocks:
            out += _entries(body, drop_sinks, f"{path}{inst.op.name}>")
    for i, inst in enumerate(g.insts):
        if i not in kept:
            continue
        for a in inst.args:
            if a in made and made[a] in kept:
                out.append(f"{path}{kept[made[a]]} -> {kept[i]}")
    return out


def structure(g: Graph) -> tuple[str, ...]:
    """A reduced graph's structure: each op's signature (`name(operand dtypes)->result
    dtypes`; a control-flow op by name) prefixed by the control-flow ops around it
    (`if>batch_norm(...)`), and each producer -> consumer edge within a scope, as a sorted
    multiset. Names, shapes, attributes and the order of an `if`'s branches are left out."""
    return tuple(sorted(_entries(g, drop_sinks=False)))


def core(g: Graph) -> tuple[str, ...]:
    """`structure` without its consumers, as a set (which ops and edges, not how many). The
    consumers are peeled off each scope repeatedly: an op (not control flow) whose results no
    remaining op of its scope reads and that reads a remaining op's result. What stays: the
    control flow, the ops that read only inputs (the producers), and what feeds control flow.
    In a reduced graph every op is needed; the consumers are the ops that failed on what the
    producers made (the reducer may leave a chain of them: `layer_norm -> mul_ -> matmul`)."""
    return tuple(sorted(set(_entries(g, drop_sinks=True))))


def ops_in(entries: tuple[str, ...]) -> int:
    """How many ops (not edges) a structure or core holds."""
    return sum(" -> " not in e for e in entries)


def _apart(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Two reduced structures that say "two causes": they share no op other than control
    flow. A shared op (`view_diagonal(f32)->f32` in both, each with another producer or
    consumer the reducer could not drop) is what one cause with one message leaves in both."""
    def ops(core: tuple[str, ...]) -> set[str]:
        # an entry is `if>loop>op(...)->...`: the op without the control flow around it
        return {re.sub(r"^(?:\w+>)+", "", e) for e in core if " -> " not in e and "(" in e}

    return not ops(a) & ops(b)


# ---- grouping ------------------------------------------------------------------------------------

class _Union:
    def __init__(self, items: Sequence[str]):
        self.parent = {i: i for i in items}

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[rb] = ra
        return True


def _age(b: BucketEvidence) -> tuple:
    """Sort key: oldest first, then the most rows, then the id."""
    return (b.first_seen is None, b.first_seen or datetime.min, -b.count, b.bucket)


def _one_front_end(bugs: list[BucketEvidence]) -> list[tuple[BucketEvidence, BucketEvidence]]:
    """Pairs of buckets of two compilers that failed in the stage of a front end they share
    (`frontend`: the front end of the bucket's stage)."""
    fronted = [b for b in bugs if b.frontend]
    return [(a, b) for i, a in enumerate(fronted) for b in fronted[i + 1:]
            if a.compiler != b.compiler and a.frontend == b.frontend and a.stage == b.stage]


def group(buckets: Sequence[BucketEvidence], rerun: Rerun | None = None,
          max_reruns: int = 20) -> Grouping:
    """Group `buckets` into bugs (module doc). `rerun(a, b)` re-runs `a`'s reduced graph on
    `b`'s compiler; it is called at most `max_reruns` times."""
    by_id = {b.bucket: b for b in buckets}
    uf = _Union(list(by_id))
    links: list[Link] = []
    bugs = sorted((b for b in buckets if b.kind == "bug"), key=_age)
    shapes = {b.bucket: structure(b.graph) for b in bugs if b.graph is not None}
    cores = {b.bucket: core(b.graph) for b in bugs if b.graph is not None}

    def link(a: BucketEvidence, b: BucketEvidence, rule: str, detail: str) -> None:
        if uf.join(a.bucket, b.bucket):
            links.append(Link(a.bucket, b.bucket, rule, detail))

    pairs = [(a, b) for i, a in enumerate(bugs) for b in bugs[i + 1:]
             if a.compiler == b.compiler and a.verdict == b.verdict]
    for a, b in _one_front_end(bugs):
        differ = a.bucket in shapes and b.bucket in shapes and _apart(shapes[a.bucket],
                                                                      shapes[b.bucket])
        if a.cause and a.cause == b.cause and a.verdict == b.verdict and not differ:
            link(a, b, "front end", f"{a.frontend}: {a.cause}")
    # an invalid test fails dynsmith's reference, which no backend takes part in: the same
    # reference failure on several backends' rows is one cause
    first_of: dict[str, BucketEvidence] = {}
    for b in sorted((b for b in buckets if b.kind == "ours" and b.verdict == "invalid"), key=_age):
        if b.error_sig:
            first = first_of.setdefault(b.error_sig, b)
            if first is not b:
                link(first, b, "reference", b.error_sig)
    for a, b in pairs:
        reduced = a.bucket in shapes and b.bucket in shapes
        if reduced and shapes[a.bucket] == shapes[b.bucket]:
            link(a, b, "same graph", "; ".join(shapes[a.bucket]))
        elif (reduced and cores[a.bucket] == cores[b.bucket]
              and ops_in(cores[a.bucket]) >= MIN_CORE_OPS):
            link(a, b, "shared core", "; ".join(cores[a.bucket]))
        elif (a.cause and a.cause == b.cause and a.stage == b.stage
              and not (reduced and _apart(shapes[a.bucket], shapes[b.bucket]))):
            link(a, b, "signature", a.cause)
    reruns = 0
    if rerun is not None:
        # on the compiler a graph already failed on, a re-run says no more than its signature
        wanted = sorted((p for p in pairs if p[0].verdict in RERUN_VERDICTS
                         and p[0].stage == p[1].stage
                         and (p[0].backend, p[0].config) != (p[1].backend, p[1].config)),
                        key=lambda p: (-(p[0].count + p[1].count), p[0].bucket, p[1].bucket))
        for x, y in wanted:
            for a, b in ((x, y), (y, x)):
                if reruns >= max_reruns or uf.find(a.bucket) == uf.find(b.bucket):
                    continue
                if a.graph is None:
                    continue
                reruns += 1
                got = rerun(a, b)
                if got is None:
                    continue
                verdict, stage, sig = got
                if (verdict, stage) == (b.verdict, b.stage) and cause_signature(sig) == b.cause:
                    link(a, b, "re-run", f"{a.bucket}'s graph on {b.backend}"
                         + (f" [{b.config}]" if b.config else "") + f": {b.cause}")
    # the representative: the oldest member
    rep: dict[str, BucketEvidence] = {}
    for b in sorted(buckets, key=_age):
        rep.setdefault(uf.find(b.bucket), b)
    return Grouping({b.bucket: rep[uf.find(b.bucket)].bucket for b in buckets}, links, reruns)

