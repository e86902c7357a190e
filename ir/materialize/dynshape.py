"""Dynamic shapes: a concrete graph plus which of its dims are symbolic, and the shape sets it
runs on (docs/dynshape.md).

Representation (`DynShape`, plain data that pickles and serializes to JSON):
  - the test's `Graph` stays the concrete graph of input set 0 (every tool that reads graphs:
    verifier, text form, input search, reducer, works on it unchanged);
  - `symbols`: the symbolic dims by name (`B`, `L`, `H`, `W`) with their role (batch, seq,
    spatial);
  - `dims`: for every value (nested ones included) with a symbolic dim, its shape as dim
    expressions, e.g. `("B", "4")`, `("(L + -3)//2 + 1",)`;
  - `attrs`: top-level instructions (by their first result's name) whose attributes depend on
    the symbols (a reshape to `(B*2, 6)`, a slice ending at `L + -1`, ...), as expressions;
  - `assignments`: distinct values of the symbols, each checked against every op's
    constraints (assignment 0 is the concrete graph's own); `set_assignment[k]` names the
    assignment of input set k.

Dim expressions are a tiny arithmetic language (ints, symbol names, `+ - * // %`, unary `-`,
parentheses), parsed with `ast` and checked node by node, so a finding's `dynshape.json` can
never run code. One expression evaluates over ints (`instantiate`), over torch sizes (the
`DynGraphModule`: SymInts under torch.compile / torch.export) and into ONNX shape arithmetic
(`to_onnx_dyn`: Shape/Add/Mul/Div nodes over the graph inputs' dims).

Materialization: one model for every shape.
  - ONNX: graph inputs whose dims are symbols get `dim_param`s; shapes inside the graph are left
    to the backends' inference (no value_info), outputs carry a `dim_param` for a bare symbol
    and an unnamed dim for any other symbolic expression; shape attributes that depend on the
    symbols become shape computations from the inputs' `Shape` as exporters write them
    (`shape_lowering="compute"`), or constants ONNX resolves against the input's shape where
    they can say it (`"infer"`: reshape's 0 and -1, a slice's negative end, expand's 1).
  - torch: `DynGraphModule` computes the attributes of those instructions from its inputs'
    sizes at each call, so one module serves all shapes.
"""
from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import NO_FIXES, Fixes, Interpreter, tensor_outputs
from ir.core.op import Op
from ir.core.shapes import Dim
from ir.core.types import TensorType
from ir.materialize.form import DEFAULT_FORM, TorchForm

if TYPE_CHECKING:
    import onnx
    import torch

    from ir.core.onnx_builder import OnnxBuilder

#: role of each symbol name (the generator names symbols by role)
ROLE_SYMBOLS = {"batch": ("B",), "seq": ("L",), "spatial": ("H", "W")}


class ExprError(ValueError):
    """A dim expression outside the expression language."""


# ---- the expression language --------------------------------------------------------------------

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}

#: an expression as a tuple tree: ("int", v) | ("sym", name) | (op, a, b) | ("neg", a)
Tree = tuple


@lru_cache(maxsize=8192)
def parse_expr(text: str) -> Tree:
    """The tree of a dim expression; raises ExprError for anything outside the language."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ExprError(f"dim expression {text!r}: {e.msg}") from None
    return _tree(node, text)


def _tree(node: ast.AST, text: str) -> Tree:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return ("int", node.value)
    if isinstance(node, ast.Name) and node.id.isidentifier():
        return ("sym", node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _tree(node.operand, text)
        return ("int", -inner[1]) if inner[0] == "int" else ("neg", inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return (_BINOPS[type(node.op)], _tree(node.left, text), _tree(node.right, text))
    raise ExprError(f"dim expression {text!r}: {type(node).__name__} is not allowed")


def eval_tree(t: Tree, env: Mapping[str, Any]) -> Any:
    """Evaluate over ints, or torch SymInts (sizes): only + - * // % on them."""
    kind = t[0]
    if kind == "int":
        return t[1]
    if kind == "sym":
        return env[t[1]]
    if kind == "neg":
        return -eval_tree(t[1], env)
    a, b = eval_tree(t[1], env), eval_tree(t[2], env)
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    if kind == "//":
        return a // b
    return a % b


def eval_expr(text: str | int, env: Mapping[str, Any]) -> Any:
    return text if isinstance(text, int) else eval_tree(parse_expr(text), env)


def tree_symbols(t: Tree) -> set[str]:
    if t[0] == "sym":
        return {t[1]}
    if t[0] == "int":
        return set()
    return set().union(*(tree_symbols(c) for c in t[1:]))


def expr_symbols(text: str | int) -> set[str]:
    return set() if isinstance(text, int) else tree_symbols(parse_expr(text))


def is_bare(text: str | int) -> bool:
    """A symbol by itself (not an int, not a compound expression)."""
    return isinstance(text, str) and parse_expr(text)[0] == "sym"


def expr_of_z3(term: Any) -> str | int:
    """A z3 integer term over symbols as an expression (an int when it is one). Raises
    ExprError for terms outside the language (if-then-else, ...)."""
    import z3

    t = z3.simplify(term)
    if z3.is_int_value(t):
        return t.as_long()
    return _z3_text(t)


def _z3_text(t: Any) -> str:
    import z3

    if z3.is_int_value(t):
        v = t.as_long()
        return str(v) if v >= 0 else f"({v})"
    if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        name = t.decl().name()
        if not name.isidentifier():
            raise ExprError(f"symbol {name!r} is not an identifier")
        return name
    k = t.decl().kind()
    args = [_z3_text(c) for c in t.children()]
    if k == z3.Z3_OP_ADD:
        return "(" + " + ".join(args) + ")"
    if k == z3.Z3_OP_MUL:
        return "(" + "*".join(args) + ")"
    if k == z3.Z3_OP_SUB:
        return "(" + " - ".join(args) + ")"
    if k == z3.Z3_OP_UMINUS:
        return f"(-{args[0]})"
    if k in (z3.Z3_OP_IDIV, z3.Z3_OP_DIV):
        return f"({args[0]}//{args[1]})"
    if k == z3.Z3_OP_MOD:
        return f"({args[0]}%{args[1]})"
    raise ExprError(f"dim term {t} is outside the dim expression language")


def tidy(text: str | int) -> str | int:
    """Canonical spacing of an expression (and an int when it is one)."""
    if isinstance(text, int):
        return text
    t = parse_expr(text)
    return t[1] if t[0] == "int" else _show(t)


def _show(t: Tree, parent: int = 0) -> str:
    prec = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}
    kind = t[0]
    if kind == "int":
        return str(t[1]) if t[1] >= 0 else f"({t[1]})"
    if kind == "sym":
        return t[1]
    if kind == "neg":
        return f"(-{_show(t[1], 3)})"
    p = prec[kind]
    s = f"{_show(t[1], p)} {kind} {_show(t[2], p + 1)}" if kind in "+-" else \
        f"{_show(t[1], p)}{kind}{_show(t[2], p + 1)}"
    return f"({s})" if p < parent else s


def z3_of_expr(text: str | int, syms: Mapping[str, Any]) -> Dim:
    """The z3 term of an expression (`syms`: symbol name -> z3 Int)."""
    if isinstance(text, int):
        return text
    return _z3_tree(parse_expr(text), syms)


def _z3_tree(t: Tree, syms: Mapping[str, Any]) -> Dim:
    kind = t[0]
    if kind == "int":
        return t[1]
    if kind == "sym":
        return syms[t[1]]
    if kind == "neg":
        return -_z3_tree(t[1], syms)
    a, b = _z3_tree(t[1], syms), _z3_tree(t[2], syms)
    if kind == "//":
        return a / b
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "%": lambda: a % b}[kind]()


# ---- the test's dynamic-shape description -----------------------------------------------------

#: an attribute value: an expression, or a tuple of expressions and ints
AttrExpr = Any


@dataclass
class DynShape:
    """Which dims of a test's graph are symbolic and the shape sets it runs on (module doc)."""

    symbols: dict[str, str]
    dims: dict[str, tuple]
    attrs: dict[str, dict[str, AttrExpr]] = field(default_factory=dict)
    assignments: list[dict[str, int]] = field(default_factory=list)
    set_assignment: list[int] = field(default_factory=list)
    #: how shape attributes depending on symbols become ONNX (`compute` | `infer`)
    shape_lowering: str = "compute"

    # ---- queries ------------------------------------------------------------------------------
    def assignment_of_set(self, k: int) -> dict[str, int]:
        return self.assignments[self.set_assignment[k]]

    def input_dims(self, g: Graph) -> list[str]:
        """Each symbolic dim of a graph input: `x0[0]=B`."""
        out = []
        for v in g.inputs:
            for axis, d in enumerate(self.dims.get(v.name, ())):
                if not isinstance(d, int):
                    out.append(f"{v.name}[{axis}]={d}")
        return out

    def marked_axes(self, g: Graph) -> list[list[int]]:
        """Per graph input, the axes a compiler is told are dynamic (`mark_dynamic`): those
        whose dim is a bare symbol (an expression like `B + 3` follows from them)."""
        return [[axis for axis, d in enumerate(self.dims.get(v.name, ())) if is_bare(d)]
                for v in g.inputs]

    def shape_labels(self) -> list[str]:
        """Per input set, its assignment (`B=3,L=5`)."""
        return [",".join(f"{s}={a[s]}" for s in self.symbols)
                for a in (self.assignments[i] for i in self.set_assignment)]

    def sources(self, g: Graph) -> dict[str, tuple[int, int]]:
        """Symbol -> (graph input index, axis) of its first bare occurrence among the inputs."""
        out: dict[str, tuple[int, int]] = {}
        for i, v in enumerate(g.inputs):
            for axis, d in enumerate(self.dims.get(v.name, ())):
                if is_bare(d) and d not in out:
                    out[d] = (i, axis)
        missing = sorted(set(self.symbols) - set(out))
        if missing:
            raise ExprError(f"symbol {missing[0]} is not a dim of any graph input")
        return out

    # ---- plain data -----------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {"symbols": self.symbols,
                "dims": {k: list(v) for k, v in self.dims.items()},
                "attrs": {k: {a: list(v) if isinstance(v, tuple) else v for a, v in d.items()}
                          for k, d in self.attrs.items()},
                "assignments": self.assignments, "set_assignment": self.set_assignment,
                "shape_lowering": self.shape_lowering}

    @staticmethod
    def from_json(d: Mapping) -> DynShape:
        def expr(x: int | str) -> int | str:
            if isinstance(x, int):
                return x
            parse_expr(x)  # validated: never evaluated otherwise than by eval_tree
            return x

        return DynShape(
            dict(d["symbols"]),
            {k: tuple(expr(x) for x in v) for k, v in d["dims"].items()},
            {k: {a: tuple(expr(x) for x in v) if isinstance(v, list) else expr(v)
                 for a, v in attrs.items()} for k, attrs in d.get("attrs", {}).items()},
            [dict(a) for a in d["assignments"]], list(d["set_assignment"]),
            d.get("shape_lowering", "compute"))

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True)


def _eval_attr(v: AttrExpr, env: Mapping[str, Any]) -> Any:
    if isinstance(v, tuple):
        return tuple(eval_expr(x, env) for x in v)
    return eval_expr(v, env)


def parse_attr(v: AttrExpr) -> Any:
    """An attribute with its expressions parsed to trees (ints kept)."""
    if isinstance(v, tuple):
        return tuple(x if isinstance(x, int) else parse_expr(x) for x in v)
    return v if isinstance(v, int) else parse_expr(v)


def eval_parsed(v: Any, env: Mapping[str, Any]) -> Any:
    """An attribute parsed by `parse_attr`, its expressions evaluated over `env` (symbol ->
    int, SymInt, or anything with + - * // %)."""
    if isinstance(v, list):
        return v
    if isinstance(v, tuple) and v and isinstance(v[0], str):  # one tree
        return eval_tree(v, env)
    if isinstance(v, tuple):
        return tuple(x if isinstance(x, int) else eval_tree(x, env) for x in v)
    return v


def op_at(inst: Inst, dyn: DynShape, env: Mapping[str, Any]) -> Op:
    """The instruction's op with its symbolic attributes evaluated in `env`."""
    attrs = dyn.attrs.get(inst.results[0].name) if inst.results else None
    if not attrs:
        return inst.op
    return dataclasses.replace(inst.op, **{k: _eval_attr(v, env) for k, v in attrs.items()})


def instantiate(g: Graph, dyn: DynShape, assignment: Mapping[str, int]) -> Graph:
    """The concrete graph of one assignment of the symbols (verify it: `ir.core.verify`)."""
    def value(v: Value) -> Value:
        dims = dyn.dims.get(v.name)
        if dims is None:
            return v
        return Value(v.name, TensorType(tuple(int(eval_expr(d, assignment)) for d in dims),
                                        v.type.dtype))

    def graph(h: Graph) -> Graph:
        insts = tuple(Inst(op_at(inst, dyn, assignment), inst.args,
                           tuple(value(r) for r in inst.results),
                           tuple(graph(b) for b in inst.blocks)) for inst in h.insts)
        return Graph(h.name, tuple(value(v) for v in h.inputs), insts, h.outputs,
                     tuple(value(p) for p in h.params))

    return graph(g)


class GraphSets:
    """The concrete graph of each input set of a dynamic-shape test (built once each)."""

    def __init__(self, g: Graph, dyn: DynShape | None):
        self.g, self.dyn = g, dyn
        self._cache: dict[int, Graph] = {}

    def __call__(self, k: int) -> Graph:
        if self.dyn is None:
            return self.g
        a = self.dyn.set_assignment[k]
        if a == 0:
            return self.g
        if a not in self._cache:
            self._cache[a] = instantiate(self.g, self.dyn, self.dyn.assignments[a])
        return self._cache[a]


# ---- ONNX: one model with symbolic dims ---------------------------------------------------------

class SymI64:
    """An int64 attribute element that depends on the symbols (its expression), for the ONNX
    builder's `const_i64`."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"SymI64({self.text})"


def _sym_attr(v: AttrExpr) -> Any:
    if isinstance(v, tuple):
        return tuple(x if isinstance(x, int) else SymI64(x) for x in v)
    return v if isinstance(v, int) else SymI64(v)


def _onnx_builder_class() -> Callable[[Sequence[Value], DynShape, Mapping[str, tuple[int, int]]],
                                      OnnxBuilder]:
    from ir.materialize.to_onnx import OnnxBuilder

    class DynOnnxBuilder(OnnxBuilder):
        """`const_i64` of values containing `SymI64`: a tensor computed from the graph inputs'
        dims, the way exporters write it: `Shape`, `Gather` of one dim (a 0-d int64), scalar
        arithmetic, `Unsqueeze` to 1-d and `Concat` of the elements."""

        def __init__(self, inputs: Sequence[Value], dyn: DynShape,
                     sources: Mapping[str, tuple[int, int]]) -> None:
            super().__init__()
            self.dyn_inputs = list(inputs)
            self.dyn = dyn
            self.sources = sources
            self._sym_cache: dict[Tree, str] = {}
            self._shapes: dict[int, str] = {}

        def const_i64(self, values: Any) -> str:
            if isinstance(values, SymI64):  # a scalar (0-d) operand
                return self.scalar(parse_expr(values.text))
            if not isinstance(values, (list, tuple)) or \
                    not any(isinstance(v, SymI64) for v in values):
                return super().const_i64(values)
            parts = []
            for v in values:
                if isinstance(v, SymI64):
                    one = self.fresh("elem")
                    self.node("Unsqueeze", [self.scalar(parse_expr(v.text)),
                                            super().const_i64([0])], [one])
                    parts.append(one)
                else:
                    parts.append(super().const_i64([int(v)]))
            if len(parts) == 1:
                return parts[0]
            out = self.fresh("shape")
            self.node("Concat", parts, [out], axis=0)
            return out

        def scalar(self, t: Tree) -> str:
            """A 0-d int64 tensor holding the expression's value."""
            if t in self._sym_cache:
                return self._sym_cache[t]
            kind = t[0]
            if kind == "int":
                out = self.const(np.asarray(t[1], dtype=np.int64))
            elif kind == "sym":
                i, axis = self.sources[t[1]]
                if i not in self._shapes:
                    self._shapes[i] = self.fresh("shape_of_")
                    self.node("Shape", [self.dyn_inputs[i].name], [self._shapes[i]])
                out = self.fresh(f"dim_{t[1]}_")
                self.node("Gather", [self._shapes[i], self.const(np.asarray(axis, np.int64))],
                          [out], axis=0)
            elif kind == "neg":
                out = self.fresh("neg")
                self.node("Neg", [self.scalar(t[1])], [out])
            else:
                op = {"+": "Add", "-": "Sub", "*": "Mul", "//": "Div", "%": "Mod"}[kind]
                out = self.fresh(op.lower())
                # Div/Mod of int64 truncate toward zero: the same as floor for the
                # non-negative operands every valid assignment gives
                self.node(op, [self.scalar(t[1]), self.scalar(t[2])], [out])
            self._sym_cache[t] = out
            return out

    return DynOnnxBuilder


def _offset(a: str | int, b: str | int) -> int | None:
    """a - b when it is the same int for every assignment (None otherwise)."""
    import z3

    names = expr_symbols(a) | expr_symbols(b)
    syms = {n: z3.Int(n) for n in names}
    d = z3.simplify(z3_of_expr(a, syms) - z3_of_expr(b, syms))
    return d.as_long() if z3.is_int_value(d) else None


def onnx_dims(dims: tuple) -> list:
    """ONNX dims of a shape over the symbols: ints, a symbol as `dim_param`, and None (an
    unnamed dim, left to shape inference) for any other expression."""
    return [d if isinstance(d, int) else (d if is_bare(d) else None) for d in dims]


def onnx_view(g: Graph, dyn: DynShape) -> Graph:
    """`g` with every value's type in ONNX dims (`onnx_dims`): what the ONNX builder declares
    for graph inputs and outputs and for the inputs and outputs of bodies."""
    def value(v: Value) -> Value:
        dims = dyn.dims.get(v.name)
        return v if dims is None else Value(v.name, TensorType(tuple(onnx_dims(dims)),
                                                                v.type.dtype))

    def graph(h: Graph) -> Graph:
        insts = tuple(Inst(inst.op, inst.args, tuple(value(r) for r in inst.results),
                           tuple(graph(b) for b in inst.blocks)) for inst in h.insts)
        return Graph(h.name, tuple(value(v) for v in h.inputs), insts, h.outputs,
                     tuple(value(p) for p in h.params))

    return graph(g)


def to_onnx_dyn(g: Graph, dyn: DynShape, params: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """One ONNX model for every assignment (see the module doc)."""
    from onnx import helper, numpy_helper

    from ir.materialize.to_onnx import IR_VERSION, OPSET, build_body, value_info

    concrete_types = g.types()
    g = onnx_view(g, dyn)  # bodies declare symbolic dims too (ORT sizes body outputs by them)
    b = _onnx_builder_class()(g.inputs, dyn, dyn.sources(g))
    b.types.update(g.types())
    for inst in g.insts:
        attrs = dyn.attrs.get(inst.results[0].name) if inst.results else None
        op = inst.op
        if attrs:
            lowered = None
            if dyn.shape_lowering == "infer":
                in_dims = dyn.dims.get(inst.args[0], tuple(concrete_types[inst.args[0]].shape))
                lowered = op.onnx_inferred_attrs(attrs, in_dims, _offset)
            if lowered is not None:
                op = lowered
            else:
                op = dataclasses.replace(op, **{k: _sym_attr(v) for k, v in attrs.items()})
        op.onnx_call(b, list(inst.args), list(inst.result_names), inst.blocks,
                     lambda body, bind=None: build_body(body, b, bind))
    types = g.types()
    inits = [numpy_helper.from_array(np.asarray(params[p.name], order="C"), p.name)
             for p in g.params]
    graph = helper.make_graph(b.nodes, g.name, [value_info(v) for v in g.inputs],
                              [value_info(Value(o, types[o])) for o in g.outputs],
                              initializer=inits + b.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="dynsmith", ir_version=IR_VERSION)


# ---- torch: one module for every shape ----------------------------------------------------------

class DynInterpreter(Interpreter):
    """A dynamic-shape graph on torch (`ir.core.interpreter`): each top-level instruction whose
    attributes depend on the symbols (`DynShape.attrs`, parsed) runs with them computed from
    the symbols' values in this call, the sizes of the graph inputs they are dims of (ints in
    eager, SymInts under a compiler). The sizes enter the top level's environment as derived
    values (`Fixes.derived`, under names no value has: `#B`), read off by the loop itself.
    Bodies run through the same loop; no attribute of theirs depends on the symbols. The graph
    is pure (dynamic-shape tests are generated, never mutated: no views, no writes)."""

    def __init__(self, g: Graph, dyn: DynShape, dialect: str = "python", numbers: bool = False):
        import torch

        super().__init__(dialect, numbers)
        self.top = g
        #: symbol -> its name in the environment
        self.size_names = {s: f"#{s}" for s in dyn.symbols}
        self.top_fixes = Fixes(derived={
            self.size_names[s]: (g.inputs[i].name, partial(torch.Tensor.size, dim=axis))
            for s, (i, axis) in dyn.sources(g).items()})
        # parsed once here: tracing must only see arithmetic on sizes (no `ast`)
        self.attr_trees = {key: {k: parse_attr(v) for k, v in attrs.items()}
                           for key, attrs in dyn.attrs.items()}

    def fixes(self, g: Graph) -> Fixes:
        return self.top_fixes if g is self.top else NO_FIXES

    def op_of(self, g: Graph, index: int, inst: Inst, values: dict) -> Op:
        op = inst.op
        trees = self.attr_trees.get(inst.results[0].name) if inst.results else None
        if trees:
            sizes = {s: values[name] for s, name in self.size_names.items()}
            op = dataclasses.replace(op, **{k: eval_parsed(v, sizes) for k, v in trees.items()})
        return op


def _module_class() -> type[torch.nn.Module]:
    import torch

    class DynGraphModule(torch.nn.Module):
        """forward(*inputs) -> tuple of outputs for inputs of any assignment: the attributes of
        the instructions that depend on the symbols are computed from the inputs' sizes at each
        call (ints in eager, SymInts under torch.compile / torch.export): `DynInterpreter`."""

        def __init__(self, g: Graph, dyn: DynShape, params: Mapping[str, np.ndarray],
                     dialect: str = "python", form: TorchForm = DEFAULT_FORM,
                     trainable: frozenset[str] = frozenset()):
            from ir.materialize.to_torch import FormParams

            super().__init__()
            self.graph = g
            self.dyn = dyn
            self.dialect = dialect
            self.form = form
            self.interpreter = DynInterpreter(g, dyn, dialect, form.numbers)
            self.params_of = FormParams(self, g, params, form, trainable=trainable)

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            g = self.graph
            env = {v.name: x for v, x in zip(g.inputs, inputs, strict=True)}
            env.update(self.params_of.env(self, g))
            values = self.interpreter.run(g, env)
            if self.form.numbers:
                return tuple(tensor_outputs(g, values))
            return tuple(values[o] for o in g.outputs)

    return DynGraphModule


def torch_module(g: Graph, dyn: DynShape | None, params: Mapping[str, np.ndarray],
                 dialect: str = "python", form: TorchForm = DEFAULT_FORM,
                 trainable: frozenset[str] = frozenset()) -> torch.nn.Module:
    """The torch module of a test in `dialect` and `form` (`ir.materialize.form`):
    `GraphModule` for a static one, `DynGraphModule` else (a dynamic-shape graph is pure, so
    its `inplace` form changes nothing); `trainable`: a gradient test's leaf params."""
    if dyn is None:
        from ir.materialize.to_torch import GraphModule

        return GraphModule(g, params, dialect=dialect, form=form, trainable=trainable)
    return _module_class()(g, dyn, params, dialect, form, trainable)


def export_dynamic_shapes(g: Graph, dyn: DynShape) -> tuple:
    """`dynamic_shapes` for `torch.export` / `torch.onnx.export(dynamo=True)`: one `Dim` per
    symbol (its range: the assignments'), on every input dim that is that symbol, for the
    module's one varargs parameter."""
    from torch.export import Dim

    lo = {s: min(a[s] for a in dyn.assignments) for s in dyn.symbols}
    hi = {s: max(a[s] for a in dyn.assignments) for s in dyn.symbols}
    dims = {s: Dim(s, min=lo[s], max=max(hi[s], lo[s] + 1)) for s in dyn.symbols}
    spec = []
    for v in g.inputs:
        d = {axis: dims[e] for axis, e in enumerate(dyn.dims.get(v.name, ())) if is_bare(e)}
        spec.append(d or None)
    return (tuple(spec),)  # forward(*inputs): one varargs parameter


def mark_dynamic(tensors: Sequence, g: Graph, dyn: DynShape, unbacked: bool = False,
                 maybe: bool = False) -> None:
    """Mark every input dim that is a symbol dynamic for torch.compile (or unbacked; `maybe`:
    `maybe_mark_dynamic`, which lets a recompile for a 0/1 size specialize it)."""
    import torch._dynamo

    mark = (torch._dynamo.decorators.mark_unbacked if unbacked else
            torch._dynamo.maybe_mark_dynamic if maybe else torch._dynamo.mark_dynamic)
    for t, axes in zip(tensors, dyn.marked_axes(g), strict=True):
        for axis in axes:
            mark(t, axis)
