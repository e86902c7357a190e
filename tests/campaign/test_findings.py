"""Finding folders: complete, named by backend/verdict/test, capped per signature."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from campaign.findings import FindingStore


@dataclass
class F:
    test_id: str
    backend: str
    verdict: str
    error_sig: str
    files: dict


def test_writes_files_and_returns_relative_dir(tmp_path):
    store = FindingStore(tmp_path, max_per_signature=5)
    d = store.add(F("t-1", "ort", "crash", "E: x", {"graph.gir": b"g", "info.json": b"{}"}))
    assert d == "findings/ort/crash/t-1"
    assert (tmp_path / d / "graph.gir").read_bytes() == b"g"
    assert sorted(p.name for p in (tmp_path / d).iterdir()) == ["graph.gir", "info.json"]
    assert not [p for p in (tmp_path / "findings/ort/crash").iterdir() if p.name.startswith(".")]


def test_cap_per_signature_still_counts(tmp_path):
    store = FindingStore(tmp_path, max_per_signature=2)
    dirs = [store.add(F(f"t-{i}", "ort", "crash", "E: x", {"a": b""})) for i in range(4)]
    other = store.add(F("t-9", "ort", "crash", "E: y", {"a": b""}))
    mismatch = store.add(F("t-8", "ort", "mismatch", "E: x", {"a": b""}))
    assert dirs[2:] == [None, None] and None not in dirs[:2]
    assert other is not None and mismatch is not None
    assert store.counts[("ort", "crash", "E: x")] == 4
    assert store.total == 6 and store.folders == 4
    assert len(list((tmp_path / "findings/ort/crash").iterdir())) == 3


def test_rejects_names_escaping_the_folder(tmp_path):
    store = FindingStore(tmp_path, max_per_signature=5)
    with pytest.raises(ValueError, match="must be a relative path"):
        store.add(F("t-1", "ort", "crash", "", {"../evil": b""}))
    with pytest.raises(ValueError, match="unusable test id"):
        store.add(F("../t", "ort", "crash", "", {"a": b""}))
    assert store.total == 0 and not (tmp_path / "findings").exists()
