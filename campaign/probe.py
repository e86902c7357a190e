"""Per-backend support probe: which op signatures (op x dtypes) a backend compiles at all.

Each signature is probed alone *and in context* (an elementwise op before and after it), because
a single-op probe misses failures that appear only once the backend fuses neighbours (NNSmith's
probe passed an Erf float16 kernel that then failed 109 times inside fused graphs). A signature is
unsupported when a probe graph fails to import or compile; a failure at run time or a wrong
answer is a finding, not a support gap. Results are cached on disk per backend, backend version
and op table, so campaigns pay once.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from campaign.artifacts import Materialized
from campaign.backends import Backend, make_backend
from campaign.testcase import TestCase
from campaign.verdict import Stage
from ir.dtypes import DType
from ir.generate import GenConfig, SymbolicGraphBuilder, signature_key
from ir.graph import Graph, Inst
from ir.op import OP_REGISTRY, Op
from ir.values import random_values

CACHE_DIR = Path(os.environ.get("DYNSMITH_CACHE", Path.home() / ".cache" / "dynsmith")) / "probe"
ALL_DTYPES = [d.short for d in DType]


@dataclass
class ProbeReport:
    backend: str
    version: str
    #: signature key -> the first failure message (stage: message)
    unsupported: dict[str, str] = field(default_factory=dict)
    probed: int = 0
    cached: bool = False


def all_signatures() -> Iterator[tuple[type[Op], tuple[DType, ...], tuple[DType, ...]]]:
    for name in sorted(OP_REGISTRY):
        op_cls = OP_REGISTRY[name]
        seen = set()
        for arity in op_cls.arities():
            for sig in op_cls.signatures(arity):
                if sig not in seen:
                    seen.add(sig)
                    yield op_cls, *sig


def op_table_hash() -> str:
    keys = sorted(signature_key(c.name, i, o) for c, i, o in all_signatures())
    return hashlib.sha1("\n".join(keys).encode()).hexdigest()[:12]


def backend_version(backend: Backend) -> str:
    version = getattr(backend, "version", None)
    if version:
        return str(version)
    import onnxruntime
    import torch

    return f"ort{onnxruntime.__version__}-torch{torch.__version__}"


def _unary_for(dtype: DType) -> type[Op] | None:
    for name in sorted(OP_REGISTRY):
        cls = OP_REGISTRY[name]
        if cls.family == "unary" and ((dtype,), (dtype,)) in list(cls.signatures(1)):
            return cls
    return None


def probe_graphs(op_cls: type[Op], ins: tuple[DType, ...], outs: tuple[DType, ...], seed: int = 0
                 ) -> list[Graph]:
    """A graph with just this signature, and one with elementwise neighbours (when they exist)."""
    graphs = []
    for context in (False, True):
        rng = random.Random(f"{seed}/{op_cls.name}/{context}")
        for _ in range(30):
            g = _one_probe(op_cls, ins, outs, rng, context)
            if g is not None:
                graphs.append(g)
                break
    return graphs


def _one_probe(op_cls, ins, outs, rng, context) -> Graph | None:
    b = SymbolicGraphBuilder(rng, GenConfig(dtypes=ALL_DTYPES, max_elems=256))
    x = b.add_input(b.concrete_type(rng.choice(op_cls.first_ranks()), ins[0]))
    insts: list[Inst] = []
    first = x
    pre = _unary_for(ins[0]) if context else None
    if context and pre is None:
        return None
    if pre is not None:
        inst = b.try_op(pre, x, [], (ins[0],), 1)
        if inst is None:
            return None
        insts.append(inst)
        first = inst.results[0]
    inst = b.try_op(op_cls, first, [], ins, len(ins))
    # a signature may name one dtype for several results (split): compare what it names
    if inst is None or tuple(r.type.dtype for r in inst.results)[:len(outs)] != outs:
        return None
    insts.append(inst)
    outputs = list(inst.result_names)
    if context:
        post = _unary_for(outs[0])
        if post is not None:
            after = b.try_op(post, inst.results[0], [], (outs[0],), 1)
            if after is not None:
                insts.append(after)
                outputs[0] = after.results[0].name
    return b.graph("probe", insts, outputs)


def probe(backend_name: str, use_cache: bool = True) -> ProbeReport:
    backend = make_backend(backend_name)
    version = backend_version(backend)
    path = CACHE_DIR / f"{backend_name}-{version}-{op_table_hash()}.json"
    if use_cache and path.exists():
        data = json.loads(path.read_text())
        return ProbeReport(backend_name, version, data["unsupported"], data["probed"], cached=True)
    report = ProbeReport(backend_name, version)
    for op_cls, ins, outs in all_signatures():
        key = signature_key(op_cls.name, ins, outs)
        for i, g in enumerate(probe_graphs(op_cls, ins, outs)):
            report.probed += 1
            tc = TestCase(f"probe-{key}-{i}", 0, g, random_values(g, 0))
            result = backend.evaluate(Materialized(tc))
            if result.failed and result.stage in (Stage.IMPORT, Stage.COMPILE):
                first_line = (result.error_msg or "").strip().splitlines()[:1]
                report.unsupported[key] = f"{result.stage.value}: {first_line[0] if first_line else ''}"[:300]
                break
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"backend": backend_name, "version": version, "probed": report.probed,
                               "unsupported": report.unsupported}, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return report


def deny_list(backends: list[str], use_cache: bool = True) -> list[str]:
    """Signatures unsupported by any of `backends` (the generator's `deny`)."""
    deny: set[str] = set()
    for name in backends:
        deny |= set(probe(name, use_cache).unsupported)
    return sorted(deny)
