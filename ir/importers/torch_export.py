"""torch -> GraphIR: `torch.export` of a module on example inputs, its ATen graph mapped op by op.

`import_torch(module, example_inputs, name)` exports the module as it is (pass an eval-mode
module for inference: dropout and batch norm's training forms do not map) and imports the
exported program's graph (the training IR: `aten.conv2d`, `aten.linear`, `aten.layer_norm`, ...,
without `run_decompositions`, whose finer ops map worse). Shapes are the examples' (static).

What the importer does itself (plumbing):
  - user inputs become graph inputs; parameters, buffers and constant tensors are constants
    until an instruction reads one as an operand, then params (their values in
    `ImportResult.params`), named after their module path;
  - getitem, clones, aliases, `contiguous`, `detach`, eval-mode dropout, casts to the same
    dtype are identities; `_assert_tensor_metadata` and other checks are dropped;
  - a node whose tensor operands are all computed constants (`zeros`, `arange`, and what is
    computed from them, such as rotary tables) is evaluated: a constant;
  - control flow: `torch.cond` -> `if`; `torch.while_loop` in the counted form GraphIR's loop
    lowers to (a counter from 0 carried with the trip count, `i < n`, `i + 1`) -> `loop`;
    `scan` (dim 0; `reverse`: the flips torch adds around it) -> `scan`.
Every other node goes to the ops' rules (`Op.aten_imports`, `Op.from_aten`).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from ir.core.graph import Graph, Inst, Value
from ir.core.importing import NotImportable, Ref, SourceNode
from ir.core.op import lookup_op
from ir.core.types import TensorType
from ir.importers.common import (
    ImportResult,
    Level,
    Session,
    dtype_from_torch,
    finish,
    try_rules,
)

#: ATen nodes that return their (first) operand's value
IDENTITIES = frozenset({
    "aten.clone.default", "aten.alias.default", "aten.detach.default", "aten.detach_.default",
    "aten.contiguous.default", "aten.lift_fresh_copy.default", "aten.lift_fresh.default",
    "aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default",
    "aten.to.dtype", "aten._to_copy.default", "aten.to.dtype_layout", "aten.to.device",
    "aten.type_as.default",
})
#: checks that compute nothing
DROPPED = frozenset({
    "aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
    "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg",
    "aten.sym_constrain_range.default",
})
NONDETERMINISTIC = ("rand", "randn", "randint", "bernoulli", "normal", "uniform", "empty")
#: nodes whose result depends on their operand's shape and dtype only: constants
SHAPE_ONLY = frozenset({
    "aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
    "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default",
})


def import_torch(module: Any, example_inputs: tuple, name: str,
                 keep_windows: bool = False) -> ImportResult:
    """`module` on `example_inputs` as GraphIR, through `torch.export.export`."""
    import torch

    program = torch.export.export(module, tuple(example_inputs))
    return import_exported(program, name, keep_windows)


def import_exported(program: Any, name: str, keep_windows: bool = False) -> ImportResult:
    """An `ExportedProgram` as GraphIR (`import_torch`)."""
    from torch.export.graph_signature import InputKind

    session = Session(keep_windows)
    gm = program.graph_module
    level = Level(session, "main", top=True)
    specs = {s.arg.name: s for s in program.graph_signature.input_specs
             if hasattr(s.arg, "name")}
    n_weights = 0
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs.get(node.name)
        if spec is None or spec.kind == InputKind.USER_INPUT:
            t = _type(node.meta.get("val"))
            if t is None:
                raise ValueError(f"{name}: input {node.name} is not a GraphIR tensor")
            level.add_input(node.name, t)
            continue
        target = spec.target or node.name
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            value = (program.state_dict[target] if target in program.state_dict
                     else program.constants[target])
            # a GraphIR module's param `w1` is its buffer `p_w1`
            level.add_const(node.name, _numpy(value), target.removeprefix("p_"), order=n_weights)
            n_weights += 1
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            level.add_const(node.name, _numpy(program.constants[target]), target, foldable=True)
        else:
            raise ValueError(f"{name}: input {node.name} of kind {spec.kind} is not supported")
    importer = _Torch(gm)
    outputs = importer.run(level, gm)
    session.mapped += level.mapped
    session.unmapped.update(level.unmapped_nodes.values())
    names = [level.value(o) if level.has(o) else level.names.get(o, "") for o in outputs]
    if any(not n for n in names):
        raise ValueError(f"{name}: an output has no value")
    return finish(session, level.graph(names), name)


def _numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy().copy()


def _type(val: Any) -> TensorType | None:
    import torch

    if not isinstance(val, torch.Tensor):
        return None
    dtype = dtype_from_torch(val.dtype)
    if dtype is None:
        return None
    try:
        shape = tuple(int(d) for d in val.shape)
    except (TypeError, ValueError):
        return None
    if any(d < 1 for d in shape):
        return None
    return TensorType(shape, dtype)


def _out_types(node: Any) -> tuple[list[TensorType | None], bool]:
    """The result types of a node, and whether it returns a tuple (read by getitem)."""
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return [_type(v) for v in val], True
    return [_type(val)], False


def _target(node: Any) -> str:
    t = node.target
    if hasattr(t, "_schema") or hasattr(t, "overloadpacket"):
        return str(t)
    return getattr(t, "__name__", str(t))


def op_family(target: str) -> str:
    """`aten.roll.default` -> `aten.roll`: how unmapped ops are counted."""
    parts = target.split(".")
    return ".".join(parts[:2]) if parts[0] == "aten" and len(parts) >= 3 else target


class AtenNode(SourceNode):
    """An ATen node of the exported graph, as the rules see it (`ir.core.importing`)."""

    def __init__(self, node: Any, level: Level, readers: dict[str, int]):
        self.node = node
        self.level = level
        self.readers = readers
        self.target = _target(node)
        schema = getattr(node.target, "_schema", None)
        self.arg_names = [a.name for a in schema.arguments] if schema is not None else []
        self.defaults = ({a.name: a.default_value for a in schema.arguments if a.has_default_value()}
                         if schema is not None else {})
        self.values: dict[int | str, Any] = {}
        for i, a in enumerate(node.args):
            self.values[i] = a
            if i < len(self.arg_names):
                self.values[self.arg_names[i]] = a
        for k, v in node.kwargs.items():
            self.values[k] = v
            if k in self.arg_names:
                self.values[self.arg_names.index(k)] = v
        self._out, _ = _out_types(node)

    # ---- SourceNode ----
    @property
    def n_given(self) -> int:
        return len(self.node.args) + len(self.node.kwargs)

    @property
    def attrs_given(self) -> frozenset[str]:
        return frozenset(self.node.kwargs)

    @property
    def out_types(self) -> tuple[TensorType | None, ...]:
        return tuple(self._out)

    def _raw(self, i: int | str) -> Any:
        if i in self.values:
            return self.values[i]
        name = self.arg_names[i] if isinstance(i, int) and i < len(self.arg_names) else i
        if name in self.defaults:
            return self.defaults[name]
        raise NotImportable(f"no argument {i}")

    def is_tensor(self, i: int | str) -> bool:
        import torch.fx

        return i in self.values and isinstance(self.values[i], torch.fx.Node)

    def _key(self, v: Any) -> str:
        import torch.fx

        if not isinstance(v, torch.fx.Node) or not self.level.has(v.name):
            raise NotImportable("not a tensor value")
        return v.name

    def tensor(self, i: int | str, like: int | str | None = None) -> Ref:
        v = self._raw(i)
        if isinstance(v, (bool, int, float)):
            like_t = self.type(like) if like is not None else self._first_type()
            if isinstance(v, float) and not like_t.dtype.is_float:
                raise NotImportable("a float number with an integer tensor")
            return self.level.new_const(np.asarray(v, dtype=like_t.dtype.numpy), "c")
        return Ref(self._key(v))

    def _first_type(self) -> TensorType:
        import torch.fx

        for a in self.node.args:
            if isinstance(a, torch.fx.Node) and self.level.has(a.name):
                t = self.level.type_of(a.name)
                if t is not None:
                    return t
        raise NotImportable("no tensor operand")

    def tensors(self, i: int | str) -> list[Ref]:
        v = self._raw(i)
        if not isinstance(v, (list, tuple)):
            raise NotImportable("not a list of tensors")
        return [Ref(self._key(x)) for x in v]

    def type(self, i: int | str) -> TensorType:
        t = self.level.type_of(self._key(self._raw(i)))
        if t is None:
            raise NotImportable("no type")
        return t

    def arg(self, i: int | str, default: Any = None) -> Any:
        import torch.fx

        try:
            v = self._raw(i)
        except NotImportable:
            return default
        if isinstance(v, torch.fx.Node):
            raise NotImportable(f"argument {i} is a tensor")
        if isinstance(v, (list, tuple)) and any(isinstance(x, torch.fx.Node) for x in v):
            raise NotImportable(f"argument {i} holds tensors")
        if hasattr(v, "is_floating_point") and hasattr(v, "itemsize"):  # a torch.dtype
            d = dtype_from_torch(v)
            if d is None:
                raise NotImportable("a dtype GraphIR lacks")
            return d
        return v

    def attr(self, name: str, default: Any = None) -> Any:
        return self.arg(name, default) if name in self.node.kwargs else default

    def const(self, i: int | str) -> np.ndarray | None:
        try:
            return self.level.const(self._key(self._raw(i)))
        except NotImportable:
            return None

    def constant(self, value: np.ndarray) -> Ref:
        return self.level.new_const(value, "c")

    def producer(self, i: int | str) -> AtenNode | None:
        import torch.fx

        try:
            v = self._raw(i)
        except NotImportable:
            return None
        if not isinstance(v, torch.fx.Node):
            return None
        return self._producer_node(v)

    def _producer_node(self, v: Any) -> AtenNode | None:
        if v.op != "call_function" or self.readers.get(v.name, 0) != 1:
            return None
        return AtenNode(v, self.level, self.readers)

    def const_of(self, ref: Ref) -> np.ndarray | None:
        return self.level.const(ref.key)

    def producer_of(self, ref: Ref) -> AtenNode | None:
        for v in self.node.all_input_nodes:
            if v.name == ref.key:
                return self._producer_node(v)
        return None


class _Torch:
    """Imports one exported graph module's levels (the top graph and the HOPs' bodies)."""

    def __init__(self, root: Any):
        self.root = root

    def run(self, level: Level, gm: Any, wanted: Sequence[int] | None = None) -> list[str]:
        """Import `gm`'s nodes into `level` (placeholders already bound); the output keys
        (only `wanted` ones, and only the nodes they need, when given)."""
        import torch.fx

        nodes = list(gm.graph.nodes)
        out_node = nodes[-1]
        outs = list(out_node.args[0]) if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]
        live: set[str] | None = None
        if wanted is not None:
            outs = [outs[i] for i in wanted]
            live = set()
            stack = [o for o in outs if isinstance(o, torch.fx.Node)]
            while stack:
                n = stack.pop()
                if n.name in live:
                    continue
                live.add(n.name)
                stack.extend(n.all_input_nodes)
        readers: dict[str, int] = {n.name: len(n.users) for n in nodes}
        for node in nodes:
            if node.op in ("placeholder", "output"):
                continue
            if live is not None and node.name not in live:
                continue
            self.node(level, gm, node, readers)
        keys = []
        for o in outs:
            if not isinstance(o, torch.fx.Node):
                raise NotImportable("an output that is not a tensor")
            keys.append(o.name)
        return keys

    def node(self, level: Level, gm: Any, node: Any, readers: dict[str, int]) -> None:
        import torch

        if node.op == "get_attr":
            obj = getattr(gm, node.target, None)
            if isinstance(obj, torch.Tensor):
                level.add_const(node.name, _numpy(obj), str(node.target), foldable=True)
            return
        if node.op != "call_function":
            level.mark_unmapped(id(node), f"{node.op}", [node.name], [None])
            return
        target = _target(node)
        types, tupled = _out_types(node)
        keys = [f"{node.name}#{i}" for i in range(len(types))] if tupled else [node.name]
        if node.target is operator.getitem:
            src, i = node.args
            level.alias(node.name, f"{src.name}#{i}")
            if f"{src.name}#{i}" in level.flipped_pending:
                level.flipped_pending[node.name] = level.flipped_pending.pop(f"{src.name}#{i}")
            return
        if target in DROPPED:
            return
        if target in IDENTITIES and self.identity(level, node, types):
            level.mapped += 1
            return
        hop = getattr(node.target, "__name__", "")
        if hop in ("cond", "while_loop", "scan"):
            ok = getattr(self, hop)(level, gm, node, types, keys, readers)
            if ok:
                level.mapped += 1
            return
        if target == "aten.flip.default" and self.unflip(level, node):
            level.mapped += 1
            return
        if self.fold(level, node):
            level.mapped += 1
            return
        aten = AtenNode(node, level, readers)
        imported = try_rules(level, "aten", aten, types, keys)
        if imported is None:
            level.mark_unmapped(id(node), op_family(target), keys, types)
            return
        level.mapped += 1
        level.absorb((id(a.node), [a.node.name]) for a in imported.absorbed
                     if isinstance(a, AtenNode))

    # ---- plumbing ----------------------------------------------------------------------------------
    def identity(self, level: Level, node: Any, types: list[TensorType | None]) -> bool:
        import torch.fx

        src = node.args[0] if node.args else None
        if not isinstance(src, torch.fx.Node) or not level.has(src.name):
            return False
        if "dropout" in str(node.target) and len(node.args) > 2 and node.args[2]:
            return False  # training-mode dropout
        t = level.type_of(src.name)
        if types and types[0] is not None and t is not None and types[0] != t:
            return False  # a cast to another dtype: the rules'
        level.alias(node.name, src.name)
        return True

    def fold(self, level: Level, node: Any) -> bool:
        """Evaluate a node that reads only computed constants (or nothing: a creation op)."""
        import torch
        import torch.fx

        name = str(node.target)
        if name in SHAPE_ONLY:  # zeros_like(x) & co.: a constant of x's type
            return self.fold_like(level, node)
        if any(w in name for w in NONDETERMINISTIC) or not name.startswith("aten."):
            return False
        ins = node.all_input_nodes
        for v in ins:
            c = level.consts.get(v.name)
            if c is None or not c.foldable:
                return False
        if not ins and not node.args and not node.kwargs:
            return False

        def sub(a: Any) -> Any:
            if isinstance(a, torch.fx.Node):
                return torch.from_numpy(level.consts[a.name].value.copy())
            return a

        try:
            args = torch.fx.node.map_aggregate(node.args, sub)
            kwargs = torch.fx.node.map_aggregate(node.kwargs, sub)
            out = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001  (a node torch cannot run eagerly here: not folded)
            return False
        if isinstance(out, torch.Tensor):
            level.add_const(node.name, _numpy(out), "c", foldable=True)
            return True
        if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
            for i, o in enumerate(out):
                level.add_const(f"{node.name}#{i}", _numpy(o), "c", foldable=True)
            return True
        return False

    def fold_like(self, level: Level, node: Any) -> bool:
        """A node reading its tensor operand's shape and dtype only: run on zeros of them."""
        import torch
        import torch.fx

        src = node.args[0] if node.args else None
        t = level.type_of(src.name) if isinstance(src, torch.fx.Node) else None
        if t is None:
            return False
        try:
            out = node.target(torch.zeros(t.shape, dtype=t.dtype.torch), *node.args[1:],
                              **node.kwargs)
        except Exception:  # noqa: BLE001  (not runnable eagerly here: not folded)
            return False
        level.add_const(node.name, _numpy(out), "c", foldable=True)
        return True

    def unflip(self, level: Level, node: Any) -> bool:
        src, dims = node.args[0], node.args[1] if len(node.args) > 1 else None
        key = getattr(src, "name", None)
        if key in level.flipped_pending and list(dims or ()) == [0]:
            name, t = level.flipped_pending.pop(key)
            level.bind(node.name, name, t)
            return True
        return False

    def body(self, level: Level, gm: Any, types: Sequence[TensorType | None], prefix: str,
             wanted: Sequence[int] | None = None, skip: Sequence[int] = ()
             ) -> tuple[Graph, Level] | None:
        """A HOP's body: its placeholders typed `types` (None for a skipped one), imported into
        a closed level; None when it holds an unmapped node."""
        sub = Level(level.session, prefix, top=False)
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(phs) != len(types):
            return None
        for k, (ph, t) in enumerate(zip(phs, types, strict=True)):
            if k in skip:
                continue
            if t is None:
                return None
            sub.add_input(ph.name, t, prefix="b")
        try:
            keys = self.run(sub, gm, wanted)
            outs = [sub.value(k) for k in keys]
        except NotImportable:
            sub.unmapped_nodes[-1] = "body"
            outs = []
        if sub.unmapped_nodes:
            level.unmapped_nodes.update({k: v for k, v in sub.unmapped_nodes.items() if k != -1})
            return None
        level.mapped += sub.mapped
        return sub.graph(outs), sub

    def _sub(self, gm: Any, ref: Any) -> Any:
        return getattr(gm, ref.target)

    def _bind_results(self, level: Level, inst: Inst, keys: Sequence[str],
                      types: Sequence[TensorType | None], index: Sequence[int]) -> bool:
        """Append `inst`; its first results are the node's results `index` (keys, types)."""
        pairs = list(zip(index, inst.results, strict=False))
        if len(pairs) != len(index):
            return False
        for j, r in pairs:
            if j < len(types) and types[j] is not None and types[j] != r.type:
                return False
        level.add_inst(inst)
        for j, r in pairs:
            level.bind(keys[j], r.name, r.type)
        return True

    def _make(self, level: Level, name: str, attrs: dict[str, Any], args: list[str],
              blocks: list[Graph]) -> Inst | None:
        from ir.core.op import TypeRuleError

        op = lookup_op(name).from_attrs(attrs)
        try:
            outs = op.type_rule([level.types[a] for a in args], blocks)
        except TypeRuleError:
            return None
        return Inst(op, tuple(args), tuple(Value(level.session.fresh("v"), t) for t in outs),
                    tuple(blocks))

    def _operands(self, level: Level, nodes: Sequence[Any]) -> list[str] | None:
        try:
            return [level.value(n.name) for n in nodes]
        except (NotImportable, AttributeError):
            return None

    def cond(self, level: Level, gm: Any, node: Any, types: list, keys: list[str],
             readers: dict[str, int]) -> bool:
        pred, true_ref, false_ref, operands = node.args[:4]
        args = self._operands(level, [pred, *operands])
        if args is None:
            level.mark_unmapped(id(node), "torch.cond", keys, types)
            return False
        in_types = [level.types[a] for a in args[1:]]
        bodies = []
        for ref, which in ((true_ref, "then"), (false_ref, "else")):
            made = self.body(level, self._sub(gm, ref), in_types, which)
            if made is None:
                level.mark_unmapped(id(node), "torch.cond", keys, types)
                return False
            bodies.append(made[0])
        inst = self._make(level, "if", {}, args, bodies)
        if inst is None or not self._bind_results(level, inst, keys, types, range(len(keys))):
            level.mark_unmapped(id(node), "torch.cond", keys, types)
            return False
        return True

    def while_loop(self, level: Level, gm: Any, node: Any, types: list, keys: list[str],
                   readers: dict[str, int]) -> bool:
        """GraphIR's counted loop: carried (0, n, vs...), `i < n`, body (i + 1, n, vs'...)."""
        cond_ref, body_ref, carried = node.args[:3]
        extra = node.args[3] if len(node.args) > 3 else ()
        ok = (not extra and len(carried) >= 2 and self._counted(level, gm, cond_ref, body_ref,
                                                                 carried))
        args = self._operands(level, carried[1:]) if ok else None
        if args is None:
            level.mark_unmapped(id(node), "torch.while_loop", keys, types)
            return False
        body_gm = self._sub(gm, body_ref)
        in_types = [TensorType((), level.types[args[0]].dtype), None,
                    *(level.types[a] for a in args[1:])]
        n_out = len(carried)
        made = self.body(level, body_gm, in_types, "body", wanted=list(range(2, n_out)),
                         skip=(1,))
        if made is None:
            level.mark_unmapped(id(node), "torch.while_loop", keys, types)
            return False
        inst = self._make(level, "loop", {}, args, [made[0]])
        if inst is None or not self._bind_results(level, inst, keys, types, range(2, n_out)):
            level.mark_unmapped(id(node), "torch.while_loop", keys, types)
            return False
        return True

    def _counted(self, level: Level, gm: Any, cond_ref: Any, body_ref: Any, carried: Any) -> bool:
        import torch.fx

        start = carried[0]
        c = level.consts.get(getattr(start, "name", ""))
        if c is None or c.value.shape != () or int(c.value) != 0:
            return False
        cond_gm = self._sub(gm, cond_ref)
        calls = [n for n in cond_gm.graph.nodes if n.op == "call_function"]
        phs = [n for n in cond_gm.graph.nodes if n.op == "placeholder"]
        if (len(calls) != 1 or str(calls[0].target) != "aten.lt.Tensor"
                or list(calls[0].args) != phs[:2]):
            return False
        body_gm = self._sub(gm, body_ref)
        bphs = [n for n in body_gm.graph.nodes if n.op == "placeholder"]
        out = list(body_gm.graph.output_node().args[0])

        def through(n: Any) -> Any:
            while (isinstance(n, torch.fx.Node) and n.op == "call_function"
                   and str(n.target) in IDENTITIES):
                n = n.args[0]
            return n

        inc = through(out[0])
        return (isinstance(inc, torch.fx.Node) and str(inc.target) == "aten.add.Tensor"
                and list(inc.args) == [bphs[0], 1] and through(out[1]) is bphs[1]
                and not any(u is not out[1] and through(u) is not bphs[1]
                            for u in bphs[1].users if u.op != "output"))

    def scan(self, level: Level, gm: Any, node: Any, types: list, keys: list[str],
             readers: dict[str, int]) -> bool:
        import torch.fx

        combine_ref, init, xs = node.args[:3]
        extra = node.args[3] if len(node.args) > 3 else ()
        if extra or not init or not xs:
            level.mark_unmapped(id(node), "torch.scan", keys, types)
            return False
        # reverse: torch flips every scanned input (and output) along dim 0
        flips = [x if isinstance(x, torch.fx.Node) and str(x.target) == "aten.flip.default"
                 and list(cast(Any, x.args[1])) == [0] and readers.get(x.name) == 1 else None
                 for x in xs]
        reverse = all(f is not None for f in flips)
        sources = [f.args[0] for f in flips] if reverse else list(xs)  # type: ignore[union-attr]
        args = self._operands(level, [*init, *sources])
        if args is None:
            level.mark_unmapped(id(node), "torch.scan", keys, types)
            return False
        nc = len(init)
        in_types = [level.types[a] for a in args[:nc]]
        in_types += [TensorType(level.types[a].shape[1:], level.types[a].dtype) for a in args[nc:]]
        made = self.body(level, self._sub(gm, combine_ref), in_types, "body")
        if made is None:
            level.mark_unmapped(id(node), "torch.scan", keys, types)
            return False
        inst = self._make(level, "scan", {"num_carries": nc, "reverse": reverse}, args, [made[0]])
        if inst is None:
            level.mark_unmapped(id(node), "torch.scan", keys, types)
            return False
        if reverse:
            level.absorb((id(f), [f.name]) for f in flips if f is not None)
            ok = self._bind_results(level, inst, keys, types, range(nc))
            if not ok:
                return False
            for j in range(nc, len(inst.results)):
                r = inst.results[j]
                level.flipped_pending[keys[j]] = (r.name, r.type)
            return True
        return self._bind_results(level, inst, keys, types, range(len(keys)))
