"""Bucket keys for findings and the `bugs` Parquet table.

A *bucket* is one presumed bug. Its key:
  - crashes, signals, timeouts (and `invalid` / `unsupported` rows, bucketed for counting):
    (backend, target, verdict, stage, normalized error signature `error_sig`; a timeout's
    without its frames, see `bucket_signature`);
  - mismatches: (backend, target, "mismatch", the *op pattern* of the reduced graph): its
    canonical text without shapes or attributes, dtypes kept (the reducer already simplified
    every dtype the failure does not need), e.g.
    `graph(%x0: f32) { %v1 = atan(%x0) : f32; return %v1 }`;
  - both end with the compiler *configuration* (`campaign.backends.configs`, the row's
    `backend_config`): for a reduced bucket the reduced one (the options the failure needs),
    else the one the finding ran. Two findings whose configurations reduce to the same options
    share a bucket; a row that was not reduced joins the reduced bucket whose options it
    holds (`config_covers`).
The bucket id (a folder name) is `<backend>-<verdict>-<10 hex of SHA-1 over the key>`; a key
with the backend's own configuration ('') hashes as it did before configurations existed.

The `bugs` table (`<out>/bugs.parquet`, schema `BUGS_SCHEMA`) has one row per bucket: its key,
first seen, count of result rows, example test ids, the artifact folder (relative to the output
dir), its configuration (`backend_config`, the reduced one for a reduced bucket), sizes before
and after reduction, `repro` (the repro.py path) and `repro_status` (how it
fared when run fresh: reproduced, not reproduced, different failure, error, none),
`culprit` (where in the compiler the fault is, `campaign.triage.pipeline.localization`), and
`status` (`Bucket.status`: what the bucket is to the bug database).

A harness failure is never a compiler bug: a new compiler-bug bucket of a bug whose repro.py was
run and did not reproduce (`REPRO_FAILED`; no bucket of the bug reproduced) is `unconfirmed`,
not `new`; the buckets of an environment fault the campaign named (`campaign.env_fault`) are of
kind `env`, status `environment`. A bug fixed in a newer release is known: a new bucket whose
repro.py reproduced here and not under a newer interpreter (`TriageConfig.newer_pythons`) has
`fixed_in` (that release) and status `known-upstream`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from ir.core.graph import Graph

#: verdicts that are compiler bugs (reduced, reproduced); `invalid` is ours, `unsupported` known
BUG_VERDICTS = ("crash", "signal", "timeout", "mismatch", "recompile")
#: bucket kinds by verdict (a bugs table's `kind` is `env` instead for the buckets of an
#: environment fault: `Bucket.env_fault`)
KIND = {"crash": "bug", "signal": "bug", "timeout": "bug", "mismatch": "bug",
        "recompile": "bug", "invalid": "ours", "unsupported": "known"}
#: `repro_status` outcomes of a repro.py that was run and did not reproduce the failure (null:
#: not run, for lack of time or `check_repro` off; `none`: no repro.py for the backend)
REPRO_FAILED = ("not reproduced", "different failure", "error")
#: a new bucket's status by kind, when it is not a compiler bug (`Bucket.status`)
_OTHER_STATUS = {"ours": "ours", "known": "limitation", "env": "environment"}


def unconfirmed(repro_statuses: Iterable[str | None]) -> bool:
    """Whether a bug whose buckets' repro.py fared so is unconfirmed: some was run and did
    not reproduce (`REPRO_FAILED`), none reproduced."""
    seen = list(repro_statuses)
    return "reproduced" not in seen and any(s in REPRO_FAILED for s in seen)


@dataclass(frozen=True)
class BucketKey:
    """One bucket's key (module doc). `config` is canonical configuration text
    (`campaign.backends.configs.config_text`), '' for the backend spec's own."""

    backend: str
    target: str
    verdict: str
    stage: str | None = None
    error_sig: str | None = None
    pattern: str | None = None
    config: str = ""

    def fields(self) -> list[Any]:
        """The key as a JSON list: six fields, a seventh (the configuration) when it is not
        the backend's own (so keys of '' keep the ids they had before configurations)."""
        out = [self.backend, self.target, self.verdict, self.stage, self.error_sig,
               self.pattern]
        return out + [self.config] if self.config else out

    def text(self) -> str:
        return json.dumps(self.fields())

    def base(self) -> BucketKey:
        """This key with the backend's own configuration: what findings of one failure in
        several configurations share."""
        return replace(self, config="")

    @property
    def id(self) -> str:
        h = hashlib.sha1(self.text().encode()).hexdigest()[:10]
        return f"{_safe(self.backend)}-{self.verdict}-{h}"

    @property
    def kind(self) -> str:
        return KIND.get(self.verdict, "other")


def _safe(s: str) -> str:
    return re.sub(r"[^\w.-]+", "_", s).strip("._")[:40] or "backend"


def crash_key(row: dict[str, Any]) -> BucketKey:
    """The key of a non-mismatch finding row (crash, signal, timeout, invalid, unsupported),
    in the configuration it ran (`backend_config`)."""
    return BucketKey(row["backend"], row.get("target") or "", row["verdict"], row.get("stage"),
                     bucket_signature(row["verdict"], row.get("error_sig")),
                     config=row.get("backend_config") or "")


def config_covers(reduced: str, config: str) -> bool:
    """Whether configuration `config` sets every option of the (reduced) configuration
    `reduced` to the same value: a failure that needs only `reduced` can be `config`'s. The
    backend's own configuration ('') is covered by every one."""
    if not reduced:
        return True
    have = set(filter(None, config.split("&")))
    return all(part in have for part in reduced.split("&"))


def bucket_signature(verdict: str, error_sig: str | None) -> str:
    """The signature a bucket keys on: the row's `error_sig`, except that a timeout drops its
    frames (where the process happened to be when it was killed: incidental, so a slow
    compile would otherwise make a new bucket per test)."""
    sig = error_sig or ""
    if verdict == "timeout":
        sig = sig.split(" @ ", 1)[0]
    return sig


def op_pattern(g: Graph) -> str:
    """The canonical op pattern of a (reduced) graph: its canonical text without shapes and
    attributes, on one line; inputs and params ordered by first use (the order the graph
    declares them in is incidental)."""
    from dataclasses import replace

    from ir.core.rewrite import rename_canonically

    first: dict[str, int] = {}
    for i, inst in enumerate(g.insts):
        for a in inst.args:
            first.setdefault(a, i)
    for o in g.outputs:
        first.setdefault(o, len(g.insts))

    def order(vs):
        return tuple(sorted(vs, key=lambda v: first.get(v.name, len(g.insts) + 1)))

    return _pattern(rename_canonically(replace(g, inputs=order(g.inputs), params=order(g.params))))


def _pattern(g: Graph) -> str:
    decls = [f"%{v.name}: {v.type.dtype.short}" for v in g.inputs] + [
        f"%{v.name}: param {v.type.dtype.short}" for v in g.params]
    parts = []
    for inst in g.insts:
        res = ", ".join(f"%{r.name}" for r in inst.results)
        args = ", ".join(f"%{a}" for a in inst.args)
        types = ", ".join(r.type.dtype.short for r in inst.results)
        s = f"{res} = {inst.op.name}({args}) : {types}"
        if inst.blocks:
            s += " {" + " ".join(_pattern(b) for b in inst.blocks) + "}"
        parts.append(s)
    parts.append("return " + ", ".join(f"%{o}" for o in g.outputs))
    return f"graph({', '.join(decls)}) {{ " + "; ".join(parts) + " }"


def pattern_ops(pattern: str) -> set[str]:
    """The op names in a pattern."""
    return set(re.findall(r"= ([A-Za-z_][A-Za-z0-9_]*)\(", pattern))


def mismatch_key(backend: str, target: str, reduced: Graph, config: str = "") -> BucketKey:
    """The key of a mismatch reduced to `reduced` in configuration `config`."""
    return BucketKey(backend, target, "mismatch", "compare", None, op_pattern(reduced), config)


#: the pattern of mismatches no reduction explains (not reduced: over the cap or the budget)
UNREDUCED = "unreduced"


@dataclass
class Bucket:
    key: BucketKey
    new: bool = True
    first_seen: datetime | None = None
    count: int = 0
    #: (ts, test_id, finding_dir) of every member, in arrival order
    members: list[tuple[Any, str, str | None]] = field(default_factory=list)
    artifact_path: str | None = None
    original_insts: int | None = None
    reduced_insts: int | None = None
    reduction_tests: int | None = None
    reduction_s: float | None = None
    #: op pattern of the representative's reduced graph (crash buckets too: two buckets
    #: whose signatures differ only in, say, a rank may reduce to one pattern)
    reduced_pattern: str | None = None
    #: the triage re-ran a member and it failed the same way (False: it did not; None: not run)
    confirmed: bool | None = None
    #: repro.py relative to the output dir, when one was written
    repro: str | None = None
    #: how the repro.py fared run fresh (`campaign.triage.pipeline.repro.check_repro`)
    repro_status: str | None = None
    note: str | None = None
    #: the bug (cause) this bucket belongs to: the id of its group's representative bucket
    #: (`campaign.triage.pipeline.grouping`); None: not grouped yet (a bug of its own)
    bug: str | None = None
    #: why it is in that bug: the grouping rule that linked it ('' for the representative)
    bug_reason: str | None = None
    #: a training bug: which part of the training step is wrong, and how `aot_eager` fares
    #: on the same test (`campaign.triage.pipeline.training_ablation`); None: not a training bug, or
    #: not ablated
    wrong_part: str | None = None
    aot_eager: str | None = None
    #: the finding note (docs/findings) whose trigger this bucket's key is: a known bug,
    #: named by its id (`campaign.triage.pipeline.note_known`); None: no note's
    finding: str | None = None
    #: where in the compiler the fault is (`campaign.triage.pipeline.localization`): the
    #: culprit (`ort: TransposeOptimizer`), or `not localized: <why>`; None: not localized
    culprit: str | None = None
    #: its bug's repro.py was run and did not reproduce, and no bucket of the bug's did
    #: (`unconfirmed`; set once the buckets are grouped into bugs)
    unconfirmed: bool = False
    #: the environment fault (`campaign.env_fault`, its one line) whose rows these are: not a
    #: compiler bug, not reduced
    env_fault: str | None = None
    #: the newer release whose interpreter ran its reproducing repro.py and did not reproduce
    #: (`TriageConfig.newer_pythons`, e.g. `torch 2.14.1+cu130`): fixed upstream, a known bug
    fixed_in: str | None = None

    @property
    def kind(self) -> str:
        """The key's kind, or `env` for an environment fault's bucket."""
        return "env" if self.env_fault else self.key.kind

    @property
    def status(self) -> str:
        """What the bucket is to the bug database (`campaign.triage.bugdb.store.STATUSES`):
        a compiler bug's `new` (not known before), `unconfirmed` (new, its bug's repro.py did
        not reproduce), `known-upstream` (new to us, fixed in a newer release: `fixed_in`) or
        `known`; else by kind `ours`, `limitation`, `environment`."""
        if self.kind != "bug":
            return _OTHER_STATUS.get(self.kind, "new" if self.new else "known")
        if not self.new:
            return "known"
        if self.unconfirmed:
            return "unconfirmed"
        return "known-upstream" if self.fixed_in else "new"

    def add(self, ts: Any, test_id: str, finding_dir: str | None) -> None:
        self.count += 1
        self.members.append((ts, test_id, finding_dir))
        if ts is not None and (self.first_seen is None or ts < self.first_seen):
            self.first_seen = ts

    def examples(self, n: int = 5) -> list[str]:
        ordered = sorted(self.members, key=lambda m: (m[0] is None, m[0] or 0, m[1]))
        return list(dict.fromkeys(m[1] for m in ordered))[:n]

    def row(self) -> dict[str, Any]:
        k = self.key
        return {
            "bucket": k.id, "bug": self.bug or k.id, "bug_reason": self.bug_reason,
            "backend": k.backend, "target": k.target, "verdict": k.verdict,
            "stage": k.stage, "error_sig": k.error_sig, "pattern": k.pattern,
            "backend_config": k.config, "kind": self.kind, "status": self.status,
            "new": self.new, "first_seen": self.first_seen, "count": self.count,
            "example_test_ids": self.examples(), "artifact_path": self.artifact_path,
            "original_insts": self.original_insts, "reduced_insts": self.reduced_insts,
            "reduction_tests": self.reduction_tests, "reduction_s": self.reduction_s,
            "confirmed": self.confirmed, "reduced_pattern": self.reduced_pattern,
            "repro": self.repro, "repro_status": self.repro_status,
            "note": self.env_fault or self.note,
            "wrong_part": self.wrong_part, "aot_eager": self.aot_eager,
            "finding": self.finding,
            "culprit": self.culprit, "fixed_in": self.fixed_in,
        }


BUGS_SCHEMA = pa.schema([
    ("bucket", pa.string()), ("bug", pa.string()), ("bug_reason", pa.string()),
    ("backend", pa.string()), ("target", pa.string()),
    ("verdict", pa.string()), ("stage", pa.string()), ("error_sig", pa.string()),
    ("pattern", pa.string()), ("backend_config", pa.string()), ("kind", pa.string()),
    ("new", pa.bool_()),
    ("first_seen", pa.timestamp("ms", tz="UTC")), ("count", pa.int64()),
    ("example_test_ids", pa.list_(pa.string())), ("artifact_path", pa.string()),
    ("original_insts", pa.int32()), ("reduced_insts", pa.int32()),
    ("reduction_tests", pa.int32()), ("reduction_s", pa.float64()), ("confirmed", pa.bool_()),
    ("reduced_pattern", pa.string()),
    ("repro", pa.string()), ("repro_status", pa.string()), ("note", pa.string()),
    ("wrong_part", pa.string()), ("aot_eager", pa.string()), ("culprit", pa.string()),
    ("finding", pa.string()), ("status", pa.string()), ("fixed_in", pa.string()),
])

BUGS_FILE = "bugs.parquet"


def write_bugs_table(path: Path, buckets: list[Bucket]) -> Path:
    """Write the table (temp file, then rename: a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [b.row() for b in sorted(buckets, key=lambda b: (b.key.kind != "bug", -b.count,
                                                             b.key.id))]
    table = pa.Table.from_pylist(rows, schema=BUGS_SCHEMA)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def rows_by_bug(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A bugs table's rows by bug: its `bug` column when present and set, else each bucket."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r.get("bug") or r["bucket"], []).append(r)
    return out


def read_bugs_table(path: Path) -> pa.Table:
    return pq.read_table(path, schema=BUGS_SCHEMA)


def known_bucket_ids(paths: list[str]) -> set[str]:
    """Bucket ids of earlier bugs tables (a file, or an output dir holding `bugs.parquet`)."""
    return {r["bucket"] for r in _known_rows(paths)}


def known_bucket_keys(paths: list[str]) -> list[BucketKey]:
    """The keys of earlier bugs tables' buckets (tables from before configurations: the
    backend's own configuration)."""
    return [BucketKey(r["backend"], r["target"] or "", r["verdict"], r["stage"],
                      r["error_sig"], r["pattern"], r.get("backend_config") or "")
            for r in _known_rows(paths)]


def _known_rows(paths: list[str]) -> list[dict[str, Any]]:
    """The rows of earlier bugs tables, but unconfirmed ones: a bucket whose repro.py did not
    reproduce is not known, so the next triage reduces and checks it again."""
    rows: list[dict[str, Any]] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            path = path / BUGS_FILE
        if path.is_file():
            rows += [r for r in read_bugs_table(path).to_pylist()
                     if r.get("status") != "unconfirmed"]
    return rows


def crash_failures(rows: list[dict[str, Any]]) -> dict[BucketKey, list[dict[str, Any]]]:
    """The crash-like rows (every verdict but mismatch) by failure: (backend, target,
    verdict, stage, signature) in any configuration (`BucketKey.base`), in row order."""
    failures: dict[BucketKey, list[dict[str, Any]]] = {}
    for row in rows:
        if row["verdict"] != "mismatch":
            failures.setdefault(crash_key(row).base(), []).append(row)
    return failures


def pattern_fit(row: dict[str, Any], keys: Iterable[BucketKey]) -> BucketKey | None:
    """The reduced mismatch bucket of `keys` of the row's backend whose pattern's ops all
    occur in the row's ops and whose configuration the row's holds (the most specific), or
    None: an unreduced mismatch row joins it (a known one's, without being reduced)."""
    ops = set(row.get("ops") or [])
    config = row.get("backend_config") or ""
    fits = [k for k in keys if k.verdict == "mismatch"
            and k.backend == row["backend"] and k.pattern not in (None, UNREDUCED)
            and pattern_ops(k.pattern) <= ops and config_covers(k.config, config)]
    return max(fits, key=lambda k: (len(pattern_ops(cast(str, k.pattern))),
                                    -len(cast(str, k.pattern)),
                                    k.config.count("&") + bool(k.config)), default=None)
