"""The in-place analysis: storage (alias classes), the order of reads and writes, rejection of
ill-defined programs, functionalization into pure SSA, and the torch execution plan.

Semantics (docs/inplace.md): exactly torch eager's. A value name denotes a tensor; a view op's
result shares its operand's storage; an in-place op writes its destination's storage (or the
region of it its `written_region` names) and returns the destination itself. A read sees the
storage's contents at that point of the program; the graph's outputs are read at the end.
Every other op (control flow included) has value semantics: its results are new storage.

`analyze(g)` follows every graph level (bodies too) in program order:
  - each value's place: its *storage* (the graph or body input, param, or pure-op result that
    owns the memory; an in-place result is its destination) and, for views, the flat positions
    of its elements in that storage, read off torch's own view of a contiguous meta tensor;
  - rejects, with a one-line `InplaceError` naming the instruction (`REJECTIONS` lists them):
    writes to params or to a body's inputs (directly or through views), writes to memory in
    which elements repeat (expanded or overlapping-unfold views), or through such a view,
    reads that overlap the written memory other than as the very same elements, views torch
    cannot make (`view_reshape` on incompatible strides), and a written graph input that is not
    among the outputs (a mutated input is an observable output);
  - plans the torch form: which pure results must be copied so that they really are new
    storage when torch makes them views (`Op.torch_may_alias`), and which bases must be
    contiguous for `view_reshape` (strides are modelled on contiguous bases).

`functionalize(g)` rewrites a graph with writes into pure SSA of existing pure ops with the same
outputs: a write computes the new contents of the written memory, then writes them back
through the views' pure inverses (slice_scatter, select_scatter, diagonal_scatter,
unfold_scatter, the inverse permute or reshape) up to the storage's base; later reads of any
alias re-derive it from the new base. ONNX and the numerical validity checks use this form;
torch runs the in-place form (`TorchPlan`), so compilers get real mutation.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import numpy as np

from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import Fixes, Interpreter
from ir.core.names import Names
from ir.core.op import Op
from ir.core.shapes import Dim
from ir.core.types import TensorType
from ir.core.verify import VerifyError, quote_context, register_effect_check
from ir.ops.custom import Custom
from ir.ops.inplace import InPlace
from ir.ops.views import Clone, ViewOp, ViewReshape, strided_positions

if TYPE_CHECKING:
    from torch import Tensor

_T = TypeVar("_T")

#: the rejected programs: rule -> the summary's shape (the verifier's "graph G, inst N (op): "
#: prefix comes first). docs/inplace.md explains each; tests check each message exactly.
REJECTIONS = {
    "param": "writes param %{w}{via}: weights are read-only",
    "body_input": "writes %{x}{via}, an input of this body: bodies may not mutate their operands",
    "repeats": ("writes %{v}, whose elements share memory (an expanded or overlapping unfold "
                "view): the result would depend on the order of the writes"),
    "through_repeats": ("writes %{v} through %{u}, whose elements share memory: writing back "
                        "through such a view is not supported"),
    "overlap": ("reads %{a}, which overlaps the memory it writes (%{v}) without being the same "
                "elements: the result would depend on the order of reads and writes"),
    "view": "cannot view %{x} (strides {strides}) as {shape}: torch's view needs compatible strides",
    "unreturned": "input %{x} is written (inst {i}, {op}) but is not an output: a mutated input must be returned",
}


class InplaceError(VerifyError):
    """An ill-defined program (see `REJECTIONS`); `summary` is one line naming the instruction,
    `index` the top-level instruction it is in (the control-flow instruction holding it)."""

    def __init__(self, summary: str, context: str = "", index: int = -1):
        super().__init__(summary, context)
        self.index = index


def _writes(op: Op) -> bool:
    return op.effect.writes_memory


def has_writes(g: Graph) -> bool:
    """Whether any instruction, nested ones included, writes in place (remembered per graph
    object: asked at every evaluation of the input search)."""
    return _cached("writes", g, lambda: any(_writes(inst.op) for inst, _ in g.walk()))


def has_effects(g: Graph) -> bool:
    """Whether any instruction writes in place or makes a view."""
    return any(not inst.op.effect.pure for inst, _ in g.walk())


# ---------------------------------------------------------------------------------------------
# analysis


@dataclass(eq=False)
class Storage:
    """One alias class: the memory owned by `base`."""

    base: str
    type: TensorType
    kind: str  #: "input" (graph input), "param", "body_input", "local" (a pure op's result)
    writes: list[int] = field(default_factory=list)  #: instruction indices writing it
    view_reshaped: bool = False  #: a view_reshape of it exists (its base must be contiguous)


@dataclass(eq=False)
class Node:
    """A value's place in its storage."""

    storage: Storage
    parent: str | None  #: the (canonical) value it is a view of; None for the base
    view: ViewOp | None
    meta: Tensor  #: torch meta tensor: the value as a strided view of a contiguous base
    positions: np.ndarray  #: flat position in the base of each element (the value's shape)
    repeats: bool  #: some memory location holds several of its elements


@dataclass
class Level:
    """The analysis of one graph level (the top graph or a body)."""

    graph: Graph
    path: str
    nodes: dict[str, Node]
    #: in-place result -> the (canonical) destination it is
    alias: dict[str, str]
    #: torch plan: pure result -> "clone" | "contiguous"; input -> "clone" | "contiguous"
    fix_results: dict[str, str]
    fix_inputs: dict[str, str]
    #: writes (instruction index, through a view?) at this level
    writes: list[tuple[int, bool]]
    bodies: dict[int, list[Level]]

    def canon(self, name: str) -> str:
        return self.alias.get(name, name)

    def node(self, name: str) -> Node:
        return self.nodes[self.canon(name)]


@dataclass
class Analysis:
    top: Level

    def levels(self) -> Iterator[Level]:
        stack = [self.top]
        while stack:
            lv = stack.pop()
            yield lv
            for bodies in lv.bodies.values():
                stack.extend(bodies)

    def counts(self) -> tuple[int, int]:
        """(in-place writes, writes through views), nested bodies included."""
        writes = [w for lv in self.levels() for w in lv.writes]
        return len(writes), sum(1 for _, via in writes if via)


def _meta_base(t: TensorType) -> Tensor:
    import torch

    return torch.empty(tuple(t.shape), device="meta")


def _positions(meta: Tensor) -> np.ndarray:
    return strided_positions(tuple(meta.shape), meta.stride(), meta.storage_offset())


def _repeats(pos: np.ndarray) -> bool:
    return pos.size > 1 and np.unique(pos).size < pos.size


def _shape(shape: Iterable[Dim]) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _region_text(views: Sequence[Any], rank: int) -> str:
    """`[0:2, 1]`-style text of a setitem region (views applied last axis first): its
    `ViewSelect`s and `ViewSlice`s."""
    parts = [":"] * rank
    for v in views:
        if hasattr(v, "index"):
            parts[v.axis] = str(v.index)
        else:
            step = f":{v.step}" if v.step != 1 else ""
            parts[v.axis] = f"{v.start}:{v.end}{step}"
    while parts and parts[-1] == ":":
        parts.pop()
    return "[" + ", ".join(parts) + "]"


class _Analyzer:
    def __init__(self, require_returned: bool = True):
        self.require_returned = require_returned

    def level(self, g: Graph, path: str, top: bool, outer: int | None = None) -> Level:
        """`outer`: the top-level instruction holding this body (None at the top level)."""
        lv = Level(g, path, {}, {}, {}, {}, [], {})
        for v in g.inputs:
            self._base(lv, v, "input" if top else "body_input")
        for p in g.params:
            self._base(lv, p, "param")
        for index, inst in enumerate(g.insts):
            where = f"{path}, inst {index} ({inst.op.name})"

            def fail(msg: str, index: int = index, where: str = where) -> NoReturn:
                raise InplaceError(f"{where}: {msg}", quote_context(g, index),
                                   index if outer is None else outer)

            eff = inst.op.effect
            if eff.view_of is not None:
                self._view(lv, inst, eff.view_of, fail)
            elif eff.writes is not None:
                self._write(lv, index, inst, eff.writes, fail)
            else:
                if eff.mutates:
                    self._mutate(lv, index, inst, eff.mutates, fail)
                for r in inst.results:
                    self._base(lv, r, "local")
                if inst.blocks:
                    lv.bodies[index] = [
                        self.level(b, f"{where} > block {k} graph {b.name}", False,
                                   index if outer is None else outer)
                        for k, b in enumerate(inst.blocks)]
        if top and self.require_returned:
            self._outputs(lv)
        self._plan(lv)
        return lv

    def _base(self, lv: Level, v: Value, kind: str) -> None:
        meta = _meta_base(v.type)
        st = Storage(v.name, v.type, kind)
        lv.nodes[v.name] = Node(st, None, None, meta, _positions(meta), False)

    def _view(self, lv: Level, inst: Inst, view_of: int, fail: Callable[[str], NoReturn]) -> None:
        op = cast(ViewOp, inst.op)  # only views have an `Effect.view_of`
        src = inst.args[view_of]
        parent = lv.canon(src)
        pn = lv.nodes[parent]
        try:
            meta = op.torch(pn.meta)
        except RuntimeError:
            fail(REJECTIONS["view"].format(x=src, strides=tuple(pn.meta.stride()),
                                           shape=_shape(op.infer([pn_type(pn)])[0].shape)))
        pos = _positions(meta)
        if isinstance(op, ViewReshape):
            pn.storage.view_reshaped = True
        lv.nodes[inst.results[0].name] = Node(pn.storage, parent, op, meta, pos,
                                              pn.repeats or _repeats(pos))

    def _write(self, lv: Level, index: int, inst: Inst, writes: int,
               fail: Callable[[str], NoReturn]) -> None:
        op = cast(InPlace, inst.op)  # only in-place ops have an `Effect.writes`
        dest_arg = inst.args[writes]
        d = lv.canon(dest_arg)
        dn = lv.nodes[d]
        st = dn.storage
        via = f" through %{dest_arg}" if d != st.base or dest_arg != st.base else ""
        _writable(st, via, fail)
        views = op.written_region(pn_type(dn))
        meta = dn.meta
        for v in views:
            meta = v.torch(meta)
        region = _positions(meta)
        shown = dest_arg + (_region_text(views, len(dn.meta.shape)) if views else "")
        if _repeats(region):
            fail(REJECTIONS["repeats"].format(v=shown))
        # a view made through a view with repeated elements: its write-back would have to go
        # through that view's (non-existent) inverse
        if views and dn.repeats:
            fail(REJECTIONS["through_repeats"].format(v=shown, u=dest_arg))
        _no_repeats_above(lv, dn, shown, fail)
        for k, a in enumerate(inst.args):
            if k == writes:
                continue
            an = lv.node(a)
            if an.storage is not st:
                continue
            # the very same elements: same positions and, as torch compares them, same strides
            same = getattr(op, "elementwise", False) and an.positions.shape == region.shape \
                and np.array_equal(an.positions, region) and an.meta.stride() == meta.stride()
            if not same and np.intersect1d(an.positions.ravel(), region.ravel()).size:
                fail(REJECTIONS["overlap"].format(a=a, v=shown))
        st.writes.append(index)
        lv.writes.append((index, dn.parent is not None or bool(views)))
        lv.alias[inst.results[0].name] = d

    def _mutate(self, lv: Level, index: int, inst: Inst, mutates: Sequence[int],
                fail: Callable[[str], NoReturn]) -> None:
        """A custom op overwriting the whole of each operand in `mutates` (`ir.ops.custom`):
        the rules of an in-place write, with no operand allowed to overlap a written one
        (the kernel reads its operands and writes in an order of its own)."""
        for k in mutates:
            dest_arg = inst.args[k]
            dn = lv.node(dest_arg)
            st = dn.storage
            _writable(st, f" through %{dest_arg}" if dest_arg != st.base else "", fail)
            if dn.repeats:
                fail(REJECTIONS["repeats"].format(v=dest_arg))
            _no_repeats_above(lv, dn, dest_arg, fail)
            for j, a in enumerate(inst.args):
                an = lv.node(a)
                if j != k and an.storage is st and \
                        np.intersect1d(an.positions.ravel(), dn.positions.ravel()).size:
                    fail(REJECTIONS["overlap"].format(a=a, v=dest_arg))
            st.writes.append(index)
            lv.writes.append((index, dn.parent is not None))

    def _outputs(self, lv: Level) -> None:
        g = lv.graph
        outs = set(g.outputs)
        for v in g.inputs:
            st = lv.nodes[v.name].storage
            if st.writes and v.name not in outs:
                i = st.writes[0]
                raise InplaceError(
                    f"{lv.path}: " + REJECTIONS["unreturned"].format(x=v.name, i=i, op=g.insts[i].op.name),
                    quote_context(g, i), i)

    def _plan(self, lv: Level) -> None:
        g = lv.graph
        for v in (*g.inputs, *g.params):
            st = lv.nodes[v.name].storage
            if st.writes:
                lv.fix_inputs[v.name] = "clone"
            elif st.view_reshaped:
                lv.fix_inputs[v.name] = "contiguous"
        for inst in g.insts:
            if not inst.op.effect.pure:
                continue
            operand_written = any(lv.node(a).storage.writes for a in inst.args)
            for r in inst.results:
                st = lv.nodes[r.name].storage
                if inst.op.torch_may_alias and (st.writes or operand_written):
                    lv.fix_results[r.name] = "clone"
                elif st.view_reshaped:
                    lv.fix_results[r.name] = "contiguous"


def _writable(st: Storage, via: str, fail: Callable[[str], NoReturn]) -> None:
    """Reject a write to storage `st` it may not take: a param's, a body input's."""
    if st.kind == "param":
        fail(REJECTIONS["param"].format(w=st.base, via=via))
    if st.kind == "body_input":
        fail(REJECTIONS["body_input"].format(x=st.base, via=via))


def _no_repeats_above(lv: Level, dn: Node, shown: str, fail: Callable[[str], NoReturn]) -> None:
    """Reject a write (to `shown`) through a view made of a view with repeated elements: its
    write-back would go through that view's (non-existent) inverse."""
    node = dn
    while node.parent is not None:
        parent = lv.nodes[node.parent]
        if parent.repeats:
            fail(REJECTIONS["through_repeats"].format(v=shown, u=node.parent))
        node = parent


def pn_type(n: Node) -> TensorType:
    return TensorType(tuple(n.meta.shape), n.storage.type.dtype)


_CACHE: dict[tuple[str, int], tuple[Graph, Any]] = {}


def _cached(kind: str, g: Graph, make: Callable[[], _T]) -> _T:
    """`make()`, remembered for this very graph object (analyses run for every evaluation)."""
    key = (kind, id(g))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is g:
        return hit[1]
    out = make()
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[key] = (g, out)
    return out


def analyze(g: Graph, require_returned: bool = True) -> Analysis:
    """The analysis of `g` (raises `InplaceError` when it is ill-defined). Assumes `g` passes
    the verifier's other checks (types, per-op rules). `require_returned=False` skips the
    rule that written inputs are outputs (for graphs under construction)."""
    return _cached(f"analysis{int(require_returned)}", g, lambda: Analysis(
        _Analyzer(require_returned).level(g, f"graph {g.name}", top=True)))


def check(g: Graph) -> None:
    """Raise `InplaceError` if `g` is ill-defined (the verifier calls this when `g` has views
    or in-place writes: registered below)."""
    analyze(g)


register_effect_check(check)

def counts(g: Graph) -> tuple[int, int]:
    """(in-place writes, writes through views), nested ones included; (0, 0) when none."""
    if not has_writes(g):
        return 0, 0
    return analyze(g).counts()


# ---------------------------------------------------------------------------------------------
# functionalization


@dataclass
class Functional:
    """A functionalized graph level and where each of its instructions came from."""

    graph: Graph
    #: per instruction of `graph`, the index of the instruction of the original level it
    #: implements (part of)
    origin: list[int]
    #: per control-flow instruction of `graph` (by index), its functionalized bodies
    blocks: dict[int, list[Functional]]

    def site(self, site: str) -> str:
        """The original site path (`ir.numerics.flow_coverage` syntax "3/0/1") of a functionalized one."""
        parts = site.split("/")
        out: list[str] = []
        level: Functional | None = self
        for k in range(0, len(parts), 2):
            if level is None:
                return site
            i = int(parts[k])
            out.append(str(level.origin[i]))
            if k + 1 < len(parts):
                b = int(parts[k + 1])
                out.append(str(b))
                level = level.blocks.get(i, [None] * (b + 1))[b]
        return "/".join(out)


class _FunctionalNames:
    """Names in the functionalized graph: the original graph's names (`ir.core.names.Names`), each
    of which its first materialization may reuse, and the ones defined so far."""

    def __init__(self, g: Graph):
        self.names = Names.of(g)
        self.original = frozenset(self.names.taken)
        self.defined: set[str] = set()

    def fresh(self, hint: str) -> str:
        """`hint` itself when it is an original name not yet defined in the functionalized
        graph (a view's or an in-place result's first materialization), else `hint_k`."""
        if hint in self.original and hint not in self.defined:
            self.defined.add(hint)
            return hint
        name = self.names.suffixed(hint)
        self.defined.add(name)
        return name


class Emitter:
    """What in-place and view ops use to emit their functional forms: the type of a value
    and `emit(op, args, hint) -> name` for a one-result pure op."""

    def __init__(self, names: _FunctionalNames, lv: Level):
        self.names = names
        self.lv = lv
        self.types: dict[str, TensorType] = dict(lv.graph.types())
        self.insts: list[Inst] = []
        self.origin: list[int] = []
        self.blocks: dict[int, list[Functional]] = {}
        self.at = 0
        #: indices of the instructions emitted (not the original level's pure ones)
        self.emitted: set[int] = set()
        #: canonical value -> (functional name, storage version it reflects)
        self.cur: dict[str, tuple[str, int]] = {}
        self.version: dict[int, int] = {}

    def type(self, name: str) -> TensorType:
        return self.types[name]

    def emit(self, op: Op, args: Sequence[str], hint: str) -> str:
        (t,) = op.infer([self.types[a] for a in args])
        name = self.names.fresh(hint)
        self.types[name] = t
        self.insts.append(Inst(op, tuple(args), (Value(name, t),)))
        self.origin.append(self.at)
        self.emitted.add(len(self.insts) - 1)
        return name

    # ---- storage state --------------------------------------------------------------------
    def define_base(self, name: str) -> None:
        st = self.lv.nodes[name].storage
        self.version.setdefault(id(st), 0)
        self.cur[name] = (name, self.version[id(st)])
        self.names.defined.add(name)

    def read(self, name: str) -> str:
        """The functional name of `name`'s current contents (re-deriving a stale view)."""
        c = self.lv.canon(name)
        node = self.lv.nodes[c]
        ver = self.version[id(node.storage)]
        have = self.cur.get(c)
        if have is not None and have[1] == ver:
            return have[0]
        assert node.parent is not None and node.view is not None, f"stale base %{c}"
        parent = self.read(node.parent)
        op = node.view.pure_read(self.types[parent])
        out = parent if op is None else self.emit(op, [parent], c)
        self.cur[c] = (out, ver)
        return out

    def write(self, inst: Inst, k: int) -> None:
        """Emit the write of in-place instruction `inst` into its operand `k`."""
        op = cast(InPlace, inst.op)  # only in-place ops have an `Effect.writes`
        d = self.lv.canon(inst.args[k])
        args = [self.read(a) for a in inst.args]  # every operand is read before the write
        r = inst.results[0].name
        views = op.written_region(self.types[args[k]])
        region = [args[k]]
        for v in views:
            read = v.pure_read(self.types[region[-1]])
            region.append(region[-1] if read is None else self.emit(read, [region[-1]], f"{d}_at"))
        new = op.functional(self, region[-1], args, r if not views else f"{r}_new")
        for i in reversed(range(len(views))):  # back out of the written region, to the destination
            new = views[i].scatter(self, region[i], new, r if i == 0 else f"{r}_new")
        self.store(d, new)

    def mutate(self, inst: Inst, subs: list[Functional]) -> None:
        """Emit mutating custom instruction `inst` (`Effect.mutates`) as its pure form, whose
        first results are the new contents, each then stored into its operand's memory."""
        op = cast(Custom, inst.op)  # only custom ops have an `Effect.mutates`
        args = [self.read(a) for a in inst.args]
        new = [Value(self.names.fresh(f"{inst.args[k]}_new"), self.types[args[k]])
               for k in op.mutates]
        self.insts.append(Inst(op.pure_form(), tuple(args), (*new, *inst.results),
                               tuple(s.graph for s in subs)))
        self.origin.append(self.at)
        if subs:
            self.blocks[len(self.insts) - 1] = subs
        for v in (*new, *inst.results):
            self.types[v.name] = v.type
        for r in inst.results:
            self.define_base(r.name)
        for k, v in zip(op.mutates, new, strict=True):
            self.store(self.lv.canon(inst.args[k]), v.name)

    def store(self, d: str, new: str) -> None:
        """`new` is the contents of (canonical) value `d` from now on: written back up its
        chain of views to the base, each through its view's inverse."""
        st = self.lv.nodes[d].storage
        chain = [(d, new)]
        name = d
        child = self.lv.nodes[name]
        while child.parent is not None:
            parent = child.parent
            assert child.view is not None, f"view %{name} without its op"
            new = child.view.scatter(self, self.read(parent), new, parent)
            chain.append((parent, new))
            name = parent
            child = self.lv.nodes[name]
        ver = self.version[id(st)] + 1
        self.version[id(st)] = ver
        for name, value in chain:
            self.cur[name] = (value, ver)


def _functionalize_level(names: _FunctionalNames, lv: Level, top: bool) -> Functional:
    g = lv.graph
    f = Emitter(names, lv)
    for v in (*g.inputs, *g.params):
        f.define_base(v.name)
    for index, inst in enumerate(g.insts):
        f.at = index
        op = inst.op
        if op.effect.view_of is not None:
            continue  # materialized when read (`Emitter.read`), from the contents of that time
        if op.effect.writes is not None:
            f.write(inst, op.effect.writes)
            continue
        subs = [_functionalize_level(names, body, False) for body in lv.bodies.get(index, [])]
        if op.effect.mutates:
            f.mutate(inst, subs)
            continue
        args = [f.read(a) for a in inst.args]
        blocks = tuple(s.graph for s in subs)
        f.insts.append(Inst(op, tuple(args), inst.results, blocks))
        f.origin.append(index)
        if subs:
            f.blocks[len(f.insts) - 1] = subs
        for r in inst.results:
            f.types[r.name] = r.type
            f.define_base(r.name)
    f.at = max(len(g.insts) - 1, 0)
    outputs: list[str] = []
    inputs = {v.name for v in (*g.inputs, *g.params)}
    for o in g.outputs:
        name = f.read(o)
        if top and (name in outputs or name in inputs):
            name = f.emit(Clone(), [name], o)  # ONNX outputs: distinct, not inputs
        outputs.append(name)
    # emitted instructions nobody reads (e.g. a region read a setitem does not need) go;
    # the original level's instructions all stay (their values are checked like the original's)
    live = set(outputs)
    keep = []
    for i in reversed(range(len(f.insts))):
        inst = f.insts[i]
        if i not in f.emitted or any(r.name in live for r in inst.results):
            keep.append(i)
            live.update(inst.args)
    keep.reverse()
    out = Graph(g.name, g.inputs, tuple(f.insts[i] for i in keep), tuple(outputs), g.params)
    renum = {old: new for new, old in enumerate(keep)}
    return Functional(out, [f.origin[i] for i in keep],
                      {renum[i]: subs for i, subs in f.blocks.items()})


def functionalize(g: Graph) -> Functional:
    """The pure SSA form of `g` with the same outputs (`g` itself when nothing writes). Raises
    `InplaceError` when `g` is ill-defined."""
    if not has_writes(g):
        return Functional(g, list(range(len(g.insts))), {})

    def make() -> Functional:
        lv = analyze(g).top
        return _functionalize_level(_FunctionalNames(g), lv, True)

    return _cached("functional", g, make)


def pure_form(g: Graph) -> Graph:
    """`functionalize(g).graph`: what ONNX, precision and validity analyses see."""
    return functionalize(g).graph if has_writes(g) else g


# ---------------------------------------------------------------------------------------------
# the torch form


class TorchPlan:
    """Runs a graph with views and in-place writes on torch, eagerly or under a compiler:
    in-place ops write, views alias, and the analysis's fixes keep every other op's results
    new storage (copies of the `Op.torch_may_alias` results whose memory is written) and the
    bases of `view_reshape`s contiguous."""

    def __init__(self, g: Graph):
        self.graph = g
        self.levels = {id(lv.graph): lv for lv in analyze(g).levels()}
        #: per level (by graph id): its fixes when written inputs are copied, and when not
        self.fixes = {key: (_fixes(lv, True), _fixes(lv, False)) for key, lv in self.levels.items()}

    def run(self, env: Mapping[str, object], dialect: str = "python", copy_inputs: bool = True,
            g: Graph | None = None, numbers: bool = False) -> dict:
        """Every value of level `g` (default: the top graph) by name. `copy_inputs`: written
        inputs are copied first, so `env`'s tensors are never modified (False: they are
        written, as a module mutating its arguments does). `numbers`: the `number` scalars
        form (`ir.core.interpreter.Interpreter`)."""
        g = self.graph if g is None else g
        return _PlanInterpreter(self, dialect, copy_inputs, g, numbers).run(g, env)

    def fixed_inputs(self) -> frozenset[str]:
        """The top level's inputs and params that a fix applies to as they enter (copied or
        made contiguous): they must be tensors."""
        return frozenset(self.levels[id(self.graph)].fix_inputs)


def _fixes(lv: Level, copy_inputs: bool) -> Fixes:
    """A level's fixes (`Level.fix_inputs`, `Level.fix_results`) as the interpreter applies
    them: builtin callables (`ir.core.interpreter.Fixes`). A written input not copied stays, as
    None: the interpreter still looks it up first, and Dynamo numbers a graph's inputs in the
    order it first sees them."""
    import torch

    clone = partial(torch.Tensor.clone, memory_format=torch.contiguous_format)
    how: dict[str, Callable[[Tensor], Tensor]] = {"clone": clone, "contiguous": torch.Tensor.contiguous}
    inputs = {name: None if h == "clone" and not copy_inputs else how[h]
              for name, h in lv.fix_inputs.items()}
    return Fixes(inputs=inputs, results={name: how[h] for name, h in lv.fix_results.items()})


class _PlanInterpreter(Interpreter):
    """One run of a `TorchPlan` (`ir.core.interpreter`): each level's fixes. Bodies copy the inputs
    they write whatever `copy_inputs` says (it is about the caller's tensors, the top level's)."""

    def __init__(self, plan: TorchPlan, dialect: str, copy_inputs: bool, top: Graph,
                 numbers: bool = False):
        super().__init__(dialect, numbers)
        self.plan = plan
        self.copy_inputs = copy_inputs
        self.top = top

    def fixes(self, g: Graph) -> Fixes:
        copying, in_place = self.plan.fixes[id(g)]
        return copying if self.copy_inputs or g is not self.top else in_place


def torch_plan(g: Graph) -> TorchPlan:
    return _cached("torch", g, lambda: TorchPlan(g))
