"""The standalone repro.py of a cache test's finding (`campaign.modes.cache`, docs/extensions.md):
the test's program and its near-twin's, printed as torch code (`ir.materialize.torch_source`),
and the backend's cache body (`ReproBodies.cache`: Inductor's campaign/backends/inductor/
repro_cache.py), which turns on both compile caches as the backend does
(campaign/backends/inductor/caches.py, copied), compiles and runs the twin in a fresh cache
directory, then the test warm there and cold in another, and judges both against eager's
outputs (expected.npz: each set's outputs twice) with the test's tolerances.

The programs are held as source text (`TEST_PROGRAM`, `TWIN_PROGRAM`), each run in a namespace
of its own when its turn comes: a `schema` twin's custom op is printed under the test's op's
name (`CacheSpec.rename`) and registered only for the twin's run.
"""
from __future__ import annotations

import ast
from typing import Any

from campaign.backends.base import ReproSpec, breaks_graph
from campaign.triage.pipeline.repro_source import (
    SCRIPTS,
    assemble,
    higher_order_ops,
    program_dialect,
    repro_tolerances,
)


def cache_repro_source(how: ReproSpec, tc: Any, graph: Any, expect: dict[str, Any],
                       header: str, seed: int = 0) -> str:
    """The text of repro.py for cache test `tc` (its `CacheSpec` in `tc.cache`) whose graph
    is `graph`, on a backend reproduced as `how`; `expect` and `header` as `repro_source`
    takes them. Raises ValueError when there is none: the backend has no cache body, or the
    near-twin was drawn for another graph (a reduced one)."""
    from campaign.modes.cache import CACHE, CacheSpec
    from ir.materialize.form import DEFAULT_FORM
    from ir.materialize.torch_source import SOURCE_NAMESPACE, torch_source

    bodies = how.bodies
    if bodies is None or bodies.cache is None or how.dialect is None:
        raise ValueError(f"no standalone reproducer of a cache test for backend kind "
                         f"{how.kind!r}")
    spec = tc.cache
    if not isinstance(spec, CacheSpec):
        raise ValueError("a cache test without its near-twin (no CacheSpec)")
    if tc.graph != graph:
        raise ValueError("the near-twin was drawn for another graph than this one")
    dialect = program_dialect(how, seed, CACHE.dialects(tc))
    form = how.form or DEFAULT_FORM
    test_src = torch_source(graph, dialect, form)
    twin_graph = spec.twin_graph(tc)
    twin_src = None if spec.graph is None else torch_source(twin_graph, dialect, form)
    renamed = []
    for twin_name, test_name in spec.rename.items():  # the twin's op under the test's op's name
        old, new = twin_name.partition("::")[2], test_name.partition("::")[2]
        # (the functional form prints every op pure: the backend's twin calls no op of that
        # name either, and registers it for nothing)
        if twin_src is not None and old in twin_src:
            twin_src = twin_src.replace(old, new)
            renamed.append(f"{SOURCE_NAMESPACE}::{new}")
    values: dict[str, Any] = {
        "EXPECT": expect, "TOLERANCES": repro_tolerances(graph) * 2, "LABELS": CACHE.labels(tc),
        "GRADIENTS": False, "INPUTS": [v.name for v in graph.inputs],
        "PARAMS": [p.name for p in graph.params],
        **{k.upper(): v for k, v in how.options.items()},
        "HIGHER_ORDER_OPS": higher_order_ops(graph) if dialect == "hop" else [],
        "TWIN": spec.twin, "TWIN_DESCRIBE": spec.describe(), "TWIN_STRIDED": spec.strided,
        "TWIN_CONFIG": dict(spec.config), "TWIN_RENAMED": renamed,
        "TWIN_VALUES": "inputs.npz" if spec.values is None else "twin_inputs.npz",
        "TWIN_INPUTS": [v.name for v in twin_graph.inputs],
        "TWIN_PARAMS": [p.name for p in twin_graph.params]}
    if breaks_graph(how.dialect, dialect) and "FULLGRAPH" in values:
        values["FULLGRAPH"] = False  # python ones break the graph, as the fuzzer runs them
    program = ("# ---- the test's program (graph.gir as torch code: `Model`), run when its turn "
               "comes (load_program)\n"
               f"TEST_PROGRAM = {source_literal(test_src)}\n\n"
               "# ---- the near-twin's program: " + spec.describe() + "\n"
               + ("TWIN_PROGRAM = TEST_PROGRAM" if twin_src is None else
                  f"TWIN_PROGRAM = {source_literal(twin_src)}"))
    header += twin_header(spec).replace("\\", "\\\\").replace('"""', "'''")
    return assemble(how.kind, [f"{SCRIPTS}.prelude", f"{SCRIPTS}.localize"], program,
                    bodies.cache, values, header)


def source_literal(src: str) -> str:
    """`src` as a Python string literal that reads as the code it holds (a raw triple-quoted
    one where that gives `src` back, else its repr)."""
    text = "r'''" + src + "'''"
    try:
        if ast.literal_eval(text) == src:
            return text
    except (SyntaxError, ValueError):
        pass
    return repr(src)


def twin_header(spec: Any) -> str:
    """What the script's docstring says of the cache test and its near-twin."""
    files = ", ".join(["cache_twin.json"] + (["twin.gir"] if spec.graph is not None else [])
                      + (["twin_inputs.npz"] if spec.values is not None else []))
    return ("\nA cache test: with the FX graph cache and the AOT autograd cache on, its near-twin "
            "is compiled\nand run in a fresh cache directory, then the test there (warm), then "
            "the test in another\nfresh one (cold); both must give eager's outputs (expected.npz "
            "holds each input set's outputs\ntwice: warm, then cold). The near-twin "
            f"({files}):\n\n    {spec.twin}: {spec.describe()}\n")
