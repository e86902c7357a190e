"""Where a mutation happens: a *scope* (the top-level graph or any control-flow body, at any
depth), and the plumbing every mutator shares.

A scope is named by its path from the top: `((3, 1), (0, 0))` is body 0 of instruction 0 of
body 1 (an if's else) of top-level instruction 3. Bodies are closed graphs, so a value a
rewrite needs that the scope lacks (a new weight, a predicate threshold, a trip count) is a
*need*: a new input of the body, passed in by the instruction holding it from its own scope,
and so on up to the top, where it becomes a graph input or a param (`put`). Passing follows
the generator's conventions (`ir.gen.control`): an `if` takes it as one more operand (the
other body gets an unused input), a `loop` or `scan` as one more carried value its body
returns unchanged (a pass-through result nobody reads). A threshold passed this way stays "a
graph input passed unchanged into the site", which `ir.numerics.flow_coverage` needs to steer the branch.

`ScopedMutator` picks a scope, hands the subclass a `Ctx` (builder, rng, config, needs) and
the scope's graph, and threads whatever the rewrite needed. Regions (`region`) are contiguous
runs of pure instructions of one scope with their live-ins and live-outs.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ir.core.graph import Graph, Inst, Value
from ir.core.names import Names
from ir.core.op import Op
from ir.core.paths import Path
from ir.core.paths import scopes as walk_scopes
from ir.core.rewrite import remove_unused
from ir.core.span import Span, pick_span
from ir.core.types import TensorType
from ir.gen.builder import GenConfig, SymbolicGraphBuilder
from ir.ops.call import BodyCall
from ir.ops.control import is_control
from mutators.base import Mutant, Mutator


@dataclass(frozen=True)
class Scope:
    """A scope a mutator may rewrite: where it is, its graph, and what encloses it."""

    path: Path
    graph: Graph
    #: nesting depth of the scope (0: the top-level graph)
    depth: int
    #: inside a loop or scan body (at any level): its values recur from step to step
    iterated: bool = False
    #: inside a custom op's or a compile region's body (`BodyCall.kernel_body`): straight-line
    #: pure code only
    kernel: bool = False

    @property
    def root(self) -> bool:
        return not self.path


def scopes(g: Graph) -> list[Scope]:
    """The top-level graph and every body, nested ones included, outermost first."""
    return [Scope(path, body, path.depth,
                  any(is_control(h.op) and h.op.iterates for h in path.holders(g)),
                  any(isinstance(h.op, BodyCall) and h.op.kernel_body
                      for h in path.holders(g)))
            for path, body in walk_scopes(g)]


Need = tuple[Value, bool]  # (the new input as the scope sees it, whether it is a weight)


def put(g: Graph, path: Path, body: Graph, needs: list[Need], fresh: Callable[[str], str]) -> Graph:
    """`g` with the scope at `path` replaced by `body`, which reads the `needs` as extra inputs
    (not yet declared in `body`): at the top they are appended as graph inputs and params;
    in a body they are threaded up through every enclosing instruction (see the module doc)."""
    new, outer = _put(g, path, body, needs, fresh)
    if not outer:
        return new
    return replace(new, inputs=new.inputs + tuple(v for v, p in outer if not p),
                   params=new.params + tuple(v for v, p in outer if p))


def _put(g: Graph, path: Sequence[tuple[int, int]], body: Graph, needs: list[Need],
         fresh: Callable[[str], str]) -> tuple[Graph, list[Need]]:
    if not path:
        return body, needs
    (i, k), rest = path[0], path[1:]
    inst = g.insts[i]
    inner, wanted = _put(inst.blocks[k], rest, body, needs, fresh)
    blocks = list(inst.blocks)
    blocks[k] = inner
    if not wanted:
        insts = list(g.insts)
        insts[i] = replace(inst, blocks=tuple(blocks))
        return g.with_insts(insts), []
    outer = [(Value(fresh("m"), v.type), p) for v, p in wanted]
    if not is_control(inst.op):  # pragma: no cover - only control-flow ops have bodies
        raise ValueError(f"cannot pass values into the bodies of {inst.op.name}")
    new_inst = inst.op.add_operands(replace(inst, blocks=tuple(blocks)), k,
                                    [v for v, _ in wanted], [v.name for v, _ in outer], fresh)
    insts = list(g.insts)
    insts[i] = new_inst
    return g.with_insts(insts), outer


# ---- regions -------------------------------------------------------------------------------------

def pure(op: Op) -> bool:
    """Neither a view nor an in-place write (`Op.effect`, docs/inplace.md)."""
    return op.effect.pure


def pure_deep(inst: Inst) -> bool:
    """No view or in-place write in the instruction or anywhere in its bodies."""
    return pure(inst.op) and all(pure_deep(x) for b in inst.blocks for x in b.insts)


def pick_region(g: Graph, rng: random.Random, max_len: int = 4,
                ok: Callable[[Inst], bool] = pure_deep) -> Span | None:
    """A random contiguous run of 1..max_len instructions passing `ok` (default: no view or
    in-place write at any depth), with live-outs."""
    return pick_span(g, rng, max_len, ok)


def depends(insts: Iterable[Inst], src: str, dst: str) -> bool:
    """Whether `dst` (defined by `insts`) is computed from `src`."""
    reach = {src}
    for inst in insts:
        if reach & set(inst.args):
            reach.update(inst.result_names)
    return dst in reach


# ---- copying and cleaning ------------------------------------------------------------------------

def copy_graph(g: Graph, fresh: Callable[[str], str], rename: dict[str, str] | None = None) -> Graph:
    """`g` with every value it defines (inputs too, bodies included) under a fresh name."""
    names = dict(rename or {})
    inputs = tuple(_fresh_value(v, names, fresh, "b") for v in g.inputs)
    params = tuple(_fresh_value(v, names, fresh, "w") for v in g.params)
    insts = copy_insts(g.insts, names, fresh)
    return Graph(g.name, inputs, tuple(insts), tuple(names.get(o, o) for o in g.outputs), params)


def copy_insts(insts: Iterable[Inst], names: dict[str, str], fresh: Callable[[str], str]) -> list[Inst]:
    """Copies of `insts` reading `names[a]` for each operand a (when mapped) and defining fresh
    names (recorded in `names`); their bodies are copied with fresh names throughout."""
    out = []
    for inst in insts:
        args = tuple(names.get(a, a) for a in inst.args)
        blocks = tuple(copy_graph(b, fresh) for b in inst.blocks)
        results = tuple(_fresh_value(r, names, fresh, "v") for r in inst.results)
        out.append(Inst(inst.op, args, results, blocks))
    return out


def _fresh_value(v: Value, names: dict[str, str], fresh, prefix: str) -> Value:
    names[v.name] = fresh(prefix)
    return Value(names[v.name], v.type)


def prune(g: Graph, root: bool) -> Graph:
    """Dead code out: at the top `ir.core.rewrite.remove_unused` (unread inputs and params too); in
    a body only instructions (its inputs are its signature)."""
    return remove_unused(g, keep_inputs=not root)


def values_before(g: Graph, index: int) -> list[Value]:
    """Values an instruction placed at `index` may read."""
    return [*g.inputs, *g.params] + [r for inst in g.insts[:index] for r in inst.results]


# ---- the scoped mutator --------------------------------------------------------------------------

@dataclass
class Ctx:
    """What a scoped rewrite works with. New values it needs from outside the scope come from
    `need` (or from the builder's new inputs/params: `SymbolicGraphBuilder.try_op` with
    new placeholders); `ScopedMutator` threads them all."""

    b: SymbolicGraphBuilder
    rng: random.Random
    gen: GenConfig
    site: Scope
    donors: Callable[[random.Random], tuple[str, Graph] | None] | None = None
    needs: list[Need] = field(default_factory=list)

    @property
    def root(self) -> bool:
        return self.site.root

    @property
    def depth(self) -> int:
        return self.site.depth

    @property
    def iterated(self) -> bool:
        return self.site.iterated

    def fresh(self, prefix: str) -> str:
        return self.b.fresh_name(prefix)

    def need(self, t: TensorType, param: bool = False) -> Value:
        v = Value(self.fresh("w" if param else "x" if self.root else "b"), t)
        self.needs.append((v, param))
        return v

    def all_needs(self) -> list[Need]:
        return self.needs + [(v, False) for v in self.b.inputs] + [(v, True) for v in self.b.params]


def builder(g: Graph, rng: random.Random, gen: GenConfig) -> SymbolicGraphBuilder:
    """A builder over `g`'s names. Its chains (`ir.gen.control.BodyScope.chain`) never nest
    control flow: mutators place control flow themselves, and keep track of depth."""
    flat = replace(gen, p_if=0.0, p_loop=0.0, p_scan=0.0)
    return SymbolicGraphBuilder(rng, flat, Names.of(g))


class ScopedMutator(Mutator):
    """A mutator that rewrites one scope (the top level or any body) at a time. Subclasses
    implement `rewrite(scope graph, ctx) -> (new scope graph, params for lineage)` and may
    narrow `eligible`; the new scope must keep its inputs and output types (a body's
    signature), except at the top level."""

    #: share of proposals made at the top level when bodies exist (the rest: a random body)
    p_root: float = 0.6
    #: whether it may rewrite a custom op's body (`Scope.kernel`: straight-line pure code; a
    #: mutator that adds control flow, views or writes may not)
    into_kernels: bool = True

    def eligible(self, site: Scope) -> bool:
        return bool(site.graph.insts)

    def pick_site(self, g: Graph, rng: random.Random) -> Scope | None:
        sites = [s for s in scopes(g) if self.eligible(s) and (self.into_kernels or not s.kernel)]
        if not sites:
            return None
        root = [s for s in sites if s.root]
        if root and (len(sites) == 1 or rng.random() < self.p_root):
            return root[0]
        nested = [s for s in sites if not s.root]
        return rng.choice(nested or root)

    def propose(self, g: Graph, rng: random.Random, gen: GenConfig) -> Mutant | None:
        site = self.pick_site(g, rng)
        if site is None:
            return None
        ctx = Ctx(builder(g, rng, gen), rng, gen, site, self.donors)
        done = self.rewrite(site.graph, ctx)
        if done is None:
            return None
        new, params = done
        needs = ctx.all_needs()
        if site.root:
            out = replace(new, inputs=new.inputs + tuple(v for v, p in needs if not p),
                          params=new.params + tuple(v for v, p in needs if p))
            out = prune(out, root=True)
        else:
            new = prune(new, root=False)
            if new.inputs != site.graph.inputs or new.output_types() != site.graph.output_types():
                return None
            out = put(g, site.path, new, needs, ctx.fresh)
        if out == g:  # e.g. an op inserted on a value nothing reads: pruned again
            return None
        if site.path:
            params = {**params, "scope": str(site.path)}
        return Mutant(out, params)

    def rewrite(self, g: Graph, ctx: Ctx) -> tuple[Graph, dict[str, Any]] | None:
        raise NotImplementedError
