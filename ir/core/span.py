"""Spans: runs of consecutive instructions of one scope, what the generator and the mutators
cut out, wrap or duplicate (a custom op's or a compile region's body, a loop body, a splice)."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ir.core.graph import Graph, Inst


@dataclass(frozen=True)
class Span:
    """Instructions `start:end` of a scope graph."""

    graph: Graph
    start: int
    end: int
    #: values the span reads that it does not define, in first-use order
    ins: tuple[str, ...]
    #: values it defines that later instructions or the outputs read
    outs: tuple[str, ...]

    @property
    def insts(self) -> tuple[Inst, ...]:
        return self.graph.insts[self.start:self.end]


def span(g: Graph, start: int, end: int) -> Span:
    """Instructions `start:end` of `g`, with what they read and what is read of them."""
    insts = g.insts[start:end]
    defined: set[str] = set()
    ins: list[str] = []
    for inst in insts:
        for a in inst.args:
            if a not in defined and a not in ins:
                ins.append(a)
        defined.update(inst.result_names)
    later = {a for inst in g.insts[end:] for a in inst.args} | set(g.outputs)
    outs = [r.name for inst in insts for r in inst.results if r.name in later]
    return Span(g, start, end, tuple(ins), tuple(outs))


def pick_span(g: Graph, rng: random.Random, max_len: int, ok: Callable[[Inst], bool]
              ) -> Span | None:
    """A random run of 1..max_len instructions passing `ok`, with live-outs (8 draws)."""
    if not g.insts:
        return None
    for _ in range(8):
        start = rng.randrange(len(g.insts))
        end = start
        want = rng.randint(1, max_len)
        while end < len(g.insts) and end - start < want and ok(g.insts[end]):
            end += 1
        if end > start:
            s = span(g, start, end)
            if s.outs:
                return s
    return None
