"""ONNX Runtime on `model.onnx`, in a session with the failing configuration's options
(`ort_session`, as the fuzzer makes it); `ablate`, its localization plan (docs/triage.md,
"Where the fault is")."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import onnxruntime as ort

from campaign.backends.ort.session import ort_providers, ort_session
from campaign.backends.repro_scripts.localize import SAME, Probe, first_failing, one_at_fault
from campaign.backends.repro_scripts.prelude import (
    EXPECT,
    HERE,
    INPUTS,
    failed,
    finish,
    input_sets,
    stage,
)

# ---- per-test values
#: the session's options: graph optimizations (all, extended, basic, disabled), device (cpu,
#: cuda), optimizers turned off by name, executor (parallel: two inter-op threads), intra-op
#: threads
OPT_LEVEL = "all"
DEVICE = "cpu"
DISABLED_OPTIMIZERS: list[str] = []
EXECUTION_MODE = "sequential"
THREADS = 1
# ---- end of per-test values


def configuration() -> str:
    """The options that are not the default, as words."""
    return "".join([f", disabled_optimizers {DISABLED_OPTIMIZERS}" if DISABLED_OPTIMIZERS else "",
                    ", the parallel executor" if EXECUTION_MODE == "parallel" else "",
                    f", {THREADS} intra-op threads" if THREADS != 1 else ""])


def main() -> None:
    print(f"onnxruntime {ort.__version__}, graph optimizations {OPT_LEVEL!r}{configuration()}",
          flush=True)
    sets = input_sets()
    stage("compile")
    try:
        sess = ort_session(os.path.join(HERE, "model.onnx"), OPT_LEVEL, DEVICE, EXECUTION_MODE,
                           THREADS, DISABLED_OPTIMIZERS)
    except Exception as e:
        failed(e)
    stage("run")
    outs = []
    try:
        for s in sets:
            outs += sess.run(None, {n: s[n] for n in INPUTS})
    except Exception as e:
        failed(e)
    finish(outs)


#: the graph optimization levels, lowest first
LEVELS = ("disabled", "basic", "extended", "all")
#: their names in ORT's `GraphOptimizationLevel`
LEVEL_ENUMS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
               "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
#: the rewrite rules ORT's rule-based transformers (`Level1_RuleBasedTransformer`, ...) apply,
#: by the names `disabled_optimizers` takes (ORT's `GenerateRewriteRules`); a name this ORT
#: lacks is ignored by ORT, so at worst a rule stays unnamed
REWRITE_RULES = ("EliminateIdentity", "EliminateSlice", "UnsqueezeElimination",
                 "EliminateDropout", "ExpandElimination", "CastElimination",
                 "CastChainElimination", "PreShapeNodeElimination", "NoopElimination",
                 "DivMulFusion", "FuseReluClip", "GemmSumFusion", "GemmTransposeFusion",
                 "NotWhereFusion", "ConvAddFusion", "ConvMulFusion", "ConvBNFusion", "PadFusion",
                 "MatmulBNFusion", "LabelEncoderFusion", "ClipQuantFusion", "ReluQuantFusion")
#: a session made with ORT's verbose log, in a fresh process (the session may crash): the log
#: has `GraphTransformer <name> modified: 1` for each transformer that changed the graph
_LOG_SESSION = (
    "import json, sys\n"
    "import onnxruntime as ort\n"
    "so = ort.SessionOptions()\n"
    "so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, sys.argv[2])\n"
    "so.log_severity_level = 0\n"
    "so.log_verbosity_level = 0\n"
    "extra = {'disabled_optimizers': json.loads(sys.argv[3])} if json.loads(sys.argv[3]) else {}\n"
    "ort.InferenceSession(sys.argv[1], so, providers=json.loads(sys.argv[4]), **extra)\n"
)


def transformers_applied(level: str, disabled: list[str], seconds: float) -> list[str]:
    """The graph transformers that change this model in a session at `level` with `disabled`
    switched off, in the order they first did (ORT's verbose log of a session made in a fresh
    process)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _LOG_SESSION, os.path.join(HERE, "model.onnx"),
                               LEVEL_ENUMS[level], json.dumps(disabled),
                               json.dumps(ort_providers(DEVICE))],
                              capture_output=True, text=True, timeout=max(seconds, 1.0))
        log = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        log = "".join(t.decode("utf-8", "replace") if isinstance(t, bytes) else (t or "")
                      for t in (e.stdout, e.stderr))
    return list(dict.fromkeys(re.findall(r"GraphTransformer (\S+) modified: 1", log)))


def kernel_op() -> str | None:
    """The op whose kernel failed, when the error names it (`... while running Gather node`)."""
    found = re.search(r"running (\w+) node", str(EXPECT.get("error_sig") or ""))
    return found.group(1) if found else None


def ablate(probe: Probe) -> tuple[str | None, str]:
    """ORT's plan: the lowest graph optimization level that fails (up to the failing
    configuration's); at `disabled` no graph rewrite is at fault, the kernels are; else the one
    graph transformer (then, for a rule-based transformer, the one rewrite rule) whose switching
    off (`disabled_optimizers`) alone makes it pass, by bisection over the transformers that
    change this model at that level (ORT's verbose log)."""
    below = list(LEVELS[:LEVELS.index(OPT_LEVEL)]) if OPT_LEVEL in LEVELS else []
    i, outcomes = first_failing(probe, [(f"graph optimizations {lv!r}", {"OPT_LEVEL": lv})
                                        for lv in below])
    lowest = below[i] if i is not None else OPT_LEVEL
    lower = [f"{lv!r} {outcome}" for lv, outcome in zip(below, outcomes, strict=False)
             if outcome != SAME]
    where = (f"it fails from graph optimizations {lowest!r} on"
             + (f" ({'; '.join(lower)})" if lower else ""))
    if lowest == "disabled":
        op = kernel_op()
        if op:
            return f"ort: kernel of {op}", (f"{where}: no graph rewrite runs, and the error "
                                             f"names the {op} node")
        return "ort: a kernel (fails with graph optimizations disabled)", (
            f"{where}: no graph rewrite runs, so no graph transformer is at fault (the error "
            f"names no node)")
    base = list(DISABLED_OPTIMIZERS)
    left = max(probe.deadline - time.monotonic(), 1.0)
    seconds = min(left, probe.run_limit_s or left)
    names: list[str] = []
    for _ in range(4):  # switching some off can let others change the graph
        more = [n for n in transformers_applied(lowest, base + names, seconds)
                if n not in names and n not in base]
        if not more:
            break
        names += more
    print(f"[localize] graph transformers that change this model at {lowest!r}: "
          f"{', '.join(names) or 'none'}", flush=True)

    def switched_off(level: str, subset: list[str]) -> tuple[str, dict[str, Any], dict[str, str]]:
        return (f"graph optimizations {level!r}, disabled_optimizers += {subset}",
                {"OPT_LEVEL": level, "DISABLED_OPTIMIZERS": base + subset}, {})

    culprit, why = one_at_fault(probe, names, lambda sub: switched_off(lowest, sub))
    if culprit is None:
        return None, f"{where}; among the graph transformers that change it: {why}"
    if culprit.endswith("_RuleBasedTransformer"):
        rules = [r for r in REWRITE_RULES if r not in base]
        rule, rule_why = one_at_fault(probe, rules, lambda sub: switched_off(lowest, sub))
        if rule is not None:
            return f"ort: {rule}", f"{where}; {why}; of its rewrite rules, {rule_why}"
        return f"ort: {culprit}", f"{where}; {why} (its rule not found: {rule_why})"
    return f"ort: {culprit}", f"{where}; {why}"
