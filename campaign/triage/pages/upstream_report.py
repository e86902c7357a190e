"""An upstream-ready report per bug: `bugs/<bug>/report.md`, which a compiler developer can
read as it stands (docs/triage.md).

It holds a title, the versions, expected against actual, the smallest graph as plain code
(torch source from `ir.materialize.torch_source` for every backend; for ONNX backends also the
ONNX model as text, `onnx.printer`), and the standalone `repro.py` of the bug's smallest
bucket, whole. Its versions section says which versions the bug was seen failing on (this run,
the bug database's sightings, the version matrix: `campaign.triage.pages.environment`) and
holds `python -m torch.utils.collect_env`'s output (run once per triage, folded in a
`<details>` block), as PyTorch's template asks. `<bug>` is the bugs table's `bug` value (the
bucket id in a table without one); when a bug is one bucket the report lies beside that
bucket's repro.py, else in a folder of its own whose text points at the bucket folder holding
the files.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campaign.triage.bugdb.versions import installed
from campaign.triage.pages.environment import collect_env, seen_line, seen_versions
from campaign.triage.pipeline.buckets import rows_by_bug

if TYPE_CHECKING:
    from campaign.triage.bugdb.matrix import Matrix
    from campaign.triage.bugdb.store import Bug

REPORT = "report.md"
#: error text kept in a title / quoted as the actual outcome
TITLE_CHARS = 160
MESSAGE_LINES = 20


def compiler(spec: str) -> str:
    """What backend `spec`'s stack is called in a title (`BackendInfo.display`)."""
    from campaign.backends import info_of

    return info_of(spec).display


def title(row: dict[str, Any]) -> str:
    """A one-line title from a bugs-table row: compiler, what failed where, the signature
    (without its frames) or the op pattern's ops."""
    from campaign.triage.pipeline.buckets import pattern_ops

    who = compiler(row["backend"])
    if row.get("verdict") == "mismatch":
        pat = row.get("reduced_pattern") or row.get("pattern") or ""
        ops = ", ".join(sorted(pattern_ops(pat))) or "a graph"
        return f"{who}: wrong result for {ops}"[:TITLE_CHARS]
    sig = (row.get("error_sig") or "").split(" @ ", 1)[0]
    return f"{who}: {row.get('verdict')} during {row.get('stage')}: {sig}"[:TITLE_CHARS].rstrip(": ")


def write_reports(out_dir: Path, rows: list[dict[str, Any]], bugs: dict[str, Bug] | None = None,
                  matrix: Matrix | None = None) -> dict[str, Path]:
    """report.md for every compiler bug of the bugs table `rows` (grouped by `bug` where set)
    whose smallest bucket has a bug folder; returns bug -> report path. A report that cannot be
    written is skipped (its bug keeps its bucket folder). `bugs` (the bug database's) and
    `matrix` (the version matrix) add the versions the bug was seen on before this run."""
    out: dict[str, Path] = {}
    for bug, members in rows_by_bug(rows).items():
        if not any(r.get("kind") == "bug" for r in members):
            continue
        rep = _representative(out_dir, members)
        if rep is None:
            continue
        dest = out_dir / "bugs" / bug / REPORT
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            text = report_text(out_dir, bug, rep, members, bugs, matrix)
            known = sorted({r["finding"] for r in members if r.get("finding")})
            if known:  # a bug written up in docs/findings: say so before anything else
                text = (f"> **Known bug**: {', '.join(f'docs/findings/{k}.md' for k in known)} "
                        f"(the note's triggers match this run's buckets; its tracker status and "
                        f"upstream report are there).\n\n") + text
            if any(r.get("status") == "unconfirmed" for r in members):  # not for upstream
                text = ("> **Unconfirmed**: its repro.py did not reproduce the failure when the "
                        "triage ran it (a harness or environment failure until it does): not a "
                        "compiler bug to report yet.\n\n") + text
            tmp = dest.with_name(f".{REPORT}.tmp")
            tmp.write_text(text)
            tmp.replace(dest)
        except Exception:  # a report must never cost the triage
            continue
        out[bug] = dest
    return out


def _representative(out_dir: Path, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The row whose bug folder has the smallest reduced graph (reduced ones first)."""
    have = [r for r in rows if r.get("kind") == "bug" and r.get("artifact_path")
            and (out_dir / r["artifact_path"] / "info.json").is_file()]
    return min(have, key=lambda r: (r.get("reduced_insts") is None, r.get("reduced_insts") or 0,
                                    r.get("repro") is None, r["bucket"]), default=None)


def report_text(out_dir: Path, bug: str, row: dict[str, Any],
                members: list[dict[str, Any]], bugs: dict[str, Bug] | None = None,
                matrix: Matrix | None = None) -> str:
    """The report's markdown for bug `bug`, represented by bucket row `row`, in its tracker's
    template (`campaign.triage.pages.tracker_templates`)."""
    from campaign.triage.pages.tracker_templates import ReportParts, render

    folder = out_dir / row["artifact_path"]
    info = json.loads((folder / "info.json").read_text())
    failed = info.get("row") or {}
    spec = row["backend"]
    count = sum(int(r.get("count") or 0) for r in members)
    where = folder.resolve()
    summary = [f"`{compiler(spec)}` (dynsmith backend `{spec}`"
               + (f", configuration `{row['backend_config']}`" if row.get("backend_config")
                  else "") + f") {_what(row)}. Found by the dynsmith fuzzer: {count} failing "
               "tests, bucket(s) " + ", ".join(f"`{r['bucket']}`" for r in members)
               + (f"; the graph was reduced from {row['original_insts']} to "
                  f"{row['reduced_insts']} instructions" if row.get("reduced_insts") is not None
                  and row.get("original_insts") is not None else "")
               + f". Files (inputs, reference outputs, model): `{where}`."]
    reproducer = []
    if (folder / "repro.py").is_file():
        reproducer += [f"`python repro.py` in `{where}` (numpy and the compiler's own libraries "
                       "only): it prints `REPRODUCED` and exits 1 while the bug is there, `NOT "
                       "REPRODUCED` (exit 0) once it is fixed; `python repro.py --localize` "
                       "runs the ablation below.", "",
                       "```python", (folder / "repro.py").read_text().rstrip(), "```", ""]
    else:
        reproducer += ["No standalone repro.py for this backend: `graph.gir` and `inputs.npz` "
                       "in the folder above replay it with dynsmith.", ""]
    parts = ReportParts(
        title=title(row), summary=summary, expected=[_expected(row, failed)],
        actual=[_actual(row, failed)], ablation=_localization(info) + _training_ablation(row),
        program=_graph_code(folder, spec, info), reproducer=reproducer,
        versions=installed(spec), fuzzer_notes=_fuzzer_notes(folder, row),
        error_log=_error_log(row, failed),
        seen=[seen_line(seen_versions(spec, members, bugs, matrix))], collect_env=collect_env())
    return render(spec, parts)


def _what(row: dict[str, Any]) -> str:
    if row.get("verdict") == "mismatch":
        return "gives a wrong result"
    return f"fails ({row.get('verdict')}) during {row.get('stage')}"


def _error_log(row: dict[str, Any], failed: dict[str, Any]) -> list[str]:
    msg = (failed.get("error_msg") or "").strip().splitlines()
    if not msg or row.get("verdict") == "mismatch":
        return []
    return ["```", *msg[:MESSAGE_LINES], "```"]


def _localization(info: dict[str, Any]) -> list[str]:
    """The localization's ablation table (`repro.py --localize`), when it ran."""
    from campaign.triage.pipeline.localization import Localization

    if not info.get("localization"):
        return []
    loc = Localization.from_json(info["localization"])
    head = (f"**Culprit: {loc.culprit}** ({loc.why})." if loc.culprit else
            f"**Not localized:** {loc.why}.")
    return [head, "", loc.table(), ""]


def _fuzzer_notes(folder: Path, row: dict[str, Any]) -> list[str]:
    """What PyTorch's template asks of a fuzzer's report: tolerances against torch's defaults,
    a float64 baseline, no index comparison, the same random numbers."""
    import ast
    import re

    from campaign.triage.pages.tracker_templates import TORCH_DEFAULT_TOLERANCES

    if row.get("verdict") != "mismatch":
        return ["- Not a numerical comparison: the compiler fails where eager runs."]
    out = []
    script = folder / "repro.py"
    found = re.search(r"^TOLERANCES = (.*)$", script.read_text(), re.M) if script.is_file() \
        else None
    if found:
        tols = sorted(set(ast.literal_eval(found.group(1))))
        loosest = ", ".join(f"{k}: {v}" for k, v in TORCH_DEFAULT_TOLERANCES.items())
        out.append(f"- Tolerances (rtol, atol) per output: {', '.join(map(str, tols))}; "
                   f"`torch.testing.assert_close`'s defaults are {loosest}.")
    if (folder / "truth.npz").is_file():
        out.append("- Baseline: an element counts as wrong only when it is off both eager's "
                   "result (`expected.npz`) and a float64 evaluation of the same program "
                   "(`truth.npz`), as `torch._dynamo.utils.same` with `fp64_ref` would judge.")
    out.append("- Values are compared element by element, never argmax/argmin indices; the "
               "programs hold no random ops.")
    return out


#: what the `aot_eager` column's values say about where the fault is
AOT_EAGER_MEANS = {
    "agrees": "`aot_eager` (Dynamo and AOT autograd, no Inductor) agrees with eager on the same "
              "test: the fault is in Inductor.",
    "fails the same way": "`aot_eager` (Dynamo and AOT autograd, no Inductor) fails the same "
                          "way: the fault is before Inductor, in Dynamo or AOT autograd.",
    "is the failing backend": "The failing backend is `aot_eager` itself: the fault is in "
                              "Dynamo or AOT autograd.",
}


def _training_ablation(row: dict[str, Any]) -> list[str]:
    """The training bug's ablation (`campaign.triage.pipeline.training_ablation`), when it has one."""
    if not row.get("wrong_part") and not row.get("aot_eager"):
        return []
    out = []
    if row.get("wrong_part"):
        out.append(f"- The wrong part of the training step: the {row['wrong_part']}.")
    if row.get("aot_eager"):
        out.append("- " + AOT_EAGER_MEANS.get(row["aot_eager"], f"`aot_eager` on the same test: "
                                                                 f"{row['aot_eager']}."))
    return out + [""]


def _expected(row: dict[str, Any], failed: dict[str, Any]) -> str:
    if row.get("verdict") == "mismatch":
        return ("**Expected:** the outputs of PyTorch eager on the same program and inputs "
                "(`expected.npz`), within the output dtype's tolerance, and confirmed by a "
                "float64 evaluation (`truth.npz`).")
    if row.get("verdict") == "timeout":
        return "**Expected:** the compile and run finish (PyTorch eager takes well under a second)."
    return ("**Expected:** the program compiles and runs, giving the outputs of PyTorch eager "
            "(`expected.npz`): eager runs it without error.")


def _actual(row: dict[str, Any], failed: dict[str, Any]) -> str:
    if row.get("verdict") == "mismatch" and failed.get("max_abs_err") is None:
        return f"**Actual:** {failed.get('error_msg') or row.get('error_sig') or 'other outputs'}."
    if row.get("verdict") == "mismatch":
        return (f"**Actual:** output {failed.get('mismatch_output')} (input set "
                f"{failed.get('mismatch_input_set')}) is off: max abs error "
                f"{failed.get('max_abs_err')}, max relative error {failed.get('max_rel_err')}.")
    msg = (failed.get("error_msg") or row.get("error_sig") or "").strip().splitlines()
    head = f"**Actual:** {row.get('verdict')} during {row.get('stage')}"
    if failed.get("error_class"):
        head += f" ({failed['error_class']})"
    return head + (f": `{msg[0][:TITLE_CHARS]}` (the error log below)." if msg else ".")


def _graph_code(folder: Path, spec: str, info: dict[str, Any]) -> list[str]:
    """The graph as torch source (the program every backend is given), plus the ONNX model as
    text for backends that take ONNX."""
    from campaign.backends import info_of
    from campaign.triage.pipeline.repro_source import program_dialect, repro_spec_of

    how = repro_spec_of(spec)
    out: list[str] = []
    try:
        from ir.core.text import load
        from ir.materialize.form import DEFAULT_FORM
        from ir.materialize.torch_source import torch_source

        allowed = None
        if how is not None and how.trains and (folder / "transform.json").is_file():
            allowed = tuple(json.loads((folder / "transform.json").read_text())["dialects"])
        dialect = program_dialect(how, info.get("seed") or 0, allowed)
        g = load(folder / "graph.gir")
        grad = None
        if how is not None and how.trains and (folder / "grad.json").is_file():
            from ir.materialize.grad import GradSpec

            grad = GradSpec.from_files((folder / "grad.json").read_bytes(),
                                       (folder / "cotangents.npz").read_bytes())
        form = how.form if how is not None and how.form is not None else DEFAULT_FORM
        src = torch_source(g, dialect, form,
                           grad.param_leaves(g) if grad is not None else frozenset())
        out += ["As PyTorch (`Model(...)(*inputs)`, inputs in `inputs.npz`):", "",
                "```python", src.rstrip(), "```", ""]
        own = info_of(spec).own_training if how is not None and how.trains else None
        if grad is not None and own is not None:
            out += [own.format(leaves=", ".join(f"`{x}`" for x in grad.leaves)), ""]
        elif grad is not None:
            out += ["A training step: the loss `L = sum_i (out_i * c_i).sum()` over the float "
                    "outputs, with the fixed cotangents `c_i` of `cotangents.npz`, "
                    "differentiated by `torch.autograd.grad` with respect to "
                    + ", ".join(f"`{x}`" for x in grad.leaves)
                    + " (inputs that require grad, and `nn.Parameter`s); the expected outputs "
                    "and gradients are eager autograd's (`expected.npz`, float64 in "
                    "`truth.npz`). `repro.py` (`train_step`) computes and compares them.", ""]
    except Exception as e:
        out += [f"(no torch source: {type(e).__name__}: {e})", ""]
    if how is not None and how.dialect is None and (folder / "model.onnx").is_file():
        try:
            import onnx
            import onnx.printer

            text = onnx.printer.to_text(onnx.load(folder / "model.onnx"))
            out += ["As ONNX (`model.onnx`, `onnx.printer` text):", "", "```", text.rstrip(),
                    "```", ""]
        except Exception as e:
            out += [f"(no ONNX text: {type(e).__name__}: {e})", ""]
    return out
