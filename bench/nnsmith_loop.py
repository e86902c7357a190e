"""NNSmith's own fuzz loop against ONNX Runtime (CPU), timed on this machine: the baseline of
`bench/scale.py --nnsmith-python` (our cpu_ort campaign rate as a ratio against it).

Run by an interpreter that has NNSmith installed (see bench/nnsmith_gen.py; NNSmith 0.1.0 also
needs `appdirs` and `multipledispatch`):

    /tmp/nns/bin/python bench/nnsmith_loop.py [--seconds 60] [--nodes 10]

It builds `nnsmith.cli.fuzz.FuzzingLoop` from NNSmith's own `config/main.yaml` with what
`nnsmith.fuzz model.type=onnx backend.type=onnxruntime mgen.max_nodes=N fuzz.root=DIR` sets
(target cpu, `optmax` true: ORT_ENABLE_ALL; no crash-safe fork, no test timeout, no filters,
no `cmp.with`), and calls its `run()` for `--seconds`. Each iteration, as in NNSmith:
`make_testcase(seed)` = `model_gen(method="symbolic-cinit", max_nodes=N, timeout_ms=10000)`,
`make_concrete()`, `ONNXModel.from_gir` (a torch SymbolNet), `refine_weights()` (weights, then
`torch.onnx.export` + `onnx.checker`), `make_oracle()` (torch runs it: inputs and reference
outputs); then `validate_and_report` = `verify_testcase`: `ORTFactory.checked_compile_and_exec`
(an InferenceSession, one run) and `verify_results` (`assert_allclose` against the oracle), a
failure dumped as a bug report (into a temporary `fuzz.root`).

Counting, as NNSmith's `StatusCollect`: `tests` = iterations that made a test case (bugs
included), `bugs` = those that failed compile, run or comparison, `failed_gen` = iterations
whose `make_testcase` raised (skipped, no test). A generation that reaches `timeout_ms` is no
failure: `model_gen` stops inserting and NNSmith tests the smaller graph, so it counts as a test.
An `InternalError` (which aborts `nnsmith.fuzz`) also counts in `failed_gen` and the loop goes on.

Departures, needed to run NNSmith 0.1.0 with this machine's packages, none adding work:
`torch.onnx.export` gets `dynamo=False` (this torch defaults to the dynamo exporter, which
fails on NNSmith's models, guarding on data-dependent values), and
`onnx._serialize` (absent from recent onnx) is `SerializeToString`. NNSmith's INFO log goes to a
file only (hydra's `file` logging also prints it on stdout, which here carries the JSON). The op
set is inferred once per machine (`auto_opset`, cached under ~/.cache/nnsmith-0.1.0) before
timing starts; the first tests (warm-up) are inside it, as in NNSmith, so use >= 30 s. Prints one
JSON object: {"nodes", "seconds", "tests", "tests_per_min", "failed_gen", "bugs"}.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import os
import tempfile
import time
import warnings


def compat() -> None:
    import onnx
    import torch

    if not hasattr(onnx, "_serialize"):
        onnx._serialize = lambda proto: proto.SerializeToString()
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)


def make_loop(nodes: int, root: str):
    import nnsmith
    from nnsmith.cli.fuzz import FuzzingLoop
    from nnsmith.error import InternalError
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(os.path.join(os.path.dirname(nnsmith.__file__), "config", "main.yaml"))
    cfg.pop("defaults")  # hydra's logging overrides
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([
        "model.type=onnx", "backend.type=onnxruntime", f"mgen.max_nodes={nodes}",
    ]))
    for attempt in range(3):  # inferring the op set can trip NNSmith's Reshape check (random)
        cfg.fuzz.root = os.path.join(root, f"fuzz{attempt}")  # it must not exist yet
        try:
            return FuzzingLoop(cfg)
        except InternalError:
            if attempt == 2:
                raise


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--nodes", type=int, default=10)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    compat()
    from nnsmith.error import InternalError

    with tempfile.TemporaryDirectory() as tmp:
        log = logging.FileHandler(os.path.join(tmp, "fuzz.log"))
        log.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
        logging.basicConfig(level=logging.INFO, handlers=[log], force=True)
        loop = make_loop(args.nodes, tmp)
        internal = 0
        t0 = time.perf_counter()
        while (left := args.seconds - (time.perf_counter() - t0)) > 0:
            loop.timeout_s = left
            try:
                loop.run()
            except InternalError:
                internal += 1
        elapsed = time.perf_counter() - t0
    st = loop.status
    print(json.dumps({"nodes": args.nodes, "seconds": round(elapsed, 2), "tests": st.n_testcases,
                      "tests_per_min": round(st.n_testcases / elapsed * 60, 1),
                      "failed_gen": st.n_fail_make_test + internal, "bugs": st.n_bugs}))


if __name__ == "__main__":
    main()
