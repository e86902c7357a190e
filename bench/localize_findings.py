"""Does the automatic localization agree with our own analysis of the bugs we found?

For each open finding (docs/findings, status new, known or known-upstream) whose note has a trigger
graph (`triggers:`), this runs the graph on its compiler as the triage re-runs a finding,
writes the bug folder the triage would (`write_bug_folder`: repro.py and its data), checks
that repro.py reproduces, and runs `repro.py --localize` (`localize_folder`). The culprit is
compared with what the note's own analysis names (`ANALYSIS` below: a few words from the note,
and the words a culprit must hold to agree). It prints a Markdown table and the agreement:

    python bench/localize_findings.py [--only F12 F30] [--budget 600] [--out /tmp/locf]

No timing here: the figure is agreement, one run per finding (localization runs are
deterministic up to timeouts, which the table shows as such).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: per finding: (the note's analysis in short, words of which a culprit must hold one to agree;
#: case-insensitive)
ANALYSIS: dict[str, tuple[str, tuple[str, ...]]] = {
    "F01": ("ORT_ENABLE_ALL only (not extended): a rewrite of level all (level 4 and up); "
            "before this localization the note named no transformer",
            ("fusefp16", "nchwc", "level all")),
    "F04": ("TVM codegen: LLVM FCmp emitted for a bool compare", ("codegen", "llvm")),
    "F06": ("functionalization (aot_eager and Inductor)", ("aot", "functional")),
    "F07": ("functionalization (internal overlap check)", ("aot", "functional")),
    "F08": ("functionalization (expand of bool)", ("aot", "functional")),
    "F09": ("exporter: copy_ translated as Identity", ("translation", "onnx translation")),
    "F10": ("exporter: ScatterND with int32 indices", ("translation", "decomposition")),
    "F11": ("exporter: copy_to after functionalization", ("translation", "decomposition")),
    "F12": ("ORT transpose optimizer (Pad axes)", ("transposeoptimizer", "transpose")),
    "F13": ("onnx_ir InlinePass", ("inline",)),
    "F05": ("run_decompositions (FunctionalTensor)", ("decomposition",)),
    "F14": ("TVM ONNX importer (Expand)", ("frontend", "from_onnx", "import")),
    "F15": ("TVM ONNX importer (Pad)", ("frontend", "from_onnx", "import")),
    "F17": ("Dynamo shape guards (reshape divisibility)", ("dynamo",)),
    "F18": ("Dynamo specializes max_pool1d", ("dynamo", "decomposition")),
    "F21": ("TVM ONNX importer (If branch tuple)", ("frontend", "from_onnx", "import")),
    "F22": ("Inductor layout optimization", ("layout",)),
    "F23": ("TVM torch frontend (elu converter)", ("frontend", "from_exported_program",
                                                   "import")),
    "F24": ("TVM torch frontend (clamp -> clip with inf)", ("frontend", "import")),
    "F25": ("TVM torch frontend (matmul out_dtype)", ("frontend", "import")),
    "F26": ("torch.export non-strict symbolic sizes", ("torch.export", "export")),
    "F27": ("Inductor C++ wrapper", ("cpp_wrapper",)),
    "F28": ("Inductor C++ wrapper", ("cpp_wrapper",)),
    "F29": ("Inductor lowering (GraphLowering.call_function)", ("lowering", "call_function")),
    "F30": ("relax.transform.StaticPlanBlockMemory", ("staticplanblockmemory",)),
    "F31": ("torch.export (non-strict HOP tracing)", ("torch.export", "export")),
    "F32": ("torch.cond autograd, fails in eager too", ("torch.cond",)),
    "F33": ("AOT autograd's LSTM decomposition", ("aot",)),
    "F34": ("relax.transform.Gradient (conv2d)", ("gradient",)),
    "F35": ("relax.transform.Gradient (triu)", ("gradient",)),
    "F36": ("relax.transform.Gradient (symbolic shape)", ("gradient",)),
    "F38": ("torch.while_loop autograd, eager too", ("torch.while_loop",)),
    "F39": ("AOT autograd (scan aliasing check)", ("aot",)),
    "F40": ("Inductor lowering of _local_scalar_dense", ("lowering", "_local_scalar_dense")),
    "F41": ("AOT autograd (keep_inference_input_mutations)", ("aot",)),
    "F42": ("Dynamo with an AOT backend (tensorify graphargs)", ("aot", "dynamo")),
    "F43": ("Inductor C++ wrapper (zero-trip while_loop)", ("cpp_wrapper",)),
    "F44": ("Dynamo (dynamic float in and outside a HOP body)", ("dynamo",)),
    "F45": ("C++ wrapper with memory_planning", ("cpp_wrapper", "memory_planning")),
    "F46": ("exporter ONNX translation (onnxscript torchlib)", ("translation",)),
    "F48": ("Inductor's View reindexing: compare_sizes in _dynamic_reshape_indexer",
            ("compare_sizes", "_dynamic_reshape_indexer")),
    "F49": ("FuseTIR's SymbolicMatcher (the build fails inside FuseTIR)", ("fusetir",)),
    "F50": ("relax.transform.RewriteDataflowReshape (IterMapRewriter)",
            ("rewritedataflowreshape",)),
    "F47": ("Inductor post-grad remove_noop_ops drops both clones of a cond branch output "
            "returned twice: a segfault in the C++ wrapper, a wrong result in the Python one",
            ("remove_noop_ops", "post_grad")),
}


#: why an open finding has no trigger graph (its table row says it)
NO_TRIGGER: dict[str, str] = {
    "F03": "GraphIR's elu and selu take float16/float32 only (ONNX's float attributes): the "
           "campaign no longer makes this test",
    "F33": "the torch backends list it as a known limitation (LSTM_MKLDNN_BACKWARD): "
           "unsupported, never a finding",
    **{f: "the tvm backend lists it among the Gradient pass's gaps: unsupported, never a "
          "finding (F35's repro localizes to relax.transform.Gradient on a hand-made folder: "
          "tests/campaign/test_repro_tvm_training.py)" for f in ("F35", "F36")},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="finding ids (prefixes)")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per localization")
    ap.add_argument("--out", type=Path, default=Path("/tmp/localize_findings"))
    ap.add_argument("--notes", type=Path, default=ROOT / "docs" / "findings")
    args = ap.parse_args()
    from campaign.triage.pages.notes import load_notes
    from campaign.triage.pipeline.localization import localize_folder
    from campaign.triage.pipeline.note_runs import trigger_folder
    from campaign.triage.pipeline.repro import check_repro

    notes = load_notes(args.notes)
    rows = []
    for bug, note in sorted(notes.items()):
        fid = bug.split("-")[0]
        if args.only and not any(bug.startswith(o) for o in args.only):
            continue
        if note.status not in ("new", "known", "known-upstream"):
            continue
        triggers = getattr(note, "triggers", ()) or ()
        analysis, words = ANALYSIS.get(fid, ("(not in ANALYSIS)", ()))
        if not triggers:
            rows.append((fid, "-", analysis, f"no trigger graph: "
                         f"{NO_TRIGGER.get(fid, 'none written')}", None, 0.0))
            continue
        t = triggers[0]
        start = time.monotonic()
        dest = args.out / fid
        try:
            folder, why = trigger_folder(t, args.notes, dest)
        except Exception as e:  # one finding must not stop the table
            folder, why = None, f"{type(e).__name__}: {e}"
        if folder is None:
            rows.append((fid, t.backend, analysis, f"no bug folder: {why}", None,
                         time.monotonic() - start))
            continue
        outcome, _ = check_repro(folder, t.verdict, None, 300)
        if outcome != "reproduced":
            rows.append((fid, t.backend, analysis, f"repro.py: {outcome}", None,
                         time.monotonic() - start))
            continue
        loc = localize_folder(folder, args.budget)
        (folder / "localization.json").write_text(json.dumps(loc.to_json(), indent=2) + "\n")
        agree = loc.culprit is not None and any(w in loc.culprit.lower() for w in words)
        rows.append((fid, t.backend, analysis, loc.text, agree, time.monotonic() - start))
        print(f"{fid}: {loc.text} ({'agrees' if agree else 'differs'})", flush=True)
    print("\n| finding | backend | the note's analysis | automatic culprit | agrees | s |")
    print("|---|---|---|---|---|---|")
    for fid, backend, analysis, culprit, agree, s in rows:
        mark = "-" if agree is None else "yes" if agree else "no"
        print(f"| {fid} | `{backend}` | {analysis} | {culprit} | {mark} | {s:.0f} |")
    judged = [r for r in rows if r[4] is not None]
    with_repro = [r for r in rows if r[1] != "-"]
    agreed = sum(1 for r in judged if r[4])
    print(f"\nagreement: {agreed}/{len(judged)} localized-or-not findings whose repro reproduced; "
          f"{len(with_repro)} with a trigger graph, {len(rows)} open findings in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
