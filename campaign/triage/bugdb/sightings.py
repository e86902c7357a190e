"""Adding one triage's bugs table to the bug database (`campaign.triage.bugdb.store`).

`record(db, out_dir, rows)` groups the table's rows into bugs (by the `bug` column where the
table has one, else one bug per bucket), matches each group to the database's bugs by bucket
id, and records one sighting per bucket of this run (replacing the run's earlier ones). A group
holding a bucket of a finding note (the table's `finding`, `campaign.triage.pipeline.note_known`)
that the database does not hold yet joins that note's bug (imported by `import-findings`), else
becomes a bug of the note's id with status `known`; it counts as seen before. What it
did comes back as a `Recorded`: which bugs were new in this run and which were already known,
the numbers a run's report shows.

A harness failure is never a compiler bug: a new group whose buckets' status is `unconfirmed`
(its repro.py was run and did not reproduce: `campaign.triage.pipeline.buckets.unconfirmed`)
becomes an `unconfirmed` bug, counted apart from the new compiler bugs; an unconfirmed bug
seen again stays so until a triage's repro.py of it reproduces, which makes it `new` (new in
that run). The buckets of an environment fault (kind `env`) are not recorded.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from campaign.triage.bugdb.store import Bug, BugDb, Sighting, now
from campaign.triage.bugdb.versions import installed
from campaign.triage.pages.upstream_report import title
from campaign.triage.pipeline.buckets import rows_by_bug

#: the bucket key's fields a bug keeps per bucket
KEY_FIELDS = ("bucket", "backend", "target", "verdict", "stage", "error_sig", "pattern",
              "backend_config", "kind")
#: a new bug's status by the kinds of its buckets (`campaign.triage.pipeline.buckets.KIND`)
FIRST_STATUS = {"bug": "new", "ours": "ours", "known": "limitation"}


@dataclass
class Recorded:
    """What one triage added: bug ids new in this run, and those seen before (with their
    status now), in table order."""

    new: dict[str, str] = field(default_factory=dict)
    known: dict[str, str] = field(default_factory=dict)
    #: bucket id -> bug id, for this run's buckets
    bug_of: dict[str, str] = field(default_factory=dict)
    #: bug id -> title, for the bugs of this run
    titles: dict[str, str] = field(default_factory=dict)
    #: this run's bugs with a repro.py that was written and not run (no time left), none of
    #: whose buckets' reproduced: new as before, but not checked yet
    unchecked: set[str] = field(default_factory=set)
    #: this run's bugs whose repro.py did not reproduce under a newer release: bug id -> it
    fixed: dict[str, str] = field(default_factory=dict)

    def text(self, db: Path) -> str:
        """What the run's summary says: new compiler bugs listed, the rest counted; a new bug
        whose repro.py was not run (no triage time left), one fixed in a newer release (known)
        and unconfirmed bugs (this run's, new or seen before) counted and listed apart, never
        among the new compiler bugs: only a reproduction here, and none fixed it, makes one."""
        new = [b for b, s in self.new.items() if s == "new"]
        bugs = [b for b in new if b not in self.unchecked]
        unchecked = [b for b in new if b in self.unchecked]
        doubtful = [b for b, s in {**self.new, **self.known}.items() if s == "unconfirmed"]
        upstream = [b for b, s in self.new.items() if s == "known-upstream"]
        others = sum(s not in ("new", "unconfirmed", "known-upstream")
                     for s in self.new.values())
        lines = [f"bug database {db}: {len(bugs)} new compiler bugs "
                 f"({others} new buckets of ours or known limitations), "
                 f"{len(self.known)} bugs seen before"
                 + (f"; {len(unchecked)} new, not checked yet (repro.py not run)"
                    if unchecked else "")
                 + (f"; {len(upstream)} fixed in a newer release (known)" if upstream else "")
                 + (f"; {len(doubtful)} unconfirmed (their repro.py did not reproduce)"
                    if doubtful else "")]
        lines += [f"  new: {b}  {self.titles.get(b, '')}" for b in bugs]
        lines += [f"  not checked: {b}  {self.titles.get(b, '')}  (repro.py not run yet)"
                  for b in unchecked]
        lines += [f"  fixed upstream: {b}  {self.titles.get(b, '')}  ({self.fixed.get(b, '')})"
                  for b in upstream]
        lines += [f"  unconfirmed: {b}  {self.titles.get(b, '')}" for b in doubtful]
        return "\n".join(lines)


def record(db: BugDb, out_dir: Path, rows: list[dict[str, Any]],
           versions: Callable[[str], list[str]] = installed,
           when: datetime | None = None, reports: dict[str, Path] | None = None) -> Recorded:
    """Add the bugs table `rows` of the triage of `out_dir` to `db` (module doc); locked and
    atomic (`BugDb.update`). `reports`: this run's report.md per group (a bug keeps the latest
    one)."""
    run = str(Path(out_dir).resolve())
    when = when or now()
    vers: dict[str, list[str]] = {}

    def change(bugs: dict[str, Bug]) -> Recorded:
        done = Recorded()
        holder = {i: b.bug for b in bugs.values() for i in b.bucket_ids}
        for name, members in rows_by_bug(rows).items():
            if all(r.get("kind") == "env" for r in members):  # an environment fault: no bug
                continue
            doubtful = any(r.get("status") == "unconfirmed" for r in members)
            fixed = next((r["fixed_in"] for r in members if r.get("fixed_in")), None)
            ids = [r["bucket"] for r in members]
            seen = sorted({holder[i] for i in ids if i in holder},
                          key=lambda b: (bugs[b].first_seen or when, b))
            finding = next((r["finding"] for r in members if r.get("finding")), None)
            if seen:
                bug = bugs[seen[0]]
            elif finding is not None and finding in bugs:  # a note imported (import-findings)
                bug = bugs[finding]
            elif finding is not None:  # a known bug of the notes: its id, status known
                bug = Bug(_fresh(finding, bugs), "known")
                bugs[bug.bug] = bug
            else:
                kind = _kind(members)
                bug = Bug(_fresh(name, bugs), "unconfirmed" if doubtful and kind == "bug"
                          else "known-upstream" if fixed and kind == "bug"
                          else FIRST_STATUS.get(kind, "new"))
                if bug.status == "known-upstream":
                    bug.note = f"fixed in {fixed}: its repro.py does not reproduce there"
                bugs[bug.bug] = bug
            earlier = {s.run for s in bug.sightings} - {run}
            for r in members:
                if r["bucket"] not in bug.bucket_ids:
                    bug.buckets.append({k: r.get(k) for k in KEY_FIELDS})
                    holder[r["bucket"]] = bug.bug
                backend = r["backend"]
                if backend not in vers:
                    vers[backend] = versions(backend)
                bug.sightings = [s for s in bug.sightings
                                 if not (s.run == run and s.bucket == r["bucket"])]
                bug.sightings.append(Sighting(run, r["bucket"], r.get("first_seen") or when,
                                              when, int(r.get("count") or 0), vers[backend]))
                _keep_smallest(bug, r, Path(out_dir))
                done.bug_of[r["bucket"]] = bug.bug
            confirmed_now = False
            if bug.status == "unconfirmed" and any(r.get("repro_status") == "reproduced"
                                                   for r in members):
                bug.status, confirmed_now = "new", True  # new in this run: its first repro
            elif bug.status == "new" and earlier:
                bug.status = "known"
            elif bug.status == "new" and doubtful:  # this run's alone, its repro checked now
                bug.status = "unconfirmed"
            elif bug.status == "fixed":
                bug.status = "known"
                bug.note = ((bug.note + "\n") if bug.note else "") + (
                    f"seen again in {run} after it was marked fixed")
            if reports and name in reports:
                bug.report = str(Path(reports[name]).resolve())
            if bug.title is None:
                bug.title = title(members[0])
            if not confirmed_now and (earlier or bug.bug in done.known
                                      or finding is not None):
                done.known[bug.bug] = bug.status
            else:
                done.new[bug.bug] = bug.status
            done.titles[bug.bug] = bug.title or ""
            if not any(r.get("repro_status") == "reproduced" for r in members) and any(
                    r.get("repro") and r.get("repro_status") is None for r in members):
                done.unchecked.add(bug.bug)  # one bucket's reproduction confirms the bug
            if fixed:
                done.fixed[bug.bug] = fixed
            bug.derive()
        return done

    return db.update(change)


def _kind(rows: list[dict[str, Any]]) -> str:
    kinds = {r.get("kind") for r in rows}
    return "bug" if "bug" in kinds or not kinds else sorted(k for k in kinds if k)[0]


def _fresh(name: str, bugs: dict[str, Bug]) -> str:
    """`name`, or `name-2`, `name-3`, ... when a bug of that id exists already."""
    if name not in bugs:
        return name
    n = 2
    while f"{name}-{n}" in bugs:
        n += 1
    return f"{name}-{n}"


def _keep_smallest(bug: Bug, row: dict[str, Any], out_dir: Path) -> None:
    """Keep the bucket's reduced graph (and its repro.py, report.md) when it is the smallest
    the bug has; a repro.py of an unreduced bucket only while the bug has none."""
    folder = out_dir / row["artifact_path"] if row.get("artifact_path") else None
    repro = str((out_dir / row["repro"]).resolve()) if row.get("repro") else None
    insts = row.get("reduced_insts")
    gir = folder / "graph.gir" if folder is not None else None
    if insts is not None and gir is not None and gir.is_file() and (
            bug.graph_insts is None or insts < bug.graph_insts):
        bug.graph, bug.graph_insts, bug.graph_backend = gir.read_text(), insts, row["backend"]
        if repro:
            bug.repro, bug.repro_status = repro, row.get("repro_status")
    elif repro and (bug.repro is None or bug.repro == repro):
        bug.repro = repro
        bug.repro_status = row.get("repro_status") or bug.repro_status
