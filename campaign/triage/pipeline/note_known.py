"""The findings' notes as known bugs: each note's `triggers:` (`campaign.triage.pages.
note_triggers`) as bucket keys for the triage and as op skeletons for known-bug avoidance.

A campaign on a fresh clone (no `runs/`, no bug database) thus knows every bug written up in
docs/findings: a bucket whose key is a note trigger's is not new, is not reduced again, and
the bugs table names the finding (`finding`, the note's id). `triage.findings` says where the
notes are ('' or null: none); a relative path is taken from the repository root (the
directory holding the `campaign` package), so it works from any working directory.

Which notes count: for the triage every status but `fixed` (a fixed bug seen again is a
regression: new, reduced); for avoidance (`campaign.known.Trigger`) the open ones
(`campaign.known.HELD_STATUSES`) and merged ones (their bug is another note's). The bug
database stays on top: its buckets are known as before, and avoidance drops a note's trigger
whose bucket the database holds in a bug it does not hold back (marked fixed, say).

A crash-like trigger's key is (backend, target, verdict, stage, `bucket_signature` of its
error_sig, config); a mismatch trigger's is `mismatch_key` of its graph (the op pattern).

A note's bug in a form no trigger recorded (`NoteForms`) is named by its trigger's key *as
another release raises it*: a crash-like bucket with a trigger's backend, target, verdict,
stage and signature up to what varies between releases (`campaign.signature.release_neutral`:
torch moves a check between RuntimeError, NotImplementedError, TypeError, ... with its message
unchanged, so F56's 2.13 trigger is a NotImplementedError on 2.14.1), in a configuration that
holds the trigger's; by its *cause*: a crash-like bucket with a trigger's compiler, target,
verdict, stage and cause signature (the innermost exception, `campaign.signature.
cause_signature`: however many wrapper layers; up to the release too; where one of the two has
no throwing site, the rest of it: a missing frame says nothing of where, and torch 2.14.1
raises F51 from aot_eager without the frames 2.13's fake-tensor run gave), before any
reduction; or a bucket whose reduced graph has a trigger graph's *core* (`grouping.core`: the
program without the consumers that tripped over what it made), compiler, verdict and stage,
after its reduction: F21's If-branch tuple fails in every consumer its own way (a Slice's "requires
a statically known input rank", the gradient test's loss multiply's type check), and only the
reduced program says they are one cause. A key, cause or core two notes share names neither
(F08 and F56, one upstream bug written up twice, share their cause: only their keys name them).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from campaign.signature import cause_signature, release_neutral
from campaign.triage.pipeline.buckets import (
    BucketKey,
    bucket_signature,
    config_covers,
    mismatch_key,
)
from campaign.triage.pipeline.grouping import MIN_CORE_OPS, core, ops_in
from ir.core.graph import Graph

if TYPE_CHECKING:
    from campaign.known import Trigger
    from campaign.triage.pages.note_cause import NoteCause
    from campaign.triage.pages.note_triggers import NoteTrigger

log = logging.getLogger(__name__)

#: the repository root (relative `triage.findings` paths are taken from it)
ROOT = Path(__file__).resolve().parents[3]
#: note statuses whose triggers the triage does not take as known
NOT_KNOWN = ("fixed",)


@dataclass(frozen=True)
class NoteKey:
    """One trigger of one note: the finding's id, the note's status, the bucket key and the
    trigger's graph."""

    finding: str
    status: str
    key: BucketKey
    trigger: NoteTrigger
    graph: Graph


def release_key(key: BucketKey) -> tuple[str, ...] | None:
    """What a crash-like bucket's key is up to what varies between releases (module doc): its
    backend, target, verdict, stage and `release_neutral` signature (its configuration is
    matched apart: `NoteForms.by_key`); None for a mismatch (its key is an op pattern), or
    without a signature."""
    if key.verdict == "mismatch" or not key.error_sig:
        return None
    sig = release_neutral(bucket_signature(key.verdict, key.error_sig))
    return (key.backend, key.target, key.verdict, key.stage or "", sig)


def cause_key(key: BucketKey) -> tuple[str, ...] | None:
    """What a crash-like bucket's cause is keyed on (module doc): the compiler (the backend
    spec's name before `?`, or the front end it shares with others in that stage:
    `backends.base.frontend_of`), target, verdict, stage and cause signature, up to what
    varies between releases (`release_neutral`); None for a mismatch or a timeout (where a
    killed process was says nothing), or without a signature."""
    if key.verdict in ("mismatch", "timeout") or not key.error_sig:
        return None
    cause = release_neutral(cause_signature(key.error_sig))
    if not cause:
        return None
    from campaign.backends.base import frontend_of

    # a failure in a front end two compilers share (Dynamo and AOT autograd at compile) is
    # the front end's: F52's trigger runs on aot_eager, its cause failed Inductor's compile too
    where = frontend_of(key.backend, key.stage) or key.backend.partition("?")[0]
    return (where, key.target, key.verdict, key.stage or "", cause)


def _unsited(cause: tuple[str, ...]) -> tuple[str, ...]:
    """Cause key `cause` without the throwing site of its signature (` @ <frame>`)."""
    return (*cause[:-1], cause[-1].partition(" @ ")[0])


#: (compiler, verdict, stage, core) of a reduced graph
CoreKey = tuple[str, str, str, tuple[str, ...]]


def core_key(key: BucketKey, graph: Graph) -> CoreKey | None:
    """What a reduced graph's cause is keyed on (module doc): the bucket's compiler, verdict
    and stage, and the graph's core; None when the core holds fewer than `MIN_CORE_OPS` ops
    (one op in common says little). The stage is kept, unlike the grouping's rule 2: a small
    core (`if { elu }`, F40's) is common enough that a failure elsewhere in the compiler
    must not take a note's name."""
    c = core(graph)
    if ops_in(c) < MIN_CORE_OPS:
        return None
    return (key.backend.partition("?")[0], key.verdict, key.stage or "", c)


@dataclass(frozen=True)
class NoteForms:
    """The notes' bugs in forms no trigger recorded (module doc): cause key -> finding, core
    key -> finding, and release key -> the (configuration, finding) of each trigger of it.
    Invariant: a cause or core two notes' triggers share is in neither map, so a match names
    one note or none (`by_key` names none when two notes' triggers fit)."""

    causes: dict[tuple[str, ...], str]
    cores: dict[CoreKey, str]
    keys: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: cause keys without their throwing site (`_unsited`) -> finding, for a bucket whose
    #: cause has none (the same invariant)
    unsited: dict[tuple[str, ...], str] = field(default_factory=dict)

    @classmethod
    def of(cls, keys: Sequence[NoteKey]) -> NoteForms:
        """The forms of the notes' trigger keys `keys`."""
        causes: dict[tuple[str, ...], set[str]] = {}
        unsited: dict[tuple[str, ...], set[str]] = {}
        cores: dict[CoreKey, set[str]] = {}
        releases: dict[tuple[str, ...], dict[tuple[str, str], None]] = {}
        for k in keys:
            release = release_key(k.key)
            if release is not None:
                releases.setdefault(release, {})[(k.key.config, k.finding)] = None
            cause = cause_key(k.key)
            if cause is not None:
                causes.setdefault(cause, set()).add(k.finding)
                unsited.setdefault(_unsited(cause), set()).add(k.finding)
            shape = core_key(k.key, k.graph)
            if shape is not None:
                cores.setdefault(shape, set()).add(k.finding)
        return cls({c: next(iter(f)) for c, f in causes.items() if len(f) == 1},
                   {c: next(iter(f)) for c, f in cores.items() if len(f) == 1},
                   {r: tuple(t) for r, t in releases.items()},
                   {c: next(iter(f)) for c, f in unsited.items() if len(f) == 1})

    def by_key(self, key: BucketKey) -> str | None:
        """The finding with a trigger whose key is bucket `key`'s up to the release (its
        `release_key`) and whose configuration `key`'s holds (`config_covers`), or None (no
        such trigger, or two notes' fit)."""
        release = release_key(key)
        fits = {finding for config, finding in self.keys.get(release or (), ())
                if config_covers(config, key.config)}
        return next(iter(fits)) if len(fits) == 1 else None

    def by_cause(self, key: BucketKey) -> str | None:
        """The finding whose trigger has bucket `key`'s cause, or None. Where one of the two
        causes has no throwing site, they are compared without it (module doc)."""
        cause = cause_key(key)
        if cause is None:
            return None
        if cause in self.causes:
            return self.causes[cause]
        bare = _unsited(cause)
        if bare != cause:  # a site here: a trigger's cause that has none
            return self.causes.get(bare)
        return self.unsited.get(cause)  # none here: a trigger's, whatever its site

    def by_core(self, key: BucketKey, reduced: Graph) -> str | None:
        """The finding whose trigger graph has the core of bucket `key`'s reduced graph
        `reduced` (and its compiler, verdict and stage), or None."""
        shape = core_key(key, reduced)
        return None if shape is None else self.cores.get(shape)


@dataclass(frozen=True)
class NoteProbe:
    """One note's cause (`campaign.triage.pages.note_cause`) and its triggers, re-run to show
    the bug is live: what the cause probe (`cause_probe`) runs."""

    finding: str
    cause: NoteCause
    triggers: tuple[NoteTrigger, ...]
    notes_dir: Path


def findings_dir(setting: str | None) -> Path | None:
    """The notes dir of a `triage.findings` setting (module doc); None when it is off."""
    if setting is None or not str(setting).strip():
        return None
    path = Path(setting).expanduser()
    return path if path.is_absolute() else ROOT / path


def trigger_key(t: NoteTrigger, graph: Graph) -> BucketKey:
    """The bucket key a finding of trigger `t` (graph `graph`) gets in a campaign."""
    if t.crash_like:
        return BucketKey(t.backend, t.target, t.verdict, t.stage,
                         bucket_signature(t.verdict, t.error_sig), None, t.config)
    return mismatch_key(t.backend, t.target, graph, t.config)


def note_keys(notes_dir: Path | None) -> list[NoteKey]:
    """Every trigger of the notes in `notes_dir` (none for None). A bad note is a NotesError
    (the notes are committed and tested: a campaign must not go on half-informed)."""
    if notes_dir is None:
        return []
    from campaign.triage.pages.notes import load_notes
    from ir.core.text import load

    out = []
    for note in load_notes(notes_dir).values():
        for t in note.triggers:
            g = load(t.resolve(notes_dir, "graph"))
            out.append(NoteKey(note.bug, note.status, trigger_key(t, g), t, g))
    return out


def note_probes(notes_dir: Path | None) -> list[NoteProbe]:
    """The cause probes (`NoteProbe`) of the notes in `notes_dir` the triage takes
    as known (every status but `NOT_KNOWN`) that have a `cause:`."""
    if notes_dir is None:
        return []
    from campaign.triage.pages.notes import load_notes

    return [NoteProbe(n.bug, n.cause, n.triggers, Path(notes_dir))
            for n in load_notes(notes_dir).values()
            if n.cause is not None and n.status not in NOT_KNOWN]


def known_note_keys(notes_dir: Path | None) -> list[NoteKey]:
    """The note keys the triage takes as known (every status but `NOT_KNOWN`)."""
    return [k for k in note_keys(notes_dir) if k.status not in NOT_KNOWN]


def note_triggers(notes_dir: Path | None, db: str | Path | None = None) -> list[Trigger]:
    """Known-bug avoidance's triggers of the notes (module doc); `db`: the bug database (a
    directory), whose bugs not held back take their buckets' note triggers with them. Notes
    that cannot be read give none (a warning: the campaign goes on)."""
    from campaign.known import HELD_STATUSES, Trigger, skeleton
    from campaign.triage.pages.notes import NotesError

    dropped: set[str] = set()
    if db is not None:
        from campaign.triage.bugdb.store import BugDb, BugDbError

        try:
            dropped = {ref["bucket"] for b in BugDb(Path(db)).read().values()
                       if b.status not in HELD_STATUSES for ref in b.buckets}
        except BugDbError as e:  # the campaign checked it at its start
            log.warning("%s", e)
    try:
        keys = note_keys(notes_dir)
    except (NotesError, OSError, ValueError) as e:
        log.warning("the findings' notes give no triggers: %s", e)
        return []
    out = []
    for k in keys:
        if k.status not in (*HELD_STATUSES, "merged") or k.key.id in dropped:
            continue
        sigs, edges = skeleton(k.graph)
        out.append(Trigger(k.key.id, k.key.backend, sigs, edges, k.key.config,
                           dynamic_shapes=k.trigger.dynshape is not None))
    return out
