"""Bug folders and standalone reproducers.

`write_bug_folder(dest, ...)` writes, for one bucket:
  - `graph.gir` (the reduced graph), `original.gir` (the finding's graph);
  - `model.onnx` (the reduced graph's ONNX model, params as initializers);
  - `inputs.npz` (every input and param of input set 0; `inputs_set<k>.npz`: graph inputs of
    further sets), `expected.npz` (the torch eager reference, `out<i>` over the sets in order),
    `truth.npz` (the float64 shadow, for mismatches), `actual.npz` (what the backend gave);
  - `dynshape.json` for a dynamic-shape test (its symbolic dims; each `inputs*.npz` is a set of
    its own shapes, run on one model: `DYNSHAPE_BODIES`);
  - `info.json` (bucket key, the failing row, the reduction's log);
  - `repro.py`: imports only numpy and the backend's own library (onnxruntime; tvm (+ onnx to
    read the model); torch for Inductor; torch + onnxruntime for the torch.onnx exporter; torch
    + tvm for TVM's torch frontend) and
    prints the failure. Torch backends get the graph as plain torch code
    (`ir.materialize.torch_source`); ONNX backends load `model.onnx`. The script is copied from
    real modules, campaign/backends/repro_scripts (`repro_source`, `part_source`), the body and
    options a backend names (`Backend.repro_spec`).

`repro.py` prints `REPRODUCED: ...` and exits 1 when the failure happens, `NOT REPRODUCED`
(exit 0) when the backend now agrees with the reference, `DIFFERENT FAILURE: ...` (exit 2) for
another error; a signal kills it (the last `[repro] <stage>` line says where).
`check_repro(folder, verdict, error_class)` runs it in a fresh process where importing dynsmith
fails, and says whether it reproduced the verdict. Any run takes `--set NAME=<json>` to change a
per-test value; `repro.py --localize` runs the backend's localization plan (repro_scripts/
localize.py: which stage, level, pass or flag the failure needs).
"""
from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from campaign.sandbox import signal_name
from campaign.testcase import npz_bytes
from campaign.triage.pipeline.repro_source import repro_source, repro_spec_of, repro_tolerances

if TYPE_CHECKING:
    from campaign.triage.pages.environment import Seen

#: how a repro is judged: "reproduced", "not reproduced", "different failure", "error",
#: "timeout" (reproduces a timeout verdict), "none" (no repro for this backend)
REPRO_OK = "reproduced"


def _truth(tc) -> dict[str, np.ndarray] | None:
    """The float64 shadow of every output (float ones cast to their graph dtype), or None."""
    from campaign.artifacts import Materialized
    from campaign.reference import run_shadow

    try:
        outs = run_shadow(Materialized(tc))
    except Exception:
        return None
    return {f"out{i}": o for i, o in enumerate(outs)}


def write_bug_folder(dest: Path, spec: str, bucket_id: str, key_fields: dict[str, Any],
                     red, seed: int, timeout_s: float | None = None,
                     cold_start_s: float = 0.0, seen: list[Seen] | None = None) -> dict[str, Any]:
    """Write the folder of one bucket from a `campaign.triage.pipeline.reduction.Reduction` (reduced or
    not); returns what was written (`repro`: whether a repro.py exists, `codegen` errors,
    `timeout_s`: a timeout repro's wait).

    A timeout's repro.py waits `timeout_s` (the limit the campaign confirmed it at) plus
    `cold_start_s` for a result, and reproduces when there is none by then. repro.py starts
    with a comment block of the versions the bug was seen failing on (`seen`, from the bug
    database and the version matrix: `campaign.triage.pages.environment.seen_versions`; None:
    this run's)."""
    from campaign.artifacts import Materialized
    from campaign.testcase import TestCase
    from campaign.triage.pages.environment import seen_comment, seen_versions
    from ir.core.text import print_graph

    dest = Path(dest)
    tmp = dest.with_name(f".tmp-{dest.name}")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    g = red.graph
    tc = red.tc or TestCase(red.case.test_id, seed, g, red.values, [{"seed": seed}],
                            red.extra_sets, grad=red.case.grad, transform=red.case.transform,
                            dynshape=red.case.dynshape, cache=red.case.cache)
    files = dict(red.files)
    files.update(tc.shapes.files(tc))  # a dynamic-shape test's dims and set shapes
    files.update(tc.mode.files(tc))  # a transform, or leaves, and their arrays (docs/training.md)
    files["graph.gir"] = print_graph(g).encode()
    files["original.gir"] = print_graph(red.case.graph).encode()
    files["inputs.npz"] = npz_bytes({v.name: red.values[v.name] for v in (*g.inputs, *g.params)})
    for k in list(files):
        if k.startswith("inputs_set"):
            del files[k]
    for k, extra in enumerate(tc.extra_inputs, 1):
        files[f"inputs_set{k}.npz"] = npz_bytes({v.name: extra[v.name] for v in g.inputs})
    if g == red.case.graph:  # not reduced: the finding's own artifacts fill the gaps
        for name in ("model.onnx", "expected.npz", "actual.npz"):
            path = Path(red.case.folder) / name
            if name not in files and path.is_file():
                files[name] = path.read_bytes()
    if "model.onnx" not in files:
        try:
            files["model.onnx"] = Materialized(tc).onnx_bytes
        except Exception:
            pass
    if "expected.npz" not in files:
        from campaign.reference import run_reference

        ref = run_reference(Materialized(tc))
        if ref.outputs is not None:
            files["expected.npz"] = npz_bytes({f"out{i}": o for i, o in enumerate(ref.outputs)})
    row = red.row or {}
    # the bucket's verdict: what its repro must reproduce (a re-run that no longer failed the
    # same way left its own row)
    verdict = key_fields.get("verdict") or row.get("verdict")
    if verdict == "mismatch":
        truth = _truth(tc)
        if truth is not None:
            files["truth.npz"] = npz_bytes(truth)
    info = {"bucket": bucket_id, "backend": spec, **key_fields,
            "row": {k: row.get(k) for k in ("verdict", "stage", "error_class", "error_sig",
                                             "error_msg", "mismatch_output",
                                             "mismatch_input_set", "max_abs_err",
                                             "max_rel_err", "dialect", "timeout_confirmed",
                                             "timeout_limit_s", "confirm_limit_s",
                                             "confirm_s")},
            "spec": spec, "original_config": red.case.config,
            "finding": str(red.case.folder), "test_id": red.case.test_id, "seed": seed,
            "status": red.status, "note": red.note, "reduction": red.summary,
            "original_insts": red.original_insts, "reduced_insts": red.reduced_insts}
    files["info.json"] = (json.dumps(info, indent=2, default=str) + "\n").encode()
    how = repro_spec_of(spec)
    kind = how.kind if how is not None else "other"
    written: dict[str, Any] = {"repro": False, "kind": kind}
    if verdict == "timeout":
        limit = float(timeout_s if timeout_s is not None else 60.0)
        written["timeout_s"] = limit + cold_start_s
        info["repro_wait_s"] = {"confirmed_limit_s": limit, "cold_start_s": cold_start_s}
        files["info.json"] = (json.dumps(info, indent=2, default=str) + "\n").encode()
    if how is not None:
        # the failing row's details, or the finding's when the row failed otherwise (or none)
        src = row if row.get("verdict") == verdict else red.case.info
        expect = {"verdict": verdict, "stage": src.get("stage") or key_fields.get("stage"),
                  "error_class": src.get("error_class"),
                  "error_sig": src.get("error_sig") or key_fields.get("error_sig")}
        if verdict == "timeout":
            expect["timeout_s"] = written["timeout_s"]
            expect["timeout_note"] = (f"the limit it was confirmed at, {limit:g} s, "
                                      f"+ {cold_start_s:g} s for a cold start")
        header = _header(bucket_id, spec, expect, row, print_graph(g))
        try:
            # a cache test where the backend ran it as one (a finding holds its near-twin
            # only then: `make_finding`); a representative not re-run has no row of its own
            if tc.mode.warms_cache and (row.get("mode") or red.case.info.get("mode")) \
                    == tc.mode.name:
                from campaign.triage.pipeline.cache_repro import cache_repro_source

                script = cache_repro_source(how, tc, g, expect, header, seed)
            else:
                transform = tc.transform if how.runs_transforms else None
                grad = tc.grad if how.trains and transform is None else None
                script = repro_source(how, g, expect, repro_tolerances(g, grad, transform), header,
                                      seed, grad, transform, tc.dynshape)
            files["repro.py"] = (seen_comment(seen if seen is not None else seen_versions(
                spec, [{"bucket": bucket_id}])) + script).encode()
            written["repro"] = True
        except Exception as e:
            written["codegen_error"] = f"{type(e).__name__}: {e}"
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    if dest.exists():
        import shutil

        shutil.rmtree(dest)
    os.rename(tmp, dest)
    return written


def _header(bucket_id: str, spec: str, expect: dict, row: dict, graph_text: str) -> str:
    msg = (row.get("error_msg") or "").strip().splitlines()
    first = msg[0][:300] if msg else ""
    text = (f"Reproducer for dynsmith bucket {bucket_id}: backend {spec!r}, "
            f"{expect['verdict']} during {expect['stage']}.\n\n"
            f"    {expect.get('error_sig') or ''}\n    {first}\n\n"
            "Standalone: numpy and the backend's own library only (no dynsmith). Run\n"
            "    python repro.py\n"
            "It prints REPRODUCED and exits 1 when the failure happens, NOT REPRODUCED (exit 0)\n"
            "when it does not, DIFFERENT FAILURE (exit 2) for another error; a signal kills it\n"
            "(the last '[repro] <stage>' line says where). The data is in inputs*.npz, the\n"
            "reference outputs in expected.npz. "
            + ("A timeout reproduces when there is still no result after\n"
               f"{expect['timeout_s']:g} s (the limit it was confirmed at + a cold start).\n"
               if expect["verdict"] == "timeout" else "")
            + "The graph (GraphIR, graph.gir):\n\n"
            + textwrap.indent(graph_text.rstrip(), "    ") + "\n")
    return text.replace("\\", "\\\\").replace('"""', "\'\'\'")


_BLOCK_DYNSMITH = (
    "import sys, runpy\n"
    "class _NoDynsmith:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('ir', 'campaign', 'mutators'):\n"
    "            raise ImportError('repro.py must not import dynsmith: ' + name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, _NoDynsmith())\n"
    "sys.path = [p for p in sys.path if p not in ('', '.')]\n"
    "sys.argv = ['repro.py'] + sys.argv[1:]\n"
    "runpy.run_path('repro.py', run_name='__main__')\n"
)


def run_fresh(folder: Path, args: list[str], timeout_s: float,
              python: str | None = None) -> tuple[int, str, str, bool]:
    """Run `folder/repro.py args` in a fresh Python (`python`, default ours) where importing
    dynsmith fails; returns (exit code, stdout, stderr, whether it ran past `timeout_s`).
    Whatever the repro started (compiler subprocesses) is killed with it
    (`campaign.triage.bugdb.runner.run_process`)."""
    from campaign.triage.bugdb.runner import run_process

    run = run_process([python or sys.executable, "-c", _BLOCK_DYNSMITH, *args], folder,
                      timeout_s)
    return run.code, run.stdout, run.stderr, run.expired


def check_repro(folder: Path, verdict: str, error_class: str | None = None,
                timeout_s: float = 300.0, python: str | None = None) -> tuple[str, str]:
    """Run `folder/repro.py` in a fresh Python (`python`, default ours) where importing
    dynsmith fails; returns (outcome, last output lines). outcome: "reproduced", "not
    reproduced", "different failure", "error" (anything else), "none" (no repro.py). A timeout reproduces when its
    repro.py's watchdog says so (still no result after its wait), or when it is still running
    after `timeout_s`. Whatever the repro started (compiler subprocesses) is killed with it."""
    folder = Path(folder)
    if not (folder / "repro.py").is_file():
        return "none", ""
    code, stdout, stderr, expired = run_fresh(folder, [], timeout_s, python)
    out = "\n".join(t for t in (_tail(stdout, 8), _tail(stderr)) if t)
    if expired:
        return ("reproduced" if verdict == "timeout" else "error"), out
    if verdict == "timeout" and code == 1 and (
            "REPRODUCED: timeout" in stdout or re.search(r"^Timeout \(", stderr, re.M)):
        return "reproduced", out
    if code < 0:
        name = signal_name(-code)
        if verdict == "signal" and (error_class in (None, name)):
            return "reproduced", out
        return "different failure", f"killed by {name}\n{out}"
    if verdict == "crash" and error_class == "ProcessExit" and code not in (0, 1, 2):
        return "reproduced", out
    if code == 1 and "REPRODUCED" in stdout:
        return "reproduced", out
    if code == 0 and "NOT REPRODUCED" in stdout:
        return "not reproduced", out
    if code == 2:
        return "different failure", out
    return "error", out


def fixed_release(folder: Path, verdict: str, error_class: str | None, timeout_s: float,
                  pythons: list[str], log: Callable[[str], None] = print) -> str | None:
    """The release that fixed the bug of `folder`, whose repro.py reproduced under ours: the
    label (`torch 2.14.1+cu130`) of the first of `pythons` (newer releases) under which it
    does not reproduce; None when it reproduces, or errors (logged: a package missing there
    says nothing of the bug), under each."""
    from campaign.triage.bugdb.runner import probe

    for python in pythons:
        outcome, tail = check_repro(folder, verdict, error_class, timeout_s, python=python)
        if outcome == "not reproduced":
            return probe(python).label
        if outcome != "reproduced":
            log(f"triage: repro.py of {Path(folder).name} under {python}: {outcome}\n{tail}")
    return None


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
