"""Known bugs' triggers: which new tests would most likely hit a bug already found.

A compiler-bug bucket the triage confirmed (in `triage.known`'s bugs tables, or on resume in the
run's own) has a reduced graph: the few instructions that still fail. Its **trigger** is that
graph's op skeleton:
  - `sigs`: the op signatures it holds, `name(operand dtypes)->result dtypes` (the generator's
    `signature_key`; bodies included: an `if` and the ops of its branches). Dtypes are kept:
    the reducer simplified every dtype the failure does not need, and a bug of `eq` on bools
    is no bug of `eq` on floats;
  - `edges`: every (producer op, consumer op) pair of names where one instruction's result is
    read by another (in the same scope; a body's instructions reading each other too).
A test *matches* a trigger when its graph holds every signature and every edge of it. Shapes
and attributes are ignored on purpose: a reduced graph keeps only what the failure needs, so
a larger graph holding the same skeleton is most likely the same bug again; and the cost of a
wrong match is small (the test still goes to every other backend, and `campaign.known_rate`
of the matching tests still go to that one, so a bug that needs more than the skeleton, or a
second bug behind it, is still seen).

Plain data (the triggers cross to the generation actors in their config); no Ray, no torch.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ir.core.graph import Graph

log = logging.getLogger(__name__)

#: bucket kinds with a trigger (compiler bugs; `ours` and `known` gaps have none)
_BUG = "bug"


@dataclass(frozen=True)
class Trigger:
    """The op skeleton of a known bug's reduced graph, for the backend it fails on."""

    bucket: str
    backend: str
    sigs: frozenset[str]
    edges: frozenset[tuple[str, str]]
    #: the bucket's (reduced) configuration: the options the failure needs ('' none)
    config: str = ""
    #: a dynamic-shape bug's (a note trigger with `dynshape`): only a dynamic-shape test can
    #: hit it, a static test of the same skeleton is no repeat (F17's reshape, F18's pool)
    dynamic_shapes: bool = False

    def matches(self, sigs: frozenset[str], edges: frozenset[tuple[str, str]],
                dynamic_shapes: bool = False) -> bool:
        """Whether a test of this skeleton (a dynamic-shape test or not) would likely hit it."""
        return (self.sigs <= sigs and self.edges <= edges
                and (dynamic_shapes or not self.dynamic_shapes))

    def holds_for(self, backend: str) -> bool:
        """Whether the bug can hit every test of backend spec `backend`: its configuration
        is empty or the spec itself sets it. A bug that needs a drawn option (`fullgraph=
        false` on `inductor?dialect=mixed`) holds back nothing: most of that backend's tests
        run without the option, and a test is matched before its configuration is drawn."""
        from campaign.triage.pipeline.buckets import config_covers

        return config_covers(self.config, backend.partition("?")[2])


def skeleton(g: Graph) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """(signatures, edges) of a graph, bodies included (module doc)."""
    from ir.gen.builder import signature_key

    sigs: set[str] = set()
    edges: set[tuple[str, str]] = set()

    def walk(scope: Graph) -> None:
        producer: dict[str, str] = {}
        types = scope.types()
        for inst in scope.insts:
            # a control-flow op's operands are whatever its bodies capture: its name alone
            sigs.add(inst.op.name if inst.blocks else signature_key(
                inst.op.name, [types[a].dtype for a in inst.args],
                [r.type.dtype for r in inst.results]))
            for a in inst.args:
                if a in producer:
                    edges.add((producer[a], inst.op.name))
            for r in inst.results:
                producer[r.name] = inst.op.name
            for body in inst.blocks:
                walk(body)

    walk(g)
    return frozenset(sigs), frozenset(edges)


def matching(triggers: Iterable[Trigger], g: Graph, backends: Iterable[str],
             dynamic_shapes: bool = False) -> dict[str, str]:
    """backend -> the bucket of the most specific trigger of that backend `g` matches (the
    most signatures and edges); `dynamic_shapes`: `g` is a dynamic-shape test's."""
    wanted = set(backends)
    # the most specific trigger first: a general one (which the router may find matches too
    # many tests to hold any back) must not hide a specific one of the same backend
    mine = sorted((t for t in triggers if t.backend in wanted and t.holds_for(t.backend)),
                  key=lambda t: -(len(t.sigs) + len(t.edges)))
    if not mine:
        return {}
    sigs, edges = skeleton(g)
    out: dict[str, str] = {}
    for t in mine:
        if t.backend not in out and t.matches(sigs, edges, dynamic_shapes):
            out[t.backend] = t.bucket
    return out


def load_triggers(paths: Iterable[str | Path]) -> list[Trigger]:
    """The triggers of the confirmed compiler-bug buckets in bugs tables (a `bugs.parquet`,
    or an output dir holding one): each bucket's reduced graph (`graph.gir` in its folder,
    relative to the table's dir). A bucket without a reduced graph on disk has no trigger."""
    from campaign.triage.pipeline.buckets import BUGS_FILE, read_bugs_table
    from ir.core.text import load

    out: list[Trigger] = []
    seen: set[str] = set()
    for p in paths:
        path = Path(p)
        if path.is_dir():
            path = path / BUGS_FILE
        if not path.is_file():
            continue
        for row in read_bugs_table(path).to_pylist():
            if (row["kind"] != _BUG or row["bucket"] in seen or row.get("confirmed") is False
                    or row.get("status") == "unconfirmed"):  # its repro.py did not reproduce
                continue
            folder = _folder(path.parent, row.get("artifact_path"))
            if folder is None or row.get("reduced_insts") is None:
                continue
            try:
                sigs, edges = skeleton(load(folder / "graph.gir"))
            except Exception as e:  # an unreadable folder costs its trigger, nothing else
                log.warning("known bug %s: no trigger (%s: %s)", row["bucket"], type(e).__name__, e)
                continue
            seen.add(row["bucket"])
            out.append(Trigger(row["bucket"], row["backend"], sigs, edges,
                               row.get("backend_config") or ""))
    return out


def _folder(root: Path, artifact_path: str | None) -> Path | None:
    if not artifact_path:
        return None
    folder = root / artifact_path
    return folder if (folder / "graph.gir").is_file() else None


#: bug database statuses whose bugs hold back their repeats (`campaign.triage.bugdb.store`): a
#: fixed bug's tests go through (a regression is seen), as do ours and limitations (no bug)
#: and unconfirmed ones (their repro.py did not reproduce: a repeat may confirm them)
HELD_STATUSES = ("new", "known", "known-upstream")


def db_triggers(path: str | Path) -> list[Trigger]:
    """The triggers of the bug database's held bugs (`HELD_STATUSES`) that keep a reduced
    graph: one per compiler-bug bucket of the backend that graph failed on. An unreadable
    database gives none (a warning; the campaign checked it at its start)."""
    from campaign.triage.bugdb.store import BugDb, BugDbError
    from ir.core.text import parse

    try:
        bugs = BugDb(Path(path)).read()
    except BugDbError as e:
        log.warning("%s", e)
        return []
    out: list[Trigger] = []
    for bug in bugs.values():
        if bug.status not in HELD_STATUSES or not bug.graph:
            continue
        try:
            sigs, edges = skeleton(parse(bug.graph))
        except Exception as e:
            log.warning("known bug %s: no trigger (%s: %s)", bug.bug, type(e).__name__, e)
            continue
        out += [Trigger(ref["bucket"], ref["backend"], sigs, edges,
                        ref.get("backend_config") or "") for ref in bug.buckets
                if ref.get("kind") == _BUG and ref["backend"] == bug.graph_backend]
    return out
