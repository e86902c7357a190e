"""What both round-trip tests share: the generated graphs, and equality up to names on a
normal form.

`import(materialize(g))` is `g` up to value names: the canonical texts (`canonical_text`, values
renamed in definition order) are equal, i.e. the same instructions in the same order with the
same ops, attributes, result types and bodies, the same inputs and params (types, order) and
outputs. Both sides are first put in a normal form where a materializer is not one to one:
  - a slice of a whole axis (start 0, end its size, step 1) is no instruction: torch.export
    records `x[0:n]` as an alias of x;
  - torch only: `flatten[axis=a]` is the `reshape` it lowers to (torch has no flatten of
    ONNX's meaning; `aten.reshape` reads back as reshape);
  - torch only: instructions nothing reads are dropped (torch.export drops them; the
    generator leaves some in bodies);
  - torch only: an `if`'s operands (and its branches' inputs with them) in the order their
    values are defined: Dynamo lifts a `torch.cond`'s operands in an order of its own.
"""
from __future__ import annotations

import dataclasses

from ir.core.graph import Graph, Inst
from ir.core.rewrite import remove_unused
from ir.core.text import canonical_text
from ir.gen.builder import GenConfig
from ir.ops.control import If
from ir.ops.shape import Flatten, Reshape, Slice

#: generated graphs with control flow (as tests/ir/ops/test_control.py's)
CONTROL = GenConfig(p_if=0.1, p_loop=0.1, p_scan=0.15, max_depth=2)


def normal_form(g: Graph, torch: bool = False) -> Graph:
    renamed: dict[str, str] = {}
    defined = {v.name: i for i, v in enumerate((*g.inputs, *g.params))}

    def name(a: str) -> str:
        return renamed.get(a, a)

    insts: list[Inst] = []
    for inst in g.insts:
        args = tuple(name(a) for a in inst.args)
        op = inst.op
        if isinstance(op, Slice) and op.start == 0 and op.step == 1 and (
                op.end == inst.results[0].type.shape[op.axis]):
            renamed[inst.results[0].name] = args[0]
            continue
        if torch and isinstance(op, Flatten):
            op = Reshape(shape=tuple(inst.results[0].type.shape))
        blocks = tuple(normal_form(b, torch) for b in inst.blocks)
        if torch and isinstance(op, If):
            order = sorted(range(len(args) - 1), key=lambda i: defined[args[1 + i]])
            args = (args[0], *(args[1 + i] for i in order))
            blocks = tuple(dataclasses.replace(b, inputs=tuple(b.inputs[i] for i in order))
                           for b in blocks)
        insts.append(Inst(op, args, inst.results, blocks))
        for r in inst.results:
            defined[r.name] = len(defined)
    out = dataclasses.replace(g, insts=tuple(insts), outputs=tuple(name(o) for o in g.outputs))
    return remove_unused(out, keep_inputs=True) if torch else out


def same_up_to_names(a: Graph, b: Graph, torch: bool = False) -> bool:
    """Whether `a` and `b` are equal up to value names on the normal form (`torch`: with the
    torch-only rules)."""
    return canonical_text(normal_form(a, torch)) == canonical_text(normal_form(b, torch))
