"""Shared machinery for the op-library tests: single-op graphs from the generator, a small
gradient search that moves inputs into every op's safe domain, and the torch-vs-ORT check."""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from campaign.artifacts import Materialized
from campaign.oracle import compare
from campaign.reference import run_reference
from campaign.testcase import TestCase, random_values
from ir import GenConfig, Graph, generate
from ir.analysis.precision import output_precisions
from ir.core.op import OP_REGISTRY
from ir.gen.builder import GenerationError

ALL_DTYPES = ["f16", "f32", "f64", "i32", "i64", "b8"]

#: the op library proper: control flow (ops with bodies), views and in-place writes (and their
#: functional counterparts) are generated and tested elsewhere (tests/ir/analysis/test_inplace.py)
LIBRARY_OPS = sorted(n for n, c in OP_REGISTRY.items() if not c.takes_blocks and c.generic)


def op_graphs(name: str, count: int, nodes: int = 2, max_elems: int = 64) -> list[Graph]:
    """`count` generated graphs using only op `name`, cycling through its signatures (the
    configured dtypes are those of one signature at a time, so each one gets exercised)."""
    op_cls = OP_REGISTRY[name]
    sigs = sorted({s for n in op_cls.arities() for s in op_cls.signatures(n)}, key=str)
    graphs: list[Graph] = []
    rng = random.Random(name)
    for attempt in range(40 * count):
        if len(graphs) >= count:
            break
        ins, outs = sigs[attempt % len(sigs)]
        dtypes = sorted({d.short for d in ins + outs})
        cfg = GenConfig(nodes=nodes, max_elems=max_elems, ops_include=[name], dtypes=dtypes)
        try:
            g = generate(rng.randrange(2**31), cfg)
        except GenerationError:
            continue
        graphs.append(g)
    return graphs


def _evaluate(g: Graph, env: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The values of `g` up to the first instruction whose inputs violate its domain, and that
    violation (later values could be NaN, which would poison the gradient)."""
    env = dict(env)
    violation = torch.zeros((), dtype=torch.float64)
    for inst in g.insts:
        args = [env[a] for a in inst.args]
        for v in inst.op.domain(*args):
            assert v.dtype.is_floating_point and bool((v >= 0).all()), (inst.op.name, v)
            violation = violation + v.to(torch.float64).sum()
        if violation.item() > 0:
            break
        res = inst.op.torch(*args)
        for r, t in zip(inst.results, res if len(inst.results) > 1 else (res,), strict=True):
            env[r.name] = t
    return env, violation


def search(g: Graph, values: dict[str, np.ndarray], steps: int = 150) -> tuple[dict[str, np.ndarray], bool]:
    """Gradient descent on the domain violations over the float inputs and params (a stand-in for
    the generator's input search). Returns the values and whether they are in every domain."""
    leaves = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
              for k, v in values.items() if v.dtype.kind == "f"}
    fixed = {k: torch.from_numpy(v) for k, v in values.items() if v.dtype.kind != "f"}
    dtypes = {k: torch.from_numpy(v).dtype for k, v in values.items()}
    opt = torch.optim.Adam(leaves.values(), lr=0.05) if leaves else None
    for _ in range(steps if opt else 0):
        env = {k: t.to(dtypes[k]) for k, t in leaves.items()} | fixed
        _, violation = _evaluate(g, env)
        if violation.item() == 0:
            break
        opt.zero_grad()
        violation.backward()
        opt.step()
    out = {k: t.detach().numpy().astype(values[k].dtype) for k, t in leaves.items()}
    out |= {k: v for k, v in values.items() if k not in out}
    with torch.no_grad():
        _, violation = _evaluate(g, {k: torch.from_numpy(v) for k, v in out.items()})
    return out, violation.item() == 0


@dataclass
class Outcome:
    valid: bool
    agrees: bool = True
    message: str = ""


def check_against(g: Graph, seed: int, backend) -> Outcome:
    """Search inputs into the domain; when valid, torch eager and `backend` must agree."""
    values, in_domain = search(g, random_values(g, seed))
    m = Materialized(TestCase(str(seed), seed, g, values))
    m.onnx_model  # noqa: B018 the full ONNX checker passes
    ref = run_reference(m)
    if not in_domain or ref.problem:
        return Outcome(False)
    res = backend.evaluate(m)
    if res.failed:
        return Outcome(True, False, f"{backend.name} failed: {res.error_msg}")
    cmp = compare(ref.outputs, res.outputs, output_precisions(g))
    return Outcome(True, cmp.ok, cmp.message)
