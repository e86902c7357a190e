"""The packages' layers, beside ir's own (tests/ir/test_layers.py): Ray stays inside
campaign/driver (workers are plain classes, testable without it), ir knows nothing of campaign
or mutators, and the backends know nothing of the triage (the runtime a backend shares with its
repro script is the backend's own, in its folder: campaign/backends/<backend>/)."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_circles import ROOT, module_name


def imports(files: list[Path]) -> set[tuple[str, str]]:
    """(module, imported module) for every import statement of `files`, function-level and
    type-only ones included."""
    out = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add((module_name(f), node.module))
            elif isinstance(node, ast.Import):
                out |= {(module_name(f), a.name) for a in node.names}
    return out


def sources(*dirs: str) -> list[Path]:
    return [f for d in dirs for f in sorted((ROOT / d).rglob("*.py"))]


def test_ray_is_imported_only_by_the_driver():
    ray = {(m, t) for m, t in imports(sources("campaign", "ir", "mutators") + [ROOT / "run.py"])
           if t.split(".")[0] == "ray"}
    assert any(m.startswith("campaign.driver.") for m, _ in ray)  # the walk sees its imports
    assert {(m, t) for m, t in ray if not m.startswith("campaign.driver.")} == set()


def test_ir_imports_neither_campaign_nor_mutators():
    found = {(m, t) for m, t in imports(sources("ir")) if t.split(".")[0] in ("campaign", "mutators")}
    assert found == set()


def test_the_backends_import_nothing_of_the_triage():
    walked = imports(sources("campaign/backends"))
    assert ("campaign.backends.base", "campaign.backends.repro_scripts.prelude") in walked
    assert {(m, t) for m, t in walked if t.startswith("campaign.triage")} == set()
