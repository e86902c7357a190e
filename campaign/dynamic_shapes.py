"""Dynamic-shape tests in the campaign (docs/dynshape.md): the step of making one that adds its
shapes, and how a backend's run on several shapes is judged.

A dynamic-shape test is a `TestCase` whose `dynshape` (`ir.materialize.dynshape.DynShape`) says which dims
are symbolic; its input sets run different shapes (set k has the assignment
`dynshape.set_assignment[k]`), through one ONNX model with `dim_param`s and one torch module
that computes its shape arguments from its inputs' sizes. Backends compile once and run every
set; the judgement adds three kinds of finding of its own (column `dyn_finding`):
  - `recompile`: the backend compiled again for a later shape although every symbolic dim of
    every value is >= 2 there, as at set 0 (Inductor; 0/1 sizes are specialized by design, so
    a recompile for them is expected and only counted); verdict `recompile` when the outputs
    were right (`unsupported` when an RNN op runs over a symbolic dim: torch.compile unrolls
    RNNs over their sequence, a documented limit);
  - `later_shape_crash`: the backend ran set 0 and failed on a later set;
  - `shape_mismatch`: the outputs are wrong on some shapes only.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np

from campaign.backends.inductor.shape_guards import ANY_RECOMPILE
from campaign.testcase import TestCase
from ir.gen.builder import GenConfig
from ir.gen.symbolic_shapes import finish, wants_dynshape
from ir.materialize.dynshape import DynShape, instantiate
from ir.numerics.input_search import search_inputs
from ir.numerics.values import random_values
from ir.ops.rnn import RECURRENT

__all__ = ["wants_dynshape", "add_shapes", "shape_inputs", "unexpected_recompile",
           "classify", "failing_sets", "case_from_finding"]


def add_shapes(tc: TestCase, dseed: Any, gen: GenConfig) -> TestCase:
    """The dynamic-shape step of `FuzzWorker.make_test`, after its inputs and coverage sets
    (all of set 0's shape): lift the final graph with the symbols its generation kept
    (`dseed`, from `generate_dyn`), draw the shape assignments and search inputs for each
    other shape (params shared; a shape whose search fails is dropped). A test whose symbols
    all end up pinned, or with no valid inputs for another shape, stays static (lineage says
    so). Either way the reference outputs of the coverage search are dropped: the reference
    runs every set."""
    g, values, seed, lineage = tc.graph, tc.values, tc.seed, tc.lineage
    static = dataclasses.replace(tc, ref_outputs=None)
    done = finish(g, dseed, gen, random.Random(f"dynshape-sets/{seed}"))
    if done.dyn is None:
        lineage.append({"dynshape": "static", "reason": done.reason})
        return static
    dyn = done.dyn
    params = {p.name: values[p.name] for p in g.params}
    extra = list(tc.extra_inputs)
    kept = [dyn.assignments[0]]
    set_assignment = [0] * (1 + len(extra))
    for k, a in enumerate(dyn.assignments[1:], 1):
        gk = instantiate(g, dyn, a)
        found = shape_inputs(gk, params, seed, k)
        if found is None:
            continue
        extra.append({v.name: found[v.name] for v in gk.inputs})
        kept.append(a)
        set_assignment.append(len(kept) - 1)
    if len(kept) < 2:
        lineage.append({"dynshape": "static", "reason": "no valid inputs for another shape"})
        return static
    dyn.assignments = kept
    dyn.set_assignment = set_assignment
    if done.demoted:
        lineage.append({"dynshape": "demoted", "symbols": done.demoted})
    return dataclasses.replace(static, extra_inputs=extra, dynshape=dyn)


def shape_inputs(gk: Any, params: dict[str, np.ndarray], seed: int, k: int
                 ) -> dict[str, np.ndarray] | None:
    """Valid values of every input and param of `gk`, input set `k`'s graph (its shapes) of
    the test of `seed`, the params given kept as they are (the sets share them); None when
    the search finds none."""
    start = {**random_values(gk, np.random.default_rng([seed, k])), **params}
    res = search_inputs(gk, seed * 31 + k, start=start, frozen=frozenset(params))
    return res.values if res.ok else None


def unexpected_recompile(tc: TestCase, compiles: list[int] | None) -> int | None:
    """The first input set after set 0 for which the backend compiled again although every
    symbolic dim of every value is >= 2 there (`generic`), as it is at set 0 (None: none)."""
    dyn: DynShape | None = getattr(tc, "dynshape", None)
    if not compiles or dyn is None:
        return None
    for k in range(1, min(len(compiles), len(dyn.set_assignment))):
        if compiles[k] > 0 and generic(dyn, dyn.assignment_of_set(k)):
            return k
    return None


def generic(dyn: DynShape, assignment: dict[str, int]) -> bool:
    """Every symbolic dim of every value is >= 2 under `assignment`: nothing a compiler may
    specialize as a 0/1 size (torch.compile does, by design)."""
    from ir.materialize.dynshape import eval_expr

    return all(eval_expr(d, assignment) >= 2 for dims in dyn.dims.values() for d in dims
               if not isinstance(d, int))


def classify(tc: TestCase, row: dict[str, Any], result, per_set_failures: list[int] | None
             ) -> dict[str, Any]:
    """Row fields for a dynamic-shape test's backend run: compiles, the kind of finding."""
    out: dict[str, Any] = {}
    compiles = getattr(result, "compiles", None)
    if compiles is not None:
        out["n_compiles"] = int(sum(compiles))
    if getattr(tc, "dynshape", None) is None:
        return out
    verdict = row.get("verdict")
    failed_set = getattr(result, "input_set", None)
    if verdict in ("crash", "signal", "timeout") and row.get("stage") == "run" and failed_set:
        out["failed_input_set"] = failed_set
        out["dyn_finding"] = "later_shape_crash"
    elif verdict == "mismatch" and per_set_failures is not None:
        n_sets = len(tc.dynshape.set_assignment)
        if per_set_failures and len(per_set_failures) < n_sets:
            out["dyn_finding"] = "shape_mismatch"
    recompiled = unexpected_recompile(tc, compiles)
    if recompiled is not None:
        assert compiles is not None  # recompiles were counted
        out["recompile_input_set"] = recompiled
        rnn = symbolic_rnn(tc)
        if verdict == "pass" and rnn is not None:
            label = tc.dynshape.shape_labels()[recompiled]
            out.update(verdict="unsupported", stage="run", error_class="Recompile",
                       error_sig=f"Recompile: torch.compile specializes {rnn} on its sequence",
                       error_msg=f"{KNOWN_RNN_RECOMPILE}: compiled again for input set "
                                 f"{recompiled} ({label}); graphs compiled per input set: "
                                 f"{list(compiles)}")
            out["dyn_finding"] = "recompile"
        elif verdict == "pass":
            label = tc.dynshape.shape_labels()[recompiled]
            sig, detail = getattr(result, "recompile_cause", None) or (ANY_RECOMPILE, "")
            out.update(verdict="recompile", stage="run", error_class="Recompile",
                       error_sig=sig,
                       error_msg=f"compiled again for input set {recompiled} ({label}); "
                                 f"graphs compiled per input set: {list(compiles)}"
                                 + (f"; {detail}" if detail else ""))
            out["dyn_finding"] = "recompile"
        elif "dyn_finding" not in out:
            out["dyn_finding"] = "recompile"
    return out


#: torch.compile's lowering of aten.lstm/gru/rnn unrolls the time loop, so the sequence length
#: is specialized (`ConstraintViolationError` under mark_dynamic): a documented limit, not a bug
KNOWN_RNN_RECOMPILE = ("torch.compile unrolls RNN ops (lstm, gru, rnn) over their sequence, "
                       "which specializes its length")


def symbolic_rnn(tc: TestCase) -> str | None:
    """The name of an RNN op of the graph whose input has a symbolic dim (None: none)."""
    dims = tc.shapes.dims(tc)
    for inst, _ in tc.graph.walk():
        if isinstance(inst.op, RECURRENT) and \
                any(not isinstance(d, int) for d in dims.get(inst.args[0], ())):
            return inst.op.name
    return None


def failing_sets(prep, actual: list) -> list[int]:
    """Input sets whose outputs differ from the reference (plain comparison, no shadow)."""
    from campaign.oracle import compare

    n = len(prep.tc.graph.outputs)
    expected = prep.ref.outputs or []
    if not n or len(actual) != len(expected):
        return list(range(prep.tc.n_sets))
    return [k for k in range(len(expected) // n)
            if not compare(expected[k * n:(k + 1) * n], actual[k * n:(k + 1) * n],
                           prep.tolerances).ok]


def case_from_finding(folder) -> TestCase:
    """The test case of a finding's folder (graph.gir, inputs*.npz, dynshape.json), to rerun a
    dynamic-shape finding on a backend: `make_backend(b).evaluate(Materialized(tc))`."""
    import json
    from pathlib import Path

    from ir.core.text import load

    folder = Path(folder)
    g = load(folder / "graph.gir")

    def npz(name):
        with np.load(folder / name, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    extra = []
    k = 1
    while (folder / f"inputs_set{k}.npz").exists():
        extra.append(npz(f"inputs_set{k}.npz"))
        k += 1
    dyn = None
    if (folder / "dynshape.json").exists():
        dyn = DynShape.from_json(json.loads((folder / "dynshape.json").read_text()))
    info = json.loads((folder / "info.json").read_text()) if (folder / "info.json").exists() else {}
    return TestCase(info.get("test_id", folder.name), int(info.get("seed", 0)), g,
                    npz("inputs.npz"), info.get("lineage", []), extra, dynshape=dyn)
