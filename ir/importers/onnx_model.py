"""ONNX -> GraphIR: a `ModelProto` mapped node by node.

`import_onnx(model, name)` runs ONNX shape inference (every value needs a static type) and
imports the main graph. What the importer does itself (plumbing):
  - graph inputs that are not initializers become graph inputs; initializers and Constant
    nodes are constants until an instruction reads one as an operand, then params (their
    values in `ImportResult.params`) named after them; Cast and CastLike of a constant, and
    Identity, give constants and aliases;
  - control flow: `If` -> `if` (the values its branches read from outside, in order of first
    use, become the operands: GraphIR bodies are closed); `Loop` with a trip count and a
    condition passed through unchanged (no scan outputs) -> `loop`; `Scan` (axes 0, all
    directions forward or all reversed) -> `scan`. A value a Loop or Scan body reads from
    outside is carried through unchanged.
Every other node goes to the ops' rules (`Op.onnx_imports`, `Op.from_onnx`).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.importing import NotImportable, Ref, SourceNode
from ir.core.op import TypeRuleError, lookup_op
from ir.core.types import TensorType
from ir.importers.common import ImportResult, Level, Session, finish, try_rules

_ONNX_DTYPES = {d.onnx: d for d in DType}


def import_onnx(model: onnx.ModelProto, name: str, keep_windows: bool = False) -> ImportResult:
    """`model` as GraphIR (static shapes: every value's type from shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    session = Session(keep_windows)
    g = inferred.graph
    types = _value_types(g)
    level = Level(session, "main", top=True)
    inits = {t.name for t in g.initializer}
    for k, t in enumerate(g.initializer):
        level.add_const(t.name, numpy_helper.to_array(t), t.name, order=k)
    for v in g.input:
        if v.name in inits:
            continue
        t = types.get(v.name)
        if t is None:
            raise ValueError(f"{name}: input {v.name} has no static GraphIR type")
        level.add_input(v.name, t)
    _Onnx(types).run(level, g, [o.name for o in g.output])
    session.mapped += level.mapped
    session.unmapped.update(level.unmapped_nodes.values())
    outputs = [level.value(o.name) for o in g.output]
    return finish(session, level.graph(outputs), name)


def _tensor_type(tp: onnx.TypeProto) -> TensorType | None:
    if not tp.HasField("tensor_type"):
        return None
    tt = tp.tensor_type
    dtype = _ONNX_DTYPES.get(tt.elem_type)
    if dtype is None or not tt.HasField("shape"):
        return None
    dims = []
    for d in tt.shape.dim:
        if not d.HasField("dim_value") or d.dim_value < 1:
            return None
        dims.append(int(d.dim_value))
    return TensorType(tuple(dims), dtype)


def _value_types(g: onnx.GraphProto, into: dict[str, TensorType | None] | None = None
                 ) -> dict[str, TensorType | None]:
    """Every typed value of `g` and its sub-graphs (names are unique model-wide)."""
    out = {} if into is None else into
    for v in (*g.input, *g.output, *g.value_info):
        out[v.name] = _tensor_type(v.type)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _value_types(a.g, out)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _value_types(sub, out)
    return out


def _attr(a: onnx.AttributeProto) -> Any:
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode() for x in v]
    return v


class OnnxNode(SourceNode):
    """An ONNX node as the rules see it (`ir.core.importing`)."""

    def __init__(self, node: onnx.NodeProto, level: Level, readers: Counter[str],
                 producers: dict[str, onnx.NodeProto], types: dict[str, TensorType | None]):
        self.node = node
        self.level = level
        self.readers = readers
        self.producers = producers
        self.types = types
        self.target = node.op_type
        self.inputs = list(node.input)
        self.attrs = {a.name: a for a in node.attribute}

    @property
    def n_given(self) -> int:
        n = len(self.inputs)
        while n and not self.inputs[n - 1]:
            n -= 1
        return n

    @property
    def attrs_given(self) -> frozenset[str]:
        return frozenset(self.attrs)

    @property
    def out_types(self) -> tuple[TensorType | None, ...]:
        return tuple(self.types.get(o) if o else None for o in self.node.output)

    def _name(self, i: int | str) -> str:
        if not isinstance(i, int) or i >= len(self.inputs) or not self.inputs[i]:
            raise NotImportable(f"no input {i}")
        return self.inputs[i]

    def is_tensor(self, i: int | str) -> bool:
        return isinstance(i, int) and i < len(self.inputs) and bool(self.inputs[i])

    def tensor(self, i: int | str, like: int | str | None = None) -> Ref:
        name = self._name(i)
        if not self.level.has(name):
            raise NotImportable(f"no value {name}")
        return Ref(name)

    def tensors(self, i: int | str) -> list[Ref]:
        assert isinstance(i, int)
        return [self.tensor(k) for k in range(i, self.n_given)]

    def type(self, i: int | str) -> TensorType:
        t = self.level.type_of(self._name(i))
        if t is None:
            raise NotImportable("no type")
        return t

    def arg(self, i: int | str, default: Any = None) -> Any:
        if not self.is_tensor(i):
            return default
        c = self.level.const(self._name(i))
        if c is None:
            return default
        return c.tolist()

    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attrs.get(name)
        return default if a is None else _attr(a)

    def const(self, i: int | str) -> np.ndarray | None:
        return self.level.const(self._name(i)) if self.is_tensor(i) else None

    def constant(self, value: np.ndarray) -> Ref:
        return self.level.new_const(value, "c")

    def producer(self, i: int | str) -> OnnxNode | None:
        if not self.is_tensor(i):
            return None
        return self.producer_of(Ref(self._name(i)))

    def const_of(self, ref: Ref) -> np.ndarray | None:
        return self.level.const(ref.key)

    def producer_of(self, ref: Ref) -> OnnxNode | None:
        p = self.producers.get(ref.key)
        if p is None or self.readers[ref.key] != 1:
            return None
        return OnnxNode(p, self.level, self.readers, self.producers, self.types)


def _free(g: onnx.GraphProto) -> list[str]:
    """The names `g` (and its sub-graphs) read but does not define, in order of first use."""
    defined = {v.name for v in g.input} | {t.name for t in g.initializer}
    out: list[str] = []
    for n in g.node:
        reads = list(n.input)
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for sub in subs:
                reads += _free(sub)
        for r in reads:
            if r and r not in defined and r not in out:
                out.append(r)
        defined.update(n.output)
    for o in g.output:
        if o.name not in defined and o.name not in out:
            out.append(o.name)
    return out


class _Onnx:
    def __init__(self, types: dict[str, TensorType | None]):
        self.types = types

    def run(self, level: Level, g: onnx.GraphProto, wanted: Sequence[str],
            dead: Sequence[str] = ()) -> None:
        """Import the nodes of `g` into `level`, but those reading a `dead` value (a Loop
        body's condition, which GraphIR's loop has not)."""
        dead_set = set(dead)
        nodes: list[onnx.NodeProto] = []
        for n in g.node:
            if dead_set & set(n.input):
                dead_set.update(n.output)
            else:
                nodes.append(n)
        readers: Counter[str] = Counter()
        producers: dict[str, onnx.NodeProto] = {}
        for n in nodes:
            readers.update(i for i in n.input if i)
            for a in n.attribute:
                subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                for sub in subs:
                    readers.update(_free(sub))
            for o in n.output:
                producers[o] = n
        readers.update(wanted)
        for n in nodes:
            self.node(level, n, readers, producers)

    def node(self, level: Level, n: onnx.NodeProto, readers: Counter[str],
             producers: dict[str, onnx.NodeProto]) -> None:
        outs = list(n.output)
        types = [self.types.get(o) for o in outs]
        if n.domain not in ("", "ai.onnx"):
            level.mark_unmapped(id(n), f"{n.domain}.{n.op_type}", outs, types)
            return
        if self.plumbing(level, n):
            level.mapped += n.op_type != "Constant"  # a constant is data, not an op instance
            return
        if n.op_type in ("If", "Loop", "Scan"):
            rule = {"If": self.if_, "Loop": self.loop, "Scan": self.scan}[n.op_type]
            if rule(level, n, types):
                level.mapped += 1
            else:
                level.mark_unmapped(id(n), n.op_type, outs, types)
            return
        node = OnnxNode(n, level, readers, producers, self.types)
        imported = try_rules(level, "onnx", node, types, outs)
        if imported is None:
            level.mark_unmapped(id(n), n.op_type, outs, types)
            return
        level.mapped += 1
        level.absorb((id(a.node), list(a.node.output)) for a in imported.absorbed
                     if isinstance(a, OnnxNode))

    # ---- plumbing ------------------------------------------------------------------------------
    def plumbing(self, level: Level, n: onnx.NodeProto) -> bool:
        """Constants, casts of constants, identities."""
        if n.op_type == "Constant":
            a = n.attribute[0]
            value = _attr(a)
            if a.name in ("value_float", "value_int"):
                value = np.asarray(value, dtype=np.float32 if a.name == "value_float" else np.int64)
            elif a.name in ("value_floats", "value_ints"):
                value = np.asarray(value, dtype=np.float32 if a.name == "value_floats" else np.int64)
            elif not isinstance(value, np.ndarray):
                return False
            level.add_const(n.output[0], value, n.output[0], foldable=True)
            return True
        if n.op_type == "Identity":
            src = n.input[0]
            if level.outer is not None and src not in level.names and src not in level.consts:
                try:  # a body reads an outer value: capture it now, in the order read
                    level.value(src)
                except NotImportable:
                    return False
            if not level.has(src):
                return False
            level.alias(n.output[0], src)
            return True
        if n.op_type in ("Cast", "CastLike"):
            # CastLike: a constant made for its operand's dtype; Cast: only of a computed
            # constant (a cast weight stays a cast instruction)
            c = level.const(n.input[0])
            folds = n.op_type == "CastLike" or (n.input[0] in level.consts
                                                and level.consts[n.input[0]].foldable)
            if c is None or not folds:
                return False
            if n.op_type == "Cast":
                dtype = _ONNX_DTYPES.get(helper.get_attribute_value(n.attribute[0]))
            else:
                t = level.type_of(n.input[1])
                dtype = None if t is None else t.dtype
            if dtype is None:
                return False
            level.add_const(n.output[0], c.astype(dtype.numpy), n.output[0], foldable=True)
            return True
        return False

    def body(self, level: Level, g: onnx.GraphProto, input_types: Sequence[TensorType | None],
             wanted: Sequence[str], name: str, dead: Sequence[str] = ()
             ) -> tuple[Level, list[str]] | None:
        """Import an ONNX sub-graph as a closed body: its own inputs typed `input_types` (None:
        not given to the body), then what it captures from outside."""
        sub = Level(level.session, name, top=False, outer=level)
        for v, t in zip(g.input, input_types, strict=True):
            if t is not None:
                sub.add_input(v.name, t, prefix="b")
        for t in g.initializer:
            sub.add_const(t.name, numpy_helper.to_array(t), t.name)
        try:
            self.run(sub, g, wanted, dead)
            outs = [sub.value(o) for o in wanted]
        except NotImportable:
            sub.unmapped_nodes[-1] = "body"
            outs = []
        if sub.unmapped_nodes:
            level.unmapped_nodes.update({k: v for k, v in sub.unmapped_nodes.items() if k != -1})
            return None
        level.mapped += sub.mapped
        return sub, outs

    def _graph(self, sub: Level, outs: Sequence[str], inputs: Sequence[Value] | None = None
               ) -> Graph:
        return Graph(sub.name, tuple(sub.inputs if inputs is None else inputs), tuple(sub.insts),
                     tuple(outs))

    def _make(self, level: Level, name: str, attrs: dict[str, Any], args: list[str],
              blocks: list[Graph], n: onnx.NodeProto, types: Sequence[TensorType | None],
              pairs: Sequence[tuple[int, int]]) -> bool:
        """Append the control-flow instruction; node result j is its result r for (j, r)."""
        op = lookup_op(name).from_attrs(attrs)
        try:
            res = op.type_rule([level.types[a] for a in args], blocks)
        except (TypeRuleError, KeyError):
            return False
        results = tuple(Value(level.session.fresh("v"), t) for t in res)
        if any(r >= len(results) or (types[j] is not None and types[j] != results[r].type)
               for j, r in pairs):
            return False
        level.add_inst(Inst(op, tuple(args), results, tuple(blocks)))
        for j, r in pairs:
            level.bind(n.output[j], results[r].name, results[r].type)
        return True

    def _operands(self, level: Level, keys: Sequence[str]) -> list[str] | None:
        try:
            return [level.value(k) for k in keys]
        except NotImportable:
            return None

    def if_(self, level: Level, n: onnx.NodeProto, types: list) -> bool:
        attrs = {a.name: a.g for a in n.attribute}
        outs = list(n.output)
        subs, outputs = [], []
        for which in ("then_branch", "else_branch"):
            g = attrs[which]
            made = self.body(level, g, [], [o.name for o in g.output], which.split("_")[0])
            if made is None:
                return False
            subs.append(made[0])
            outputs.append(made[1])
        keys = list(subs[0].captured) + [k for k in subs[1].captured if k not in subs[0].captured]
        args = self._operands(level, [n.input[0], *keys])
        if args is None:
            return False
        blocks = []
        for sub, body_outs in zip(subs, outputs, strict=True):
            for k in keys:  # a value only the other branch reads: an input this one ignores
                if k not in sub.captured:
                    sub.capture(k)
            by_key = dict(zip(sub.captured, sub.inputs, strict=True))
            blocks.append(self._graph(sub, body_outs, [by_key[k] for k in keys]))
        return self._make(level, "if", {}, args, blocks, n, types,
                          [(j, j) for j in range(len(outs))])

    def loop(self, level: Level, n: onnx.NodeProto, types: list) -> bool:
        body_g = next(a.g for a in n.attribute if a.name == "body")
        ins = list(n.input) + [""] * (2 - len(n.input))
        trip, cond, carried = ins[0], ins[1], ins[2:]
        if not trip or len(body_g.output) != 1 + len(carried):
            return False  # a while loop, or scan outputs
        if cond:
            c = level.const(cond)
            if c is None or not bool(c):
                return False
        # the body's condition must be its input, passed through
        cond_in, cond_out = body_g.input[1].name, body_g.output[0].name
        passthrough = cond_out == cond_in or any(
            x.op_type == "Identity" and x.output[0] == cond_out and x.input[0] == cond_in
            for x in body_g.node)
        if not passthrough:
            return False
        args = self._operands(level, [trip, *carried])
        if args is None:
            return False
        in_types = [TensorType((), DType.int64), None, *(level.types[a] for a in args[1:])]
        made = self.body(level, body_g, in_types, [o.name for o in body_g.output[1:]], "body",
                         dead=[cond_in])
        if made is None:
            return False
        sub, outs = made
        extra = self._operands(level, sub.captured)
        if extra is None:
            return False
        # values read from outside: carried through unchanged
        outs = [*outs, *(v.name for v in sub.inputs[1 + len(carried):])]
        return self._make(level, "loop", {}, args + extra, [self._graph(sub, outs)], n, types,
                          [(j, j) for j in range(len(n.output))])

    def scan(self, level: Level, n: onnx.NodeProto, types: list) -> bool:
        a = {x.name: _attr(x) for x in n.attribute}
        body_g = a["body"]
        n_xs = int(a["num_scan_inputs"])
        ins = list(n.input)
        nc = len(ins) - n_xs
        n_ys = len(n.output) - nc
        in_dirs = list(a.get("scan_input_directions", [0] * n_xs))
        out_dirs = list(a.get("scan_output_directions", [0] * n_ys))
        dirs = set(in_dirs) | set(out_dirs)
        if (nc < 1 or len(dirs) > 1 or any(a.get("scan_input_axes", [0] * n_xs))
                or any(a.get("scan_output_axes", [0] * n_ys))):
            return False
        reverse = dirs == {1}
        args = self._operands(level, ins)
        if args is None:
            return False
        in_types = [level.types[x] for x in args[:nc]]
        in_types += [TensorType(level.types[x].shape[1:], level.types[x].dtype) for x in args[nc:]]
        made = self.body(level, body_g, in_types, [o.name for o in body_g.output], "body")
        if made is None:
            return False
        sub, outs = made
        extra = self._operands(level, sub.captured)
        if extra is None:
            return False
        k = len(extra)
        own, cap = list(sub.inputs[:len(ins)]), list(sub.inputs[len(ins):])
        # values read from outside: carried through unchanged, after the carries
        graph = self._graph(sub, [*outs[:nc], *(v.name for v in cap), *outs[nc:]],
                            [*own[:nc], *cap, *own[nc:]])
        pairs = [(j, j if j < nc else j + k) for j in range(nc + n_ys)]
        return self._make(level, "scan", {"num_carries": nc + k, "reverse": reverse},
                          [*args[:nc], *extra, *args[nc:]], [graph], n, types, pairs)
