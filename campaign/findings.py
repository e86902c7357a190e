"""Artifact folders for findings: `<root>/findings/<backend>/<verdict>/<test_id>/<files>`.

Invariants: a folder under `findings/<backend>/<verdict>/` whose name does not start with "."
is complete (files are written into a ".tmp-" folder that is then renamed); at most
`max_per_signature` folders are kept per (backend, verdict, error_sig) in one store, while every
finding is counted.
"""
from __future__ import annotations

import logging
import os
import shutil
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Protocol

FINDINGS_DIR = "findings"
log = logging.getLogger(__name__)


class FindingLike(Protocol):
    """What the store needs of a `campaign.worker.Finding`."""

    test_id: str
    backend: str
    verdict: str
    error_sig: str | None
    files: dict[str, bytes]


SignatureKey = tuple[str, str, str]  # (backend, verdict, error_sig or "")


def _safe_part(s: str, what: str) -> str:
    if not s or s in (".", "..") or "/" in s or "\\" in s or s.startswith("."):
        raise ValueError(f"finding: unusable {what} {s!r} for a folder name")
    return s


def _safe_relpath(name: str) -> PurePosixPath:
    p = PurePosixPath(name)
    if not name or p.is_absolute() or any(part in ("..", "") for part in p.parts):
        raise ValueError(f"finding: file name {name!r} must be a relative path inside the folder")
    return p


class FindingStore:
    """Writes findings' artifact files, capped per signature; one instance per campaign run."""

    def __init__(self, root: Path, max_per_signature: int) -> None:
        self.root = Path(root)
        self.dir = self.root / FINDINGS_DIR
        self.max_per_signature = max_per_signature
        self.counts: Counter[SignatureKey] = Counter()  #: every finding seen
        self.stored: Counter[SignatureKey] = Counter()  #: findings given a folder
        #: findings whose folder could not be written (a full disk): counted, not stored
        self.write_errors = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def folders(self) -> int:
        return sum(self.stored.values())

    def add(self, finding: FindingLike) -> str | None:
        """Count the finding and, under the cap, write its files; return the folder relative to
        the store's root (for the row's `finding_dir`), or None when capped."""
        parent = self.dir / _safe_part(finding.backend, "backend") / _safe_part(finding.verdict, "verdict")
        final = parent / _safe_part(finding.test_id, "test id")
        files = {_safe_relpath(name): data for name, data in finding.files.items()}
        key: SignatureKey = (finding.backend, finding.verdict, finding.error_sig or "")
        self.counts[key] += 1
        if self.stored[key] >= self.max_per_signature:
            return None
        tmp = parent / f".tmp-{finding.test_id}"
        try:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            for rel, data in files.items():
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        except OSError as e:  # a full disk: the row still counts the finding
            shutil.rmtree(tmp, ignore_errors=True)
            if not self.write_errors:
                log.warning("findings: cannot write to %s (%s); folders are skipped until it "
                            "works again (their rows have no finding_dir)", self.dir,
                            e.strerror or e)
            self.write_errors += 1
            return None
        try:
            os.rename(tmp, final)
        except OSError:
            # Already there (the same test id stored twice): keep the first, complete copy.
            shutil.rmtree(tmp)
            if not final.is_dir():
                raise
        self.stored[key] += 1
        return final.relative_to(self.root).as_posix()
