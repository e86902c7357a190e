"""NNSmith's generator timed on this machine: the baseline `bench/gen.py --nnsmith-python` runs.

Run by an interpreter that has NNSmith installed (it pins old packages, so keep it in its own
virtual environment: `python -m venv --system-site-packages /tmp/nns && /tmp/nns/bin/pip
install --no-deps nnsmith`). Prints one JSON object: {"nodes": N, "ms": [per-graph ms, ...]} for
`model_gen(method="symbolic-cinit") + make_concrete()`, the part comparable to our `generate`.

    /tmp/nns/bin/python bench/nnsmith_gen.py --nodes 10 --n 100
"""
from __future__ import annotations

import argparse
import json
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--n", type=int, default=100)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from nnsmith.graph_gen import model_gen
    from nnsmith.materialize import Model

    opset = Model.init("onnx").operators()
    ms = []
    for seed in range(args.n):
        t0 = time.perf_counter()
        model_gen(opset=opset, method="symbolic-cinit", seed=seed, max_nodes=args.nodes,
                  timeout_ms=10000).make_concrete()
        ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"nodes": args.nodes, "ops": len(opset), "ms": ms}))


if __name__ == "__main__":
    main()
