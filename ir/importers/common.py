"""What both importers share: the result, the unmapped-ops error, the rules' registry, and the
graph under construction (`Level`) that turns the ops' answers (`ir.core.importing.Imported`)
into checked GraphIR instructions.

An importer walks the source graph in order. Plumbing it handles itself (getitem, identities
such as clones, constants and weights, control flow); every other node goes to the rules of
the ops that declared its kind (`rules_for`), highest `import_priority` first. The first answer
whose instructions pass the ops' type rules and give the node's result types is taken; a node
no rule takes is unmapped. Constants (torch constants and weights, ONNX initializers and
Constant nodes) stay values until an instruction reads one as an operand: then it becomes a
param of the graph (its value in `ImportResult.params`), named after its source.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ir.ops  # noqa: F401  (registers the op library and its import rules)
from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.importing import Imported, NotImportable, Prev, Ref, SourceNode
from ir.core.op import OP_REGISTRY, Op, TypeRuleError
from ir.core.types import TensorType


@dataclass(frozen=True)
class ImportResult:
    """A model as GraphIR. `graph`: the whole model as one graph (None when some ops were
    unmapped and `keep_windows` was asked); `params`: the values of the params (weights and
    constants) by param name, the windows' included; `unmapped`: source op -> instances not
    mapped; `mapped`: source op instances mapped (plumbing such as getitem not counted);
    `windows` (`keep_windows`): the connected sub-graphs of supported ops, largest first, each
    with 2 or more instructions; `source`: the model's name, for lineage."""

    graph: Graph | None
    params: dict[str, np.ndarray]
    unmapped: Counter[str]
    mapped: int
    windows: tuple[Graph, ...]
    source: str

    @property
    def mapped_share(self) -> float:
        total = self.mapped + sum(self.unmapped.values())
        return self.mapped / total if total else 1.0


class UnsupportedOps(ValueError):
    """Some source ops have no GraphIR mapping; the message is one line:
    `unsupported: aten.roll (3), aten.einsum (1)` (most instances first)."""

    def __init__(self, unmapped: Counter[str]):
        self.unmapped = Counter(unmapped)
        super().__init__(unsupported_message(unmapped))


def unsupported_message(unmapped: Counter[str]) -> str:
    items = sorted(unmapped.items(), key=lambda kv: (-kv[1], kv[0]))
    return "unsupported: " + ", ".join(f"{name} ({n})" for name, n in items)


# ---- the rules' registry -----------------------------------------------------------------------

_RULES: dict[str, dict[str, list[type[Op]]]] = {}


def rules_for(kind: str, target: str) -> list[type[Op]]:
    """The ops whose import rule may take a source node of this kind (`aten`: an ATen overload,
    `onnx`: an ONNX op type), highest `import_priority` first, then by name."""
    if not _RULES:
        for k in ("aten", "onnx"):
            table: dict[str, list[type[Op]]] = {}
            for cls in OP_REGISTRY.values():
                for t in cls.aten_imports if k == "aten" else cls.onnx_imports:
                    table.setdefault(t, []).append(cls)
            for v in table.values():
                v.sort(key=lambda c: (-c.import_priority, c.name))
            _RULES[k] = table
    return _RULES[kind].get(target, [])


def supported(kind: str) -> list[str]:
    """Every source kind some op imports (documentation, tests)."""
    rules_for(kind, "")
    return sorted(_RULES[kind])


# ---- names -------------------------------------------------------------------------------------

_BAD = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name: str) -> str:
    s = _BAD.sub("_", name).strip("_") or "w"
    return s if s[0].isalpha() else "w" + s


class Session:
    """State shared by every level of one import: fresh names, params and their values, the
    counts of mapped and unmapped source nodes, and the keep-windows mode."""

    def __init__(self, keep_windows: bool):
        self.keep_windows = keep_windows
        self.taken: set[str] = set()
        self.counter = 0
        self.params: list[Value] = []
        self.values: dict[str, np.ndarray] = {}
        self.mapped = 0
        self.unmapped: Counter[str] = Counter()
        #: inputs standing for the results of unmapped nodes
        self.opaque_inputs: set[str] = set()
        #: values of source nodes a pattern took: dropped once nothing reads them
        self.absorbed: set[str] = set()
        #: param name -> its sort key: the source's weights in their order, then the rest
        self.param_order: dict[str, tuple[int, int]] = {}

    def fresh(self, prefix: str) -> str:
        while True:
            self.counter += 1
            name = f"{prefix}{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def named(self, hint: str) -> str:
        base = sanitize(hint)
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def dtype_of_numpy(a: np.ndarray) -> DType | None:
    try:
        return DType.from_numpy(a.dtype)
    except ValueError:
        return None


@dataclass
class Const:
    value: np.ndarray
    hint: str
    #: a computed constant (not a weight): a node reading only such constants is folded
    foldable: bool = False
    #: its place among the source's weights (the params' order); None: made by the import
    order: int | None = None
    #: the param made of it, once an instruction reads it
    param: str | None = None


@dataclass
class Level:
    """One graph under construction: the model, or a control-flow body (closed: what it reads
    from an enclosing level becomes an input, `capture`; a constant cannot become a param
    inside it)."""

    session: Session
    name: str
    top: bool
    inputs: list[Value] = field(default_factory=list)
    insts: list[Inst] = field(default_factory=list)
    #: source value key -> GraphIR value name
    names: dict[str, str] = field(default_factory=dict)
    types: dict[str, TensorType] = field(default_factory=dict)
    consts: dict[str, Const] = field(default_factory=dict)
    #: keys of values an unmapped node made (fresh inputs stand for them, so that what reads
    #: them still maps)
    opaque: set[str] = field(default_factory=set)
    #: source nodes mapped at this level; unmapped ones (node id -> source op name)
    mapped: int = 0
    unmapped_nodes: dict[int, str] = field(default_factory=dict)
    #: a body's enclosing level, whose values the body captures when it reads them (ONNX
    #: bodies read outer values by name; GraphIR bodies are closed: each becomes an input)
    outer: Level | None = None
    #: the outer keys captured, in order (the body's inputs for them follow its own)
    captured: list[str] = field(default_factory=list)
    #: source value key -> every value its node's instructions made (what absorbing drops)
    emitted: dict[str, list[str]] = field(default_factory=dict)
    #: results waiting for a frontend's fix-up (torch: a reverse scan's ys, flipped back)
    flipped_pending: dict[str, tuple[str, TensorType]] = field(default_factory=dict)

    def mark_unmapped(self, node_id: int, op: str, keys: Sequence[str],
                      types: Sequence[TensorType | None]) -> None:
        """A node no rule takes: counted, and its results become fresh inputs (opaque)."""
        self.unmapped_nodes[node_id] = op
        for k, t in zip(keys, types, strict=False):
            if t is not None and self.top:
                self.session.opaque_inputs.add(self.add_input(k, t, prefix="u"))
            self.opaque.add(k)

    def absorb(self, nodes: Iterable[tuple[int, Sequence[str]]]) -> None:
        """Nodes a pattern rule took (node id, result keys): mapped, whatever they were
        alone; what they were imported as goes once nothing else reads it."""
        for i, keys in nodes:
            if self.unmapped_nodes.pop(i, None) is not None:
                self.mapped += 1
            for k in keys:
                self.session.absorbed.update(self.emitted.get(k, ()))

    # ---- values ---------------------------------------------------------------------------------
    def add_input(self, key: str, t: TensorType, prefix: str = "x") -> str:
        name = self.session.fresh(prefix)
        self.inputs.append(Value(name, t))
        self.bind(key, name, t)
        return name

    def bind(self, key: str, name: str, t: TensorType) -> None:
        self.names[key] = name
        self.types[name] = t

    def alias(self, key: str, of: str) -> None:
        """`key` is the same value as `of` (identities: clone, Identity, getitem)."""
        if of in self.names:
            self.names[key] = self.names[of]
        if of in self.consts:
            self.consts[key] = self.consts[of]
        if of in self.opaque:
            self.opaque.add(key)

    def add_const(self, key: str, value: np.ndarray, hint: str, foldable: bool = False,
                  order: int | None = None) -> None:
        self.consts[key] = Const(np.asarray(value), hint, foldable, order=order)

    def const(self, key: str) -> np.ndarray | None:
        c = self.consts.get(key)
        if c is None and key not in self.names and self.outer is not None:
            return self.outer.const(key)
        return None if c is None else c.value

    def has(self, key: str) -> bool:
        return (key in self.names or key in self.consts
                or (self.outer is not None and self.outer.has(key)))

    def capture(self, key: str) -> str:
        """A value of an enclosing level, as a new input of this body."""
        assert self.outer is not None
        t = self.outer.type_of(key)
        if t is None or not self.outer.has(key):
            raise NotImportable(f"no value {key}")
        self.captured.append(key)
        return self.add_input(key, t, prefix="b")

    def value(self, key: str) -> str:
        """The GraphIR value of a source value; a constant becomes a param (top level only);
        a body captures a value of an enclosing level."""
        if key in self.names:
            return self.names[key]
        if key not in self.consts and self.outer is not None:
            return self.capture(key)
        c = self.consts.get(key)
        if c is None:
            raise NotImportable(f"no value {key}")
        if c.param is None:
            dtype = dtype_of_numpy(c.value)
            if dtype is None or not self.top or 0 in c.value.shape:
                raise NotImportable(f"constant {c.hint} cannot be a param here")
            name = self.session.named(c.hint)
            t = TensorType(tuple(int(d) for d in c.value.shape), dtype)
            self.session.params.append(Value(name, t))
            self.session.values[name] = np.array(c.value, order="C")
            self.session.param_order[name] = (0, c.order) if c.order is not None else (
                1, len(self.session.param_order))
            self.types[name] = t
            c.param = name
        return c.param

    def new_const(self, value: np.ndarray, hint: str = "c") -> Ref:
        key = f"#const{self.session.fresh('k')}"
        self.add_const(key, value, hint, foldable=True)
        return Ref(key)

    def type_of(self, key: str) -> TensorType | None:
        if key in self.names:
            return self.types[self.names[key]]
        c = self.consts.get(key)
        if c is not None:
            dtype = dtype_of_numpy(c.value)
            return None if dtype is None else TensorType(tuple(int(d) for d in c.value.shape), dtype)
        if self.outer is not None:
            return self.outer.type_of(key)
        return None

    # ---- instructions ---------------------------------------------------------------------------
    def emit(self, imported: Imported, out_types: Sequence[TensorType | None],
             out_keys: Sequence[str]) -> bool:
        """Append the instructions of a rule's answer, typed by each op's type rule; bind the
        node's results. False (nothing appended) when they do not type-check or do not give
        the node's result types."""
        made: list[Inst] = []
        results: list[list[Value]] = []
        if imported.alias is not None:
            try:
                name = self.value(imported.alias.key)
            except NotImportable:
                return False
            if out_types and out_types[0] is not None and out_types[0] != self.types[name]:
                return False
            self.bind(out_keys[0], name, self.types[name])
            return True
        try:
            for step in imported.steps:
                args: list[str] = []
                for o in step.operands:
                    if isinstance(o, Prev):
                        args.append(results[o.step][o.result].name)
                    else:
                        args.append(self.value(o.key))
                types = [self.types[a] for a in args]
                if not step.op.is_concrete or len(args) not in step.op.arities():
                    return False
                outs = step.op.type_rule(types)
                vals = [Value(self.session.fresh("v"), t) for t in outs]
                for v in vals:
                    self.types[v.name] = v.type
                made.append(Inst(step.op, tuple(args), tuple(vals)))
                results.append(vals)
        except (TypeRuleError, NotImportable, ValueError, IndexError):
            return False
        if imported.outputs is not None:
            idx = tuple(range(len(imported.outputs)))
            last = [results[p.step][p.result] for p in imported.outputs]
        else:
            idx = imported.results if imported.results is not None else tuple(range(len(results[-1])))
            last = results[-1]
        if len(idx) != len(last):
            return False
        for j, v in zip(idx, last, strict=True):
            want = out_types[j] if j < len(out_types) else None
            if want is not None and want != v.type:
                return False
        self.insts.extend(made)
        for j, v in zip(idx, last, strict=True):
            self.bind(out_keys[j], v.name, v.type)
        every = [r.name for inst in made for r in inst.results]
        for k in out_keys:
            self.emitted[k] = every
        return True

    def add_inst(self, inst: Inst) -> None:
        self.insts.append(inst)
        for r in inst.results:
            self.types[r.name] = r.type

    def graph(self, outputs: Sequence[str], params: Sequence[Value] = ()) -> Graph:
        return Graph(self.name, tuple(self.inputs), tuple(self.insts), tuple(outputs),
                     tuple(params))


def try_rules(level: Level, kind: str, node: SourceNode, out_types: Sequence[TensorType | None],
              out_keys: Sequence[str]) -> Imported | None:
    """The first answer of the rules for this node that `level` accepts (emitted), or None."""
    for cls in rules_for(kind, node.target):
        try:
            imported = cls.from_aten(node) if kind == "aten" else cls.from_onnx(node)
        except (NotImportable, TypeError, ValueError, IndexError, KeyError):
            continue  # a form the rule does not take (arguments of other types or counts)
        if imported is not None and level.emit(imported, out_types, out_keys):
            return imported
    return None


def dead_code(g: Graph, absorbed: set[str]) -> Graph:
    """`g` without what pattern rules read through (`absorbed` values) once nothing else reads
    it (bodies too). Other unread instructions stay: the source had them."""
    insts = []
    for inst in g.insts:
        if inst.blocks:
            inst = Inst(inst.op, inst.args, inst.results,
                        tuple(dead_code(b, absorbed) for b in inst.blocks))
        insts.append(inst)
    live = set(g.outputs)
    kept: list[Inst] = []
    for inst in reversed(insts):
        if (any(r.name in live for r in inst.results)
                or not any(r.name in absorbed for r in inst.results)):
            kept.append(inst)
            live.update(inst.args)
    kept.reverse()
    return Graph(g.name, g.inputs, tuple(kept), g.outputs, g.params)


def finish(session: Session, graph: Graph, source: str) -> ImportResult:
    """The result of an import: dead code removed, params in the source's order of its
    weights (then the constants the import made), unused ones dropped; the error, or the
    windows, when some nodes were unmapped."""
    graph = dead_code(graph, session.absorbed)
    used = {a for inst, _ in graph.walk() for a in inst.args} | set(graph.outputs)
    params = sorted((p for p in session.params if p.name in used),
                    key=lambda p: session.param_order[p.name])
    inputs = tuple(v for v in graph.inputs
                   if v.name not in session.opaque_inputs or v.name in used)
    graph = Graph(graph.name, inputs, graph.insts, graph.outputs, tuple(params))
    values = {p.name: session.values[p.name] for p in params}
    if not session.unmapped:
        return ImportResult(graph, values, Counter(), session.mapped, (), source)
    if not session.keep_windows:
        raise UnsupportedOps(session.unmapped)
    return ImportResult(None, values, Counter(session.unmapped), session.mapped,
                        windows_of(graph), source)


def windows_of(graph: Graph, min_insts: int = 2) -> tuple[Graph, ...]:
    """The connected components of `graph`'s top-level instructions (joined by the values one
    makes and another reads), largest first, as graphs (`ir.importers.windows.subgraph`)."""
    from ir.importers.windows import subgraph

    maker = {r.name: i for i, inst in enumerate(graph.insts) for r in inst.results}
    parent = list(range(len(graph.insts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, inst in enumerate(graph.insts):
        for a in inst.args:
            if a in maker:
                parent[find(i)] = find(maker[a])
    groups: dict[int, list[int]] = {}
    for i in range(len(graph.insts)):
        groups.setdefault(find(i), []).append(i)
    comps = sorted((g for g in groups.values() if len(g) >= min_insts),
                   key=lambda g: (-len(g), g[0]))
    return tuple(subgraph(graph, g, name=f"{graph.name}_w{k}") for k, g in enumerate(comps))


def dtype_from_torch(dt: Any) -> DType | None:
    for d in DType:
        if d.torch == dt:
            return d
    return None

