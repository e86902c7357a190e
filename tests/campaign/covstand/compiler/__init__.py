"""The stand-in compiler `covstand.CovStandIn` measures: a lowering with one branch per op
kind and one for wide results."""
from __future__ import annotations

from ir.core.graph import Graph


def lower(g: Graph) -> list[str]:
    code = []
    for inst in g.insts:
        name = inst.op.name
        if name == "matmul":
            code.append("gemm")
        elif name == "add":
            code.append("vadd")
        elif name == "relu":
            code.append("vmax0")
        else:
            code.append("call")
        if max(inst.results[0].type.shape, default=0) > 4:
            code.append("tile")
    return code
