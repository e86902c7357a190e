"""Places inside nested bodies: one path type for every pass.

A `Path` names a *scope*: the top-level graph (no steps) or a control-flow body, by the
(instruction index, body index) steps from the top down: `Path(((3, 1), (0, 0)))` is body 0 of
instruction 0 of body 1 (an if's else) of top-level instruction 3. A `Site` names one
*instruction*: a scope and an index in it, written flat, `(3, 1, 0)` for instruction 0 of body
1 of instruction 3, with the text form `"3/1/0"` (coverage's keys, findings' messages).

Both are tuples (a `Path` of pairs, a `Site` of ints), so they compare, hash and sort as the
plain tuples they replace; the methods are the one implementation of walking to, replacing and
enumerating scopes and sites.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from ir.core.graph import Graph, Inst


class Path(tuple):
    """A scope: (instruction, body) steps from the top-level graph down (see the module doc).
    Invariant: every step is a pair of ints."""

    def __new__(cls, steps: Iterable[tuple[int, int]] = ()) -> Path:
        return super().__new__(cls, tuple((int(i), int(k)) for i, k in steps))

    @property
    def depth(self) -> int:
        """Nesting depth of the scope (0: the top-level graph)."""
        return len(self)

    @property
    def root(self) -> bool:
        return not self

    def into(self, inst: int, block: int) -> Path:
        """The path of body `block` of instruction `inst` of this scope."""
        return Path((*self, (inst, block)))

    def at(self, g: Graph) -> Graph:
        """The scope this path names in `g`."""
        for i, k in self:
            g = g.insts[i].blocks[k]
        return g

    def holders(self, g: Graph) -> list[Inst]:
        """The instructions whose bodies the path enters, outermost first."""
        out = []
        for i, k in self:
            out.append(g.insts[i])
            g = g.insts[i].blocks[k]
        return out

    def replace_at(self, g: Graph, new: Graph) -> Graph:
        """`g` with the scope at this path replaced by `new` (every enclosing instruction keeps
        its operands and results: a change of a body's signature is the caller's)."""
        if not self:
            return new
        (i, k), rest = self[0], Path(self[1:])
        inst = g.insts[i]
        blocks = list(inst.blocks)
        blocks[k] = rest.replace_at(inst.blocks[k], new)
        insts = list(g.insts)
        insts[i] = replace(inst, blocks=tuple(blocks))
        return g.with_insts(insts)

    def site(self, index: int) -> Site:
        """Instruction `index` of this scope."""
        return Site((*(x for step in self for x in step), index))

    def __str__(self) -> str:
        """The text form, as lineage records a mutated scope: "3.1/0.0" ("" at the top)."""
        return "/".join(f"{i}.{k}" for i, k in self)

    def __repr__(self) -> str:
        return f"Path({tuple(self)!r})"


class Site(tuple):
    """An instruction at any depth, flat: (instruction, body, ..., instruction) indices (see
    the module doc). Invariant: odd length, ints >= 0."""

    def __new__(cls, flat: Iterable[int]) -> Site:
        return super().__new__(cls, tuple(int(x) for x in flat))

    @staticmethod
    def parse(text: str) -> Site:
        """The site of a text form: "3/1/0" -> (3, 1, 0)."""
        return Site(int(x) for x in text.split("/"))

    def __str__(self) -> str:
        return "/".join(map(str, self))

    def __repr__(self) -> str:
        return f"Site({str(self)!r})"

    @property
    def scope(self) -> Path:
        """The scope holding the instruction."""
        return Path(zip(self[:-1:2], self[1:-1:2], strict=True))

    @property
    def index(self) -> int:  # type: ignore[override]  # the instruction's index; tuple.index unused on sites
        """The instruction's index in its scope."""
        return self[-1]

    def inst(self, g: Graph) -> Inst:
        """The instruction this site names in `g`."""
        return self.scope.at(g).insts[self.index]

    def body(self, block: int) -> Path:
        """The path of body `block` of this site's instruction."""
        return self.scope.into(self.index, block)

    def enclosing(self) -> tuple[Site, int] | None:
        """The site holding this one and the index of the body it is in ("3/1/0" ->
        ("3", 1)); None at the top level."""
        if len(self) < 3:
            return None
        return Site(self[:-2]), self[-2]

    def within(self, outer: Site, block: int | None = None) -> bool:
        """Whether this site is inside a body of site `outer` (body `block` if given), at any
        depth."""
        if len(self) <= len(outer) or self[:len(outer)] != outer:
            return False
        return block is None or self[len(outer)] == block


def scopes(g: Graph, path: Path = Path()) -> Iterator[tuple[Path, Graph]]:
    """Every scope of `g`, the top level first, each scope before the bodies inside it."""
    yield path, g
    for i, inst in enumerate(g.insts):
        for k, block in enumerate(inst.blocks):
            yield from scopes(block, path.into(i, k))


def control_sites(g: Graph, path: Path = Path()) -> Iterator[tuple[Site, Inst]]:
    """Every instruction holding bodies, at any depth, depth first: each before the ones
    inside its bodies, and those before the next instruction of its scope."""
    for i, inst in enumerate(g.insts):
        if not inst.blocks:
            continue
        yield path.site(i), inst
        for k, block in enumerate(inst.blocks):
            yield from control_sites(block, path.into(i, k))
