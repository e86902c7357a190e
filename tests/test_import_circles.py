"""No import circle in dynsmith's packages (ir, mutators, campaign): every import statement that
runs counts, function-level ones included; an import under `if TYPE_CHECKING:` never runs and
does not. A package's own `__init__` is not an edge of its modules (Python imports it first
anyway). Run as a script, it lists the circles:

    python tests/test_import_circles.py
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ir", "mutators", "campaign")


def module_name(path: Path) -> str:
    """The dotted module name of a file of the tree."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def type_only_nodes(tree: ast.Module) -> set[int]:
    """Ids of the nodes under `if TYPE_CHECKING:`."""
    return {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
            and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body for n in ast.walk(stmt)}


def import_graph() -> nx.DiGraph:
    """module -> the modules it imports (at run time)."""
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    g = nx.DiGraph()
    for name, path in files.items():
        g.add_node(name)
        tree = ast.parse(path.read_text())
        skip = type_only_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != name and not name.startswith(t + "."):
                    g.add_edge(name, t)
    return g


def circles() -> list[list[str]]:
    """The import circles: strongly connected components of more than one module."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1)


def test_no_import_circle():
    assert circles() == []


def test_function_level_imports_count_and_type_only_ones_do_not():
    g = import_graph()
    # reduction.py imports the worker inside BackendRunner.worker_for
    assert g.has_edge("campaign.triage.pipeline.reduction", "campaign.worker")
    # op.py names the graph only for the type checker
    assert not g.has_edge("ir.core.op", "ir.core.graph") and g.has_edge("ir.core.graph", "ir.core.op")


if __name__ == "__main__":
    found = circles()
    for c in found:
        print(f"{len(c)} modules: {', '.join(c)}")
    print(f"import circles: {len(found)}")
