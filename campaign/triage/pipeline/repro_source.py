"""The source of a bug folder's repro.py: the backend's script parts (`ReproSpec`, the
modules of `campaign.backends.repro_scripts` and the backend's body), the program, the
expected outcome and tolerances assembled into one standalone script (`repro_source`,
`assemble`). `campaign.triage.pipeline.repro` writes and runs it; `cache_repro` assembles a
cache test's from the same parts."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from campaign.backends.base import ReproSpec, breaks_graph, compiled_dialect


def repro_spec_of(spec: str) -> ReproSpec | None:
    """How backend spec `spec` is reproduced (`Backend.repro_spec`), or None (no repro.py)."""
    from campaign.backends import make_backend

    try:
        return make_backend(spec).repro_spec()
    except Exception:
        return None


def program_dialect(how: ReproSpec | None, seed: int,
                    allowed: tuple[str, ...] | None = None) -> str:
    """The dialect the torch program of a test of this seed is printed in, for a backend
    reproduced as `how`: the one it compiles (`Backend.dialect_for`; `allowed`: the dialects
    the test's mode runs in, `TestMode.dialects`); `python` for a backend that takes the ONNX
    model (or none)."""
    if how is None:
        return "python"
    return compiled_dialect(how.dialect, seed, allowed, how.adapts_dialect) or "python"


#: the package of the script parts every backend's script shares (campaign/backends/repro_scripts:
#: its docstring says the rules); a backend's own parts are in its folder (`ReproBodies`)
SCRIPTS = "campaign.backends.repro_scripts"
#: the lines around a part's per-test values
VALUES_START, VALUES_END = "# ---- per-test values", "# ---- end of per-test values"
#: dynsmith's own packages: a part's imports of them are dropped from its copy
_OWN = ("campaign", "ir", "mutators")

_MAIN = '''


if __name__ == "__main__":
    apply_settings(globals(), sys.argv[1:])
    if "--localize" in sys.argv:
        localize(globals().get("ablate"), sys.argv[1:])
    else:
        watchdog()
        main()
'''


def repro_source(spec: ReproSpec, graph, expect: dict[str, Any],
                 tolerances: list[tuple[float, float]], header: str, seed: int = 0,
                 grad=None, transform=None, dyn=None) -> str:
    """The text of `repro.py` for a backend's `ReproSpec`: the parts its backend names for the
    test (`ReproSpec.bodies`), copied with the test's values. `grad`: a gradient test's `GradSpec` (its leaves; the
    cotangents go in the folder), which a backend that trains differentiates; `transform`: a
    transform test's `TransformSpec` (transform.json and transform.npz go in the folder),
    whose program it compiles; `dyn`: a dynamic-shape test's `DynShape` (`graph` is input set
    0's; the torch program computes its shapes from its inputs' sizes: `ReproBodies.dynshape`)."""
    from ir.materialize.form import DEFAULT_FORM
    from ir.materialize.torch_source import torch_source

    bodies = spec.bodies
    if bodies is None:
        raise ValueError(f"no standalone reproducer for backend kind {spec.kind!r}")
    if dyn is not None and (bodies.dynshape is None or transform is not None):
        raise ValueError(f"no standalone reproducer of a dynamic-shape "
                         f"{'transform ' if transform is not None else ''}test for backend "
                         f"kind {spec.kind!r}")
    transforms = transform is not None and spec.runs_transforms
    trains = grad is not None and spec.trains and not transforms
    labels = (transform.labels(graph) if transforms else grad.labels(graph) if trains else
              [f"output {i}" for i in range(len(graph.outputs))])
    values: dict[str, Any] = {
        "EXPECT": expect, "TOLERANCES": tolerances, "LABELS": labels, "GRADIENTS": trains,
        "INPUTS": [v.name for v in graph.inputs], "PARAMS": [p.name for p in graph.params],
        **{k.upper(): v for k, v in spec.options.items()}}
    parts, body = [f"{SCRIPTS}.prelude", f"{SCRIPTS}.localize"], bodies.infer
    if dyn is not None and bodies.dynshape is not None:
        body = bodies.dynshape
        if spec.dialect is not None:  # the torch program's marks and the sets' shapes
            from campaign.dynamic_shapes import generic

            values.update(
                DYNAMIC=None, SHAPE_SETS=dyn.shape_labels(), DYNAMIC_DIMS=dyn.marked_axes(graph),
                GENERIC_SETS=[generic(dyn, dyn.assignment_of_set(k))
                              for k in range(len(dyn.set_assignment))])
    if trains:
        if bodies.training is not None:  # the backend's own training (relax_training)
            body = bodies.training
        else:  # torch autograd (train_step)
            parts.append(f"{SCRIPTS}.training")
        values.update(LEAVES=list(grad.leaves), OUTPUTS=list(graph.outputs))
    if transforms:
        parts.append("ir.materialize.torch_func")
        values["OUTPUTS"] = list(graph.outputs)
        assert bodies.transform is not None
        body = bodies.transform
    program = ""
    if spec.dialect is not None:  # the graph as torch code
        dialect = program_dialect(spec, seed, transform.dialects if transforms else None)
        if breaks_graph(spec.dialect, dialect) and "FULLGRAPH" in values:
            values["FULLGRAPH"] = False  # python ones break the graph, as the fuzzer runs them
        if transforms and dialect not in transform.dialects:
            raise ValueError(f"{transform.name}: torch eager runs this test only in the "
                             f"{' or '.join(transform.dialects)} dialect, not {dialect}")
        leaf_params = (transform.param_leaves(graph) if transforms else
                       grad.param_leaves(graph) if trains else frozenset())
        src = torch_source(graph, dialect, spec.form or DEFAULT_FORM, leaf_params, dyn=dyn)
        if any(m.endswith(".torch_compile") for m in body):  # the plan names it when eager fails alike
            values["HIGHER_ORDER_OPS"] = higher_order_ops(graph) if dialect == "hop" else []
        program = "import torch\n" + "\n".join(line for line in src.splitlines()
                                               if line != "import torch").strip("\n")
    return assemble(spec.kind, parts, program, body, values, header)


def assemble(kind: str, parts: list[str], program: str, body: tuple[str, ...],
             values: dict[str, Any], header: str) -> str:
    """The script: `header` as its docstring, the shared `parts`, the torch `program` (if
    any), the `body` parts, each part with the test's `values` (every one declared by some
    part), and the main block."""
    declared: set[str] = set()
    texts = [part_source(m, values, declared) for m in parts]
    texts += [program] if program else []
    texts += [part_source(m, values, declared) for m in body]
    unused = sorted(set(values) - declared)
    if unused:
        raise ValueError(f"repro {kind}: no part declares {', '.join(unused)}")
    return (f'"""{header}"""\nfrom __future__ import annotations\n\n'
            + "\n\n\n".join(texts) + _MAIN)


def higher_order_ops(graph) -> list[str]:
    """The torch higher-order ops (`ControlFlow.torch_hop`) the `hop` dialect of `graph`
    calls, bodies included, in order of first use."""
    found: list[str] = []
    for inst, _ in graph.walk():
        hop = getattr(inst.op, "torch_hop", "")
        if hop and hop not in found:
            found.append(hop)
    return found


def part_source(module: str, values: dict[str, Any] | None = None,
                declared: set[str] | None = None) -> str:
    """The text of module `module` (dotted name) as a part of a repro script: a plain Python
    file that ruff and mypy check, importing only the standard library, numpy and a backend's
    own library (campaign/backends/repro_scripts, `ir.materialize.torch_func`). The copy drops
    the module docstring, `from __future__` (which must open a file) and imports of dynsmith's
    own packages (names of earlier parts), and writes each of its per-test values (the
    assignments between `VALUES_START` and `VALUES_END`) as `NAME = <repr of values[NAME]>`;
    their names are added to `declared`."""
    import ast
    import importlib.util

    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise ValueError(f"repro part {module!r}: no such module")
    text = Path(found.origin).read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    out: dict[int, str | None] = {}  # line index -> its replacement (None: dropped)

    def drop(node: ast.stmt) -> None:
        for i in range(node.lineno - 1, node.end_lineno or node.lineno):
            out[i] = None

    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        drop(first)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").split(".")[0] in ("__future__", *_OWN)):
            drop(node)
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in _OWN
                                                  for a in node.names):
            raise ValueError(f"repro part {module}: imports a dynsmith package as a whole")
    start = lines.index(VALUES_START) if VALUES_START in lines else len(lines)
    end = lines.index(VALUES_END) if VALUES_END in lines else len(lines)
    for node in tree.body:
        if not start < node.lineno - 1 < end:
            continue
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) else None)
        if not isinstance(target, ast.Name):
            raise ValueError(f"repro part {module}, line {node.lineno}: a per-test value "
                             "is one plain assignment to a name")
        if values is None or target.id not in values:
            raise ValueError(f"repro part {module}: no value for {target.id}")
        drop(node)
        out[node.lineno - 1] = f"{target.id} = {values[target.id]!r}"
        if declared is not None:
            declared.add(target.id)
    kept = [out.get(i, line) for i, line in enumerate(lines)]
    src = "\n".join(line for line in kept if line is not None)
    return re.sub(r"\n{4,}", "\n\n\n", src).strip("\n")


def repro_tolerances(graph, grad=None, transform=None) -> list[tuple[float, float]]:
    """Per output (then per leaf's gradient, for a gradient test `grad`), or per result of a
    transform test (`transform`): (rtol, atol)."""
    from ir.analysis.precision import gradient_tolerances, output_tolerances

    if transform is not None:
        from campaign.modes.transform import transform_tolerances

        return [(t.rtol, t.atol) for t in transform_tolerances(graph, transform)[0]]
    tols = output_tolerances(graph)
    if grad is not None:
        tols += gradient_tolerances(graph, grad.leaves)
    return [(t.rtol, t.atol) for t in tols]
