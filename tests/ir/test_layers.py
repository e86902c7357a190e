"""ir/ in layers: every import (function-level ones included) points to the same layer or one
below, there is no import circle, and no module imports another's private name."""
from __future__ import annotations

import ast

from tests.test_import_circles import ROOT, module_name, type_only_nodes

#: the layers of ir/, lowest first (docs/architecture.md#packages)
LAYERS = ["core", "ops", "analysis", "materialize", "numerics", "shrink", "gen", "importers"]


def _imports(package: str, type_only: bool = True) -> dict[str, list[tuple[int, str, list[str]]]]:
    """module -> (line, imported module, imported names) for every `ir`/`mutators`/`campaign`
    import in it (`type_only`: those under `if TYPE_CHECKING:` too)."""
    out = {}
    for f in sorted((ROOT / package).rglob("*.py")):
        found = []
        tree = ast.parse(f.read_text())
        skip = set() if type_only else type_only_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split(".")[0] in ("ir", "mutators", "campaign"):
                found.append((node.lineno, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                found += [(node.lineno, a.name, []) for a in node.names
                          if a.name.split(".")[0] in ("ir", "mutators", "campaign")]
        out[module_name(f)] = found
    return out


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_ir_module_sits_in_a_layer():
    loose = [m for m in _imports("ir") if m != "ir" and _layer(m) is None]
    assert loose == []


def test_ir_imports_point_down_the_layers_only():
    upward = []
    for module, imports in _imports("ir").items():
        here = _layer(module)
        for line, target, _ in imports:
            there = _layer(target)
            if here and there and LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"{module}:{line} ({here}) imports {target} ({there})")
    assert upward == []


def test_ir_has_no_import_circle():
    """Imports that run; a type-only one (`if TYPE_CHECKING:`) may point back within a layer:
    core's graph <-> op, as an instruction holds an op and a control-flow op's rules take
    bodies. Their direction is checked above like any import."""
    imports = _imports("ir", type_only=False)
    graph = {m: {t if t in imports else t.rsplit(".", 1)[0] for _, t, _ in found} - {m}
             for m, found in imports.items()}
    # a `from ir.x import y` where y is a module counts as importing ir.x.y
    for m, found in imports.items():
        graph[m] |= {f"{t}.{n}" for _, t, names in found for n in names if f"{t}.{n}" in imports}
        graph[m] -= {"ir", m}  # the package's own __init__ re-exports: not a layer edge
    circles, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = "open"
        for t in sorted(graph.get(m, ())):
            if t not in graph:
                continue
            if state.get(t) == "open":
                circles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == []


def test_no_module_imports_a_private_name_of_another():
    private = [f"{m}:{line} imports {target}.{name}"
               for package in ("ir", "mutators", "campaign")
               for m, found in _imports(package).items()
               for line, target, names in found for name in names
               if name.startswith("_") and target != m]
    assert private == []
