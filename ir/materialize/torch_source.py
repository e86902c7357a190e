"""GraphIR -> readable, standalone torch source: a `Model(torch.nn.Module)` whose `forward` is
straight-line torch code (no dynsmith import), for the reproducers of torch-based backends.

How: each instruction's torch materializer (`Op.torch`) runs once on example tensors of its
operand types under a `TorchFunctionMode` that records the torch calls it makes (only the
outermost ones: torch disables a mode inside its own handler). Op materializers depend on
types, never on values, so the recording is the op's code for every input of these types; it
is printed as calls on named values (`v3 = torch.nn.functional.gelu(v2)`). Python-level
arithmetic on shapes is already folded into the recorded arguments.

Control flow is emitted the way `ir/ops/control.py` runs it, per dialect:
  - `python`: a plain `if bool(pred):`, `for i in range(int(trip)):`, and a `for` over the
    scanned axis with `torch.stack` of the per-step outputs;
  - `hop`: `torch.cond`, `torch.while_loop` (the counter carried) and torch's `scan`
    higher-order op, with nested functions for the bodies and the same copies at the
    boundaries as the interpreter (`.clone(memory_format=torch.contiguous_format)`).

The program's form (`ir.materialize.form.TorchForm`) is emitted as the torch module writes it:
`scalars=number` binds the loop counter as a Python int (`for i in range(...)`, an int carried
by `torch.while_loop`) and 0-d params as Python numbers, each number passed as a scalar where
the op takes one (`Op.number_operand`) and as `torch.scalar_tensor(..., dtype=...)` elsewhere;
`params=parameter` registers `nn.Parameter`s; `inplace=functional` prints the graph's
`pure_form`.

Floats keep where the module reads them from. `ir.materialize.to_torch`'s module reads an
op's float attributes (`leaky_relu`'s `alpha`, `clip`'s bounds, a fill value) from the op
object and its module's float constants (the norms' `EPS`) from globals, at trace time: under
`torch.compile(dynamic=True)` Dynamo makes each such float a dynamic SymFloat (a graph input),
where a literal is a constant it specializes. So the source reads each one from a module-level
global of its own (`_f_EPS`, `_f_v3_alpha` for the `alpha` of the op making `%v3`: one per op
attribute, one per module
constant, as the module's reads have one source each), the float arithmetic and `int()` the op
does on it printed as expressions (`int(_f_clip3_lo)`); a literal in the op's own code stays a
literal, and NaN and infinities (which Dynamo specializes) are printed as values. A reproducer
printed with literals compiled another program and did not fail where the campaign's did (docs
findings F40, F44). How: `_record` runs the op on a copy whose float fields are `_Named` floats,
with its module's float constants and `int` swapped for named ones meanwhile (`_named_floats`).

Calls made only for their effect (they return None) are statements: `Tensor.__setitem__`
(`setitem`) is printed as `x[idx] = y`; any other such call is a CodegenError, never dropped.

`torch_source(graph, dialect, form)` returns the module's source, after running it against the
interpreter (`ir.materialize.to_torch`) on example values (`self_check`: the outputs and the
inputs it writes), so a reproducer is only written from code that computes the same thing;
`check_source` is that comparison on given values.
"""
from __future__ import annotations

import builtins
import contextlib
import copy
import dataclasses
import keyword
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np

from ir.core.graph import Graph, Inst
from ir.core.op import Op
from ir.core.types import TensorType
from ir.materialize.dynshape import DynShape, instantiate, parse_attr
from ir.materialize.form import DEFAULT_FORM, TorchForm
from ir.ops.control import If, Loop, Scan
from ir.ops.custom import Custom
from ir.ops.region import Region, RegionPlan, copied_outputs, plan_regions


class CodegenError(RuntimeError):
    """The graph uses something the generator cannot print as torch code."""


_BINARY = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/",
           "__floordiv__": "//", "__mod__": "%", "__pow__": "**", "__matmul__": "@",
           "__and__": "&", "__or__": "|", "__xor__": "^", "__lt__": "<", "__le__": "<=",
           "__gt__": ">", "__ge__": ">=", "__eq__": "==", "__ne__": "!=",
           "__lshift__": "<<", "__rshift__": ">>"}
_REVERSED = {"__radd__": "+", "__rsub__": "-", "__rmul__": "*", "__rtruediv__": "/",
             "__rfloordiv__": "//", "__rmod__": "%", "__rpow__": "**", "__rmatmul__": "@",
             "__rand__": "&", "__ror__": "|", "__rxor__": "^"}
_UNARY = {"__neg__": "-", "__invert__": "~", "__pos__": "+", "__abs__": "abs"}

_names: dict[int, str] | None = None


def _function_names() -> dict[int, str]:
    """id(torch function object) -> how generated code calls it."""
    global _names
    if _names is None:
        import torch
        import torch.nn.functional as F

        names: dict[int, str] = {}
        for prefix, mod in (("torch.special", torch.special), ("torch.linalg", torch.linalg),
                            ("torch.fft", torch.fft), ("torch", torch),
                            ("torch.nn.functional", F)):
            for attr in dir(mod):
                if attr.startswith("__"):
                    continue
                try:
                    obj = getattr(mod, attr)
                except Exception:
                    continue
                if callable(obj):
                    names[id(obj)] = f"{prefix}.{attr}"
        _names = names
    return _names


def _tensor_methods() -> dict[int, str]:
    import torch

    out = {}
    for attr in dir(torch.Tensor):
        try:
            obj = getattr(torch.Tensor, attr)
        except Exception:
            continue
        if callable(obj):
            out[id(obj)] = attr
    return out


_methods: dict[int, str] | None = None


def py_name(name: str) -> str:
    """A GraphIR value name as a Python identifier."""
    s = name if name.isidentifier() and not keyword.iskeyword(name) else f"_{name}"
    return s if s.isidentifier() else "_" + "".join(c if c.isalnum() else "_" for c in name)


def _example(t: TensorType) -> Any:
    import torch

    shape = tuple(int(d) for d in t.shape)
    dt = t.dtype.torch
    if t.dtype.is_float:
        return torch.rand(shape, dtype=torch.float64).to(dt) + 0.5
    if t.dtype.is_int:
        return torch.ones(shape, dtype=dt)
    return torch.ones(shape, dtype=torch.bool)


class _Named(float):
    """A float the compiled module reads from somewhere (an op attribute, a module constant),
    with the expression that reads it in the generated code (`expr`): a global's name, or
    float arithmetic over such names, as Dynamo traces it (a SymFloat stays one)."""

    expr: str

    def __new__(cls, value: float, expr: str) -> _Named:
        self = super().__new__(cls, value)
        self.expr = expr
        return self

    def _op(self, other: Any, sym: str, value: Any, reflected: bool = False) -> Any:
        if value is NotImplemented or not isinstance(other, (int, float)) \
                or isinstance(other, bool) or not isinstance(value, float):
            return value
        a, b = self.expr, _number_expr(other)
        return _Named(value, f"({b} {sym} {a})" if reflected else f"({a} {sym} {b})")

    def __add__(self, o: Any) -> Any:
        return self._op(o, "+", float(self).__add__(o))

    def __radd__(self, o: Any) -> Any:
        return self._op(o, "+", float(self).__radd__(o), True)

    def __sub__(self, o: Any) -> Any:
        return self._op(o, "-", float(self).__sub__(o))

    def __rsub__(self, o: Any) -> Any:
        return self._op(o, "-", float(self).__rsub__(o), True)

    def __mul__(self, o: Any) -> Any:
        return self._op(o, "*", float(self).__mul__(o))

    def __rmul__(self, o: Any) -> Any:
        return self._op(o, "*", float(self).__rmul__(o), True)

    def __truediv__(self, o: Any) -> Any:
        return self._op(o, "/", float(self).__truediv__(o))

    def __rtruediv__(self, o: Any) -> Any:
        return self._op(o, "/", float(self).__rtruediv__(o), True)

    def __neg__(self) -> Any:
        return _Named(-float(self), f"(-{self.expr})")

    def __abs__(self) -> Any:
        return _Named(abs(float(self)), f"abs({self.expr})")


class _NamedInt(int):
    """`int()` of a `_Named` float (`expr`: `int(<its expression>)`): Dynamo makes `int()` of a
    SymFloat a SymInt, so the generated code converts the same read."""

    expr: str

    def __new__(cls, value: int, expr: str) -> _NamedInt:
        self = super().__new__(cls, value)
        self.expr = expr
        return self


def _number_expr(v: Any) -> str:
    return v.expr if isinstance(v, (_Named, _NamedInt)) else repr(v)


class _IntMeta(type):
    """`int` as the op's module sees it while recording: `int(x)` is `_NamedInt` for a
    `_Named` x, the builtin otherwise; `isinstance(v, int)` is the builtin's."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], _SymInt):
            return args[0]  # a size stays the expression it is
        value = builtins.int(*args, **kwargs)
        if args and isinstance(args[0], _Named) and not kwargs and len(args) == 1:
            return _NamedInt(value, f"int({args[0].expr})")
        return value

    def __instancecheck__(cls, v: Any) -> bool:
        return isinstance(v, builtins.int)

    def __subclasscheck__(cls, c: type) -> bool:
        return issubclass(c, builtins.int)


class _TracedInt(metaclass=_IntMeta):
    """The `int` of `_IntMeta` (never instantiated: calling it gives an int)."""


class _SymInt(int):
    """An int a dynamic-shape program computes from sizes (docs/dynshape.md): its value in the
    recording (input set 0's), and its expression as a tree over the symbols the forward binds
    at its start (`("sym", "B")`) and the sizes of tensors the recording queried (`("size",
    tensor, axis)`, named once the program names the tensor: `render`). Arithmetic on it keeps
    the expression (+ - * // % and negation with ints); anything else gives a plain value,
    printed as the literal it is, which `torch_source`'s check on every assignment catches."""

    tree: tuple

    def __new__(cls, value: int, tree: tuple) -> _SymInt:
        self = super().__new__(cls, value)
        self.tree = tree
        return self

    def render(self, names: dict[int, str]) -> str:
        """Its Python expression, tensors by their names in `names` (id -> expression)."""
        kind = self.tree[0]
        if kind == "sym":
            return self.tree[1]
        if kind == "size":
            t, axis = self.tree[1], self.tree[2]
            if id(t) not in names:
                raise CodegenError("a size of a tensor the program does not name")
            return f"{names[id(t)]}.size({axis})"
        if kind == "neg":
            return f"(-{_render_int(self.tree[1], names)})"
        a, b = (_render_int(x, names) for x in self.tree[1:])
        return f"({a} {kind} {b})"

    def __neg__(self) -> Any:
        return _SymInt(-builtins.int(self), ("neg", self))


def _render_int(v: Any, names: dict[int, str]) -> str:
    return v.render(names) if isinstance(v, _SymInt) else repr(builtins.int(v))


def _sym_arith(symbol: str, reflected: bool) -> Callable[[_SymInt, Any], Any]:
    fn = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__,
          "%": int.__mod__}[symbol]

    def method(self: _SymInt, other: Any) -> Any:
        if not isinstance(other, builtins.int):
            return NotImplemented  # a float's own method computes it: a plain value
        a, b = (other, self) if reflected else (self, other)
        return _SymInt(fn(builtins.int(a), builtins.int(b)), (symbol, a, b))

    return method


for _sym, _name in (("+", "add"), ("-", "sub"), ("*", "mul"), ("//", "floordiv"), ("%", "mod")):
    setattr(_SymInt, f"__{_name}__", _sym_arith(_sym, False))
    setattr(_SymInt, f"__r{_name}__", _sym_arith(_sym, True))


def _symbolic_query(func: Any, fargs: Any, kwargs: dict[str, Any], out: Any) -> Any:
    """A size query's result as `_SymInt`s of the tensor's sizes (`x.shape`, `x.size()`,
    `x.size(d)`, `len(x)`, `x.numel()`), so the calls it feeds print the query, not set 0's
    value; any other result as it is."""
    import torch

    t = fargs[0]
    name = getattr(func, "__name__", "")
    if isinstance(out, torch.Size) and name in ("size", "__get__"):
        return torch.Size([_SymInt(d, ("size", t, i)) for i, d in enumerate(out)])
    if name == "size" and type(out) is builtins.int:
        dim: Any = fargs[1] if len(fargs) > 1 else kwargs["dim"]
        return _SymInt(out, ("size", t, builtins.int(dim) % t.dim()))
    if name == "__len__" and type(out) is builtins.int:
        return _SymInt(out, ("size", t, 0))
    if name == "numel" and type(out) is builtins.int and t.dim():
        total: Any = _SymInt(t.shape[0], ("size", t, 0))
        for i in range(1, t.dim()):
            total = total * _SymInt(t.shape[i], ("size", t, i))
        return total
    return out


def _named(value: Any, name: str) -> Any:
    """`value` as a `_Named` float read from global `name` (a finite float only: Dynamo
    specializes NaN and infinities, and treats ints and bools as the constants they are)."""
    if type(value) is float and math.isfinite(value):
        return _Named(value, name)
    return value


class _Emitter:
    def __init__(self, form: TorchForm = DEFAULT_FORM) -> None:
        self.lines: list[str] = []
        self.tmp = 0
        self.uses_fresh = False
        self.uses_scan = False
        self.form = form
        #: the Python names that hold numbers (the `number` scalars form), not tensors
        self.numbers: set[str] = set()
        #: the globals holding the floats the module reads (`_Named`): name -> value
        self.floats: dict[str, float] = {}
        #: (module, constant) -> the global standing for it (one read source, one name)
        self.constants: dict[tuple[str, str], str] = {}
        #: a graph with views and in-place writes: each level's fixes, by graph id (name ->
        #: "clone" or "contiguous": `ir.analysis.inplace.Level`), and the top graph, whose
        #: inputs the module writes in place (the `TorchPlan` run without copying them)
        self.fix_inputs: dict[int, dict[str, str]] = {}
        self.fix_results: dict[int, dict[str, str]] = {}
        self.top: Graph | None = None
        #: a dynamic-shape program (docs/dynshape.md): each symbol as the `_SymInt` the
        #: forward binds it to, and the parsed attributes that depend on them, by the
        #: instruction's first result; None: a static program
        self.sym_env: dict[str, Any] | None = None
        self.sym_attrs: dict[str, dict[str, Any]] = {}
        #: module-level definitions before the class (custom ops), and each custom op's
        #: Python name by its qualified name
        self.defs: list[str] = []
        self.customs: dict[str, str] = {}
        #: the program's compile regions (`ir.ops.region.plan_regions`) and each region
        #: function's Python name by its label
        self.regions: RegionPlan | None = None
        self.region_fns: dict[str, str] = {}

    def op_of(self, inst: Inst) -> Op:
        """The instruction's op as the program computes it: with its attributes that depend
        on the symbols (a dynamic-shape program) as `_SymInt` expressions of them."""
        trees = self.sym_attrs.get(inst.results[0].name) if inst.results else None
        if not trees or self.sym_env is None:
            return inst.op
        from ir.materialize.dynshape import eval_parsed

        return dataclasses.replace(inst.op, **{k: eval_parsed(v, self.sym_env)
                                               for k, v in trees.items()})

    @staticmethod
    def fix(expr: str, how: str) -> str:
        """`expr` through a fix of `ir.analysis.inplace.TorchPlan` (`clone`: new storage)."""
        return (f"{expr}.clone(memory_format=torch.contiguous_format)" if how == "clone"
                else f"{expr}.contiguous()")

    def float_global(self, name: str, value: float) -> str:
        """A fresh global name like `name` for a float the module reads."""
        base = "_f_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)
        out, k = base, 1
        while out in self.floats:
            k += 1
            out = f"{base}_{k}"
        self.floats[out] = value
        return out

    def tensor(self, expr: str, t: TensorType) -> str:
        """`expr` as a tensor of type `t`: itself, or a number wrapped as a 0-d tensor."""
        if expr not in self.numbers:
            return expr
        return f"torch.scalar_tensor({expr}, dtype={t.dtype.torch})"

    def operands(self, inst: Inst, exprs: list[str], types: list[TensorType]) -> list[str]:
        """The operand expressions of `inst` as the number form passes them
        (`ir.core.interpreter.number_args`): a number stays one only at the op's
        `number_operand` position after a tensor operand 0."""
        keep = inst.op.number_operand
        return [e if (k == keep and exprs[0] not in self.numbers) else self.tensor(e, t)
                for k, (e, t) in enumerate(zip(exprs, types, strict=True))]

    def fresh(self, prefix: str = "t") -> str:
        self.tmp += 1
        return f"_{prefix}{self.tmp}"


def _literal(v: Any, names: dict[int, str], consts: Callable[[Any], str]) -> str:
    import torch

    if isinstance(v, torch.Tensor):
        if id(v) in names:
            return names[id(v)]
        return consts(v)
    if isinstance(v, (_Named, _NamedInt)):  # a float the module reads, not a literal
        return v.expr
    if isinstance(v, _SymInt):  # a size the program computes (dynamic shapes)
        return v.render(names)
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, (int, np.integer)):
        return repr(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "float('nan')"
        if math.isinf(f):
            return "float('inf')" if f > 0 else "float('-inf')"
        return repr(f)
    if isinstance(v, torch.Size):
        return _literal(tuple(v), names, consts)
    if isinstance(v, tuple):
        items = [_literal(x, names, consts) for x in v]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x, names, consts) for x in v) + "]"
    if isinstance(v, slice):
        return (f"slice({_literal(v.start, names, consts)}, {_literal(v.stop, names, consts)}, "
                f"{_literal(v.step, names, consts)})")
    if v is Ellipsis:
        return "..."
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, torch.device):
        return f"torch.device({str(v)!r})"
    if isinstance(v, (torch.memory_format, torch.layout)):
        return str(v)
    raise CodegenError(f"cannot print argument {v!r} ({type(v).__name__})")


def _index(v: Any, names: dict[int, str], consts: Callable[[Any], str]) -> str:
    """An indexing expression as Python subscript syntax (`:, 1:5:2`)."""
    def one(x: Any) -> str:
        if isinstance(x, slice):
            parts = ["" if p is None else _literal(p, names, consts) for p in (x.start, x.stop)]
            s = ":".join(parts)
            return s + (f":{_literal(x.step, names, consts)}" if x.step is not None else "")
        return _literal(x, names, consts)

    if isinstance(v, tuple):
        return ", ".join(one(x) for x in v) + ("," if len(v) == 1 else "")
    return one(v)


@contextlib.contextmanager
def _named_floats(op: Op, em: _Emitter, label: str) -> Iterator[Op]:
    """`op` as the compiled module reads it, for the recording: a copy whose float fields are
    `_Named` (`_f_<label>_<field>`; `label`: the instruction's first result), with the float
    constants of the modules its class is defined in (`_f_<NAME>`, one global per constant
    across the program) and `int` (`_IntMeta`) swapped in those modules until the recording
    ends."""
    named = copy.copy(op)
    if dataclasses.is_dataclass(op):
        for f in dataclasses.fields(op):
            value = getattr(op, f.name)
            if type(value) is float and math.isfinite(value):
                object.__setattr__(named, f.name, _Named(
                    value, em.float_global(f"{label}_{f.name}", value)))
    saved: list[tuple[dict[str, Any], str, Any]] = []
    modules = {c.__module__ for c in type(op).__mro__ if c.__module__.startswith("ir.")}
    try:
        for mod in sorted(modules):
            ns = vars(sys.modules[mod])
            for name, value in list(ns.items()):
                if name.startswith("_") or type(value) is not float or not math.isfinite(value):
                    continue
                key = (mod, name)
                if key not in em.constants:
                    em.constants[key] = em.float_global(name, value)
                saved.append((ns, name, value))
                ns[name] = _Named(value, em.constants[key])
            saved.append((ns, "int", ns.get("int", _MISSING)))
            ns["int"] = _TracedInt
        yield named
    finally:
        for ns, name, value in reversed(saved):
            if value is _MISSING:
                ns.pop(name, None)
            else:
                ns[name] = value


#: a module global that was not there
_MISSING = object()


def _record(inst: Inst, args: list, op: Op | None = None, symbolic: bool = False
            ) -> tuple[list, Any]:
    """The torch calls `op` (default: the instruction's) makes on `args`, and its result;
    `symbolic`: size queries give `_SymInt`s (a dynamic-shape program)."""
    import torch
    from torch.overrides import TorchFunctionMode

    calls: list = []

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, fargs: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*fargs, **kwargs)
            if fargs and out is fargs[0] and isinstance(out, torch.Tensor):
                # an in-place call returns its receiver: the op's code then goes on with the
                # call's result or with the receiver, two variables to Dynamo (the result is
                # a node of the graph, the receiver maybe a graph input, which a frame returns
                # as is). A new object on the same tensor tells which one the op used.
                out = out.detach()
            if symbolic and fargs and isinstance(fargs[0], torch.Tensor):
                out = _symbolic_query(func, fargs, kwargs, out)
            calls.append((func, fargs, kwargs, out))
            return out

    with torch.no_grad(), Recorder():
        res = (inst.op if op is None else op).torch(*args)
    return calls, res


def _tensors_in(out: Any) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in _tensors_in(x)]
    return []


def _emit_plain(inst: Inst, arg_exprs: list[str], types: list[TensorType], em: _Emitter,
                indent: str, keep: list) -> list[str]:
    """Lines computing `inst` from the named operands; returns the result expressions."""
    import torch

    global _methods
    if _methods is None:
        _methods = _tensor_methods()
    examples = [_example(t) for t in types]
    keep.extend(examples)
    label = py_name(inst.results[0].name) if inst.results else inst.op.name
    with _named_floats(em.op_of(inst), em, label) as named:
        calls, res = _record(inst, examples, named, symbolic=em.sym_env is not None)
    keep.append((calls, res))
    names: dict[int, str] = {id(x): e for x, e in zip(examples, arg_exprs, strict=True)}
    fnames = _function_names()

    def const(t: torch.Tensor) -> str:
        if t.numel() > 4096:
            raise CodegenError(f"{inst.op.name}: a tensor constant of {t.numel()} elements")
        name = em.fresh("c")
        data = t.detach().cpu()
        em.lines.append(f"{indent}{name} = torch.tensor({data.tolist()!r}, dtype={data.dtype})")
        names[id(t)] = name
        return name

    for func, fargs, kwargs, out in calls:
        lit = lambda v: _literal(v, names, const)  # noqa: E731
        fname = getattr(func, "__name__", "")
        mname = _methods.get(id(func))
        recv = fargs[0] if fargs else None
        if fname == "__setitem__" and isinstance(recv, torch.Tensor) and len(fargs) == 3:
            # an indexed write (`setitem`): a statement, it returns None
            em.lines.append(f"{indent}{lit(recv)}[{_index(fargs[1], names, const)}] = "
                            f"{lit(fargs[2])}")
            continue
        if out is None:
            # a call made for its effect alone (it returns nothing): dropping it would print
            # a program without that write
            raise CodegenError(f"{inst.op.name}: cannot print the torch call {func!r}, "
                               "which returns nothing (an effect)")
        outs = _tensors_in(out)
        if not outs:
            continue  # shape queries and the like: their values are folded into later calls
        if fname == "__getitem__" and isinstance(recv, torch.Tensor):
            expr = f"{lit(recv)}[{_index(fargs[1], names, const)}]"
        elif fname in _BINARY and len(fargs) == 2:
            expr = f"({lit(fargs[0])} {_BINARY[fname]} {lit(fargs[1])})"
        elif fname in _REVERSED and len(fargs) == 2:
            expr = f"({lit(fargs[1])} {_REVERSED[fname]} {lit(fargs[0])})"
        elif fname in _UNARY and len(fargs) == 1:
            op = _UNARY[fname]
            expr = f"abs({lit(fargs[0])})" if op == "abs" else f"({op}{lit(fargs[0])})"
        else:
            pieces = None
            if id(func) in fnames:
                callee, rest = fnames[id(func)], list(fargs)
            elif mname is not None and isinstance(recv, torch.Tensor):
                callee, rest = f"{lit(recv)}.{mname}", list(fargs[1:])
            else:
                raise CodegenError(f"{inst.op.name}: cannot name torch function {func!r}")
            pieces = [lit(a) for a in rest] + [f"{k}={lit(v)}" for k, v in kwargs.items()]
            expr = f"{callee}({', '.join(pieces)})"
        if isinstance(out, torch.Tensor):
            name = em.fresh()
            em.lines.append(f"{indent}{name} = {expr}")
            names[id(out)] = name
        else:
            name = em.fresh()
            em.lines.append(f"{indent}{name} = {expr}")
            for k, t in enumerate(out):
                if isinstance(t, torch.Tensor):
                    names[id(t)] = f"{name}[{k}]"
    results = [res] if len(inst.results) == 1 else list(res)
    exprs = []
    for t in results:
        if id(t) not in names:
            raise CodegenError(f"{inst.op.name}: a result the recorded calls did not make")
        exprs.append(names[id(t)])
    return exprs


def _graph_lines(g: Graph, em: _Emitter, indent: str, dialect: str, env: dict[str, str],
                 keep: list) -> list[str]:
    """Emit the instructions of `g` (its inputs already bound in `env`); returns the output
    expressions."""
    types = g.types()
    # the level's fixes as `TorchPlan` applies them (a graph with writes): its inputs as they
    # enter (the top's written ones stay the caller's: the module writes them), each result
    # as it is bound
    for name, how in em.fix_inputs.get(id(g), {}).items():
        if name in env and not (how == "clone" and g is em.top):
            em.lines.append(f"{indent}{env[name]} = {em.fix(env[name], how)}")
    fix_results = em.fix_results.get(id(g), {})
    for inst in g.insts:
        args = em.operands(inst, [env[a] for a in inst.args], [types[a] for a in inst.args])
        if inst.blocks:
            outs = _emit_control(inst, args, [types[a] for a in inst.args], em, indent, dialect,
                                 keep)
        else:
            outs = _emit_plain(inst, args, [types[a] for a in inst.args], em, indent, keep)
        for r, expr in zip(inst.results, outs, strict=True):
            name = py_name(r.name)
            fix = fix_results.get(r.name)
            em.lines.append(f"{indent}{name} = {expr if fix is None else em.fix(expr, fix)}")
            env[r.name] = name
    return [em.tensor(env[o], types[o]) for o in g.outputs]


def _bind(body: Graph, exprs: list[str], em: _Emitter, indent: str) -> dict[str, str]:
    env = {}
    # zip strict=False: the hop loop binds only the counter here (its carried inputs are the
    # body function's parameters)
    for v, e in zip(body.inputs, exprs, strict=False):
        em.lines.append(f"{indent}{py_name(v.name)} = {e}")
        env[v.name] = py_name(v.name)
    return env


def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _emit_if(inst: Inst, args: list[str], types: Sequence[TensorType], em: _Emitter, indent: str, dialect: str,
             keep: list, res: list[str]) -> list[str]:
    """`if`: a plain Python `if` on the predicate's value, or `torch.cond`."""
    n, ind2 = len(res), indent + "    "
    if dialect == "python":
        pred, *ops = args
        em.lines.append(f"{indent}if bool({pred}):")
        for k, body in enumerate(inst.blocks):
            if k == 1:
                em.lines.append(f"{indent}else:")
            env = _bind(body, ops, em, ind2)
            outs = _graph_lines(body, em, ind2, dialect, env, keep)
            em.lines.append(f"{ind2}{', '.join(res)}{',' if n == 1 else ''} = {_tuple(outs)}")
        return res
    pred, *ops = args
    fns = []
    for k, body in enumerate(inst.blocks):
        fn = em.fresh("then" if k == 0 else "else")
        params = [py_name(v.name) for v in body.inputs]
        em.lines.append(f"{indent}def {fn}({', '.join(params)}):")
        env = {v.name: py_name(v.name) for v in body.inputs}
        outs = _graph_lines(body, em, ind2, dialect, env, keep)
        em.lines.append(f"{ind2}return {_tuple([f'{o}.clone(memory_format=torch.contiguous_format)' for o in outs])}")
        fns.append(fn)
    fresh = _tuple([f"{a}.clone()" for a in ops])
    out = em.fresh("cond")
    em.lines.append(f"{indent}{out} = torch.cond({pred}, {fns[0]}, {fns[1]}, {fresh})")
    return [f"{out}[{k}]" for k in range(n)]


def _emit_loop(inst: Inst, args: list[str], types: Sequence[TensorType], em: _Emitter, indent: str, dialect: str,
               keep: list, res: list[str]) -> list[str]:
    """`loop`: a `for` over the trip count, or `torch.while_loop` with the counter carried."""
    n, ind2 = len(res), indent + "    "
    if dialect == "python":
        trip, *carried = args
        (body,) = inst.blocks
        em.lines.append(f"{indent}{_tuple(res)} = {_tuple(carried)}")
        i = em.fresh("i")
        em.lines.append(f"{indent}for {i} in range(int({trip})):")
        counter = i if em.form.numbers else f"torch.tensor({i}, dtype=torch.int64)"
        env = _bind(body, [counter, *res], em, ind2)
        if em.form.numbers:
            em.numbers.add(env[body.inputs[0].name])
        outs = _graph_lines(body, em, ind2, dialect, env, keep)
        em.lines.append(f"{ind2}{_tuple(res)} = {_tuple(outs)}")
        return res
    trip, *carried = args
    (body,) = inst.blocks
    cond_fn, body_fn = em.fresh("cond_fn"), em.fresh("body_fn")
    em.lines.append(f"{indent}def {cond_fn}(i, n, *vs):")
    em.lines.append(f"{ind2}return i < n")
    params = [py_name(v.name) for v in body.inputs[1:]]
    em.lines.append(f"{indent}def {body_fn}(i, n, {', '.join(params)}):")
    env = _bind(body, ["i"], em, ind2)
    if em.form.numbers:
        em.numbers.add(env[body.inputs[0].name])
    env.update({v.name: py_name(v.name) for v in body.inputs[1:]})
    outs = _graph_lines(body, em, ind2, dialect, env, keep)
    cl = [f"{o}.clone(memory_format=torch.contiguous_format)" for o in outs]
    em.lines.append(f"{ind2}return (i + 1, n.clone(), {', '.join(cl)})")
    em.uses_fresh = True
    out = em.fresh("final")
    em.lines.append(f"{indent}{out} = torch.while_loop({cond_fn}, {body_fn}, "
                    f"({'0' if em.form.numbers else 'torch.zeros((), dtype=torch.int64)'}, "
                    f"{trip}.clone(), "
                    f"*_fresh({_tuple(carried)})))")
    return [f"{out}[{k + 2}]" for k in range(n)]


def _emit_scan(inst: Inst, args: list[str], types: Sequence[TensorType], em: _Emitter, indent: str, dialect: str,
               keep: list, res: list[str]) -> list[str]:
    """`scan`: a `for` over the sequence with `torch.stack`, or torch's `scan`."""
    ind2 = indent + "    "
    op = cast(Scan, inst.op)  # the emitter of scans
    nc = op.num_carries
    reverse = bool(op.reverse)
    carries, xs = args[:nc], args[nc:]
    (body,) = inst.blocks
    n_ys = len(body.outputs) - nc
    if dialect == "python":
        c = [em.fresh("carry") for _ in carries]
        steps = em.fresh("steps")
        em.lines.append(f"{indent}{_tuple(c)} = {_tuple(carries)}")
        em.lines.append(f"{indent}{steps} = []")
        t = em.fresh("t")
        # a dynamic-shape program scans what each call gets
        if em.sym_env is not None:
            last = f"{xs[0]}.size(0) - 1"
            order = f"range({last}, -1, -1)" if reverse else f"range({xs[0]}.size(0))"
        else:
            length = int(types[nc].shape[0])
            order = f"range({length - 1}, -1, -1)" if reverse else f"range({length})"
        em.lines.append(f"{indent}for {t} in {order}:")
        env = _bind(body, [*c, *(f"{x}[{t}]" for x in xs)], em, ind2)
        outs = _graph_lines(body, em, ind2, dialect, env, keep)
        em.lines.append(f"{ind2}{_tuple(c)} = {_tuple(outs[:nc])}")
        em.lines.append(f"{ind2}{steps}.append({_tuple(outs[nc:])})")
        if reverse:
            em.lines.append(f"{indent}{steps}.reverse()")
        ys = [f"torch.stack([s[{k}] for s in {steps}])" for k in range(n_ys)]
        return [*c, *ys]
    em.uses_fresh = em.uses_scan = True
    fn = em.fresh("combine")
    em.lines.append(f"{indent}def {fn}(carry, x):")
    env = _bind(body, [f"carry[{k}]" for k in range(nc)] + [f"x[{k}]" for k in range(len(xs))],
                em, ind2)
    outs = _graph_lines(body, em, ind2, dialect, env, keep)
    em.lines.append(f"{ind2}return _fresh({_tuple(outs[:nc])}), _fresh({_tuple(outs[nc:])})")
    final, stacked = em.fresh("final"), em.fresh("ys")
    em.lines.append(f"{indent}{final}, {stacked} = scan({fn}, _fresh({_tuple(carries)}), "
                    f"_fresh({_tuple(xs)}), dim=0, reverse={reverse})")
    return [f"{final}[{k}]" for k in range(nc)] + [f"{stacked}[{k}]" for k in range(n_ys)]


#: the namespace a generated program registers its custom ops in (not the interpreter's, so
#: that checking the program in the process that made it runs the printed definition)
SOURCE_NAMESPACE = "dynsmith_src"


def _custom_definition(inst: Inst, em: _Emitter, keep: list) -> str:
    """Define the custom op of `inst` at module level (once per op): its body as a function,
    the op registered (once per process) with its real and fake kernels, `mutates_args` and,
    for a differentiable one, its autograd formula, as `ir.ops.custom.register` does."""
    op = cast(Custom, inst.op)  # the emitter of custom ops
    (body,) = inst.blocks
    qual = op.qualname(body).partition("::")[2]
    if qual in em.customs:
        return em.customs[qual]
    fn = py_name(op.label) if py_name(op.label) not in em.customs.values() else em.fresh(op.label)
    em.customs[qual] = fn
    lines, em.lines = em.lines, []
    params = [f"x{k}" for k in range(len(body.inputs))]
    em.lines.append(f"def _{fn}_body({', '.join(params)}):")
    env = _bind(body, params, em, "    ")
    outs = _graph_lines(body, em, "    ", "python", env, keep)
    em.lines.append(f"    return {_tuple(outs)}")
    m, n = len(op.mutates), len(body.outputs) - len(op.mutates)
    ret = "None" if n == 0 else f"outs[{m}]" if n == 1 else _tuple([f"outs[{m + j}]" for j in range(n)])
    args = ", ".join(params)
    mutated = _tuple([f'"x{k}"' for k in op.mutates])
    ns = f"torch.ops.{SOURCE_NAMESPACE}"
    em.lines += [
        "", "",
        f"# custom op {op.label}: registered once per process",
        f"if not hasattr({ns}, {qual!r}):",
        f"    def _{fn}_kernel({args}):",
        f"        outs = [o.clone(memory_format=torch.contiguous_format) for o in _{fn}_body({args})]",
        *(f"        x{k}.copy_(outs[{j}])" for j, k in enumerate(op.mutates)),
        f"        return {ret}",
        "",
        f"    def _{fn}_fake({args}):",
        f"        outs = [torch.empty_like(o, memory_format=torch.contiguous_format) for o in _{fn}_body({args})]",
        f"        return {ret}",
        "",
        f"    _{fn}_def = torch.library.custom_op({SOURCE_NAMESPACE + '::' + qual!r}, _{fn}_kernel,",
        f"                                        mutates_args={mutated},",
        f"                                        schema={op.schema(body)!r})",
        f"    _{fn}_def.register_fake(_{fn}_fake)"]
    if op.differentiable(body):
        fin = [k for k, v in enumerate(body.inputs) if v.type.dtype.is_float]
        fout = [j for j, t in enumerate(body.output_types()) if t.dtype.is_float]
        em.lines += [
            "",
            f"    def _{fn}_setup(ctx, inputs, output):",
            "        ctx.save_for_backward(*inputs)",
            "",
            f"    def _{fn}_backward(ctx, *grads):  # the body's vjp over its float inputs",
            "        xs = list(ctx.saved_tensors)",
            "",
            "        def of_floats(*fx):",
            "            full = list(xs)",
            f"            for k, x in zip({fin!r}, fx):",
            "                full[k] = x",
            f"            outs = _{fn}_body(*full)",
            f"            return tuple(outs[j] for j in {fout!r})",
            "",
            f"        _, vjp = torch.func.vjp(of_floats, *(xs[k] for k in {fin!r}))",
            f"        gin = vjp(tuple(grads[j] for j in {fout!r}))",
            f"        out = [None] * {len(body.inputs)}",
            f"        for k, g in zip({fin!r}, gin):",
            "            out[k] = g",
            "        return tuple(out)",
            "",
            f"    _{fn}_def.register_autograd(_{fn}_backward, setup_context=_{fn}_setup)"]
    em.lines += ["", f"{fn} = {ns}.{qual}", ""]
    em.defs += em.lines
    em.lines = lines
    return fn


def _region_definition(label: str, em: _Emitter, keep: list) -> str:
    """Define region `label`'s function at module level (once): marked
    `torch.compiler.nested_compile_region`, it runs the body its site object's `variant`
    selects, returning copies of the outputs that may alias, as `ir.ops.region` does."""
    assert em.regions is not None
    if label in em.region_fns:
        return em.region_fns[label]
    fn = em.fresh(f"region_{label}")
    em.region_fns[label] = fn
    lines, em.lines = em.lines, []
    variants = em.regions.variants[label]
    if not em.region_fns.keys() - {label}:  # the first region: the class of its sites
        em.defs += ["class RegionSite:",
                    '    """What a call passes its region: the body variant is an attribute '
                    'it reads (a guard)."""', "",
                    "    def __init__(self, variant):",
                    "        self.variant = variant", "", ""]
    em.lines += [f"# compile region {label}: {len(variants)} body variant(s)",
                 "@torch.compiler.nested_compile_region",
                 f"def {fn}(site, *xs):"]
    for v, body in enumerate(variants):
        em.lines.append(f"    if site.variant == {v}:")
        env = _bind(body, [f"xs[{k}]" for k in range(len(body.inputs))], em, "        ")
        outs = _graph_lines(body, em, "        ", "python", env, keep)
        copies = copied_outputs(body)
        outs = [f"{o}.clone()" if k in copies else o for k, o in enumerate(outs)]
        em.lines.append(f"        return {outs[0] if len(outs) == 1 else _tuple(outs)}")
    em.lines += ["    raise AssertionError(site.variant)", "", ""]
    em.lines += [f"{fn}_site{v} = RegionSite({v})" for v in range(len(variants))]
    em.lines += ["", ""]
    em.defs += em.lines
    em.lines = lines
    return fn


def _emit_region(inst: Inst, args: list[str], types: Sequence[TensorType], em: _Emitter,
                 indent: str, dialect: str, keep: list, res: list[str]) -> list[str]:
    """`region`: a call of its label's compile-region function (`_region_definition`) with
    the site object of its body variant, the operands that may alias passed as copies."""
    assert em.regions is not None
    site = em.regions.sites[id(inst.blocks[0])]
    fn = _region_definition(site.label, em, keep)
    operands = [f"{a}.clone()" if k in site.copied else a for k, a in enumerate(args)]
    call = f"{fn}({fn}_site{site.variant}, {', '.join(operands)})"
    if len(res) == 1:
        return [call]
    out = em.fresh("r")
    em.lines.append(f"{indent}{out} = {call}")
    return [f"{out}[{k}]" for k in range(len(res))]


def _emit_custom(inst: Inst, args: list[str], types: Sequence[TensorType], em: _Emitter,
                 indent: str, dialect: str, keep: list, res: list[str]) -> list[str]:
    """`custom`: a call of the custom op, defined at module level (`_custom_definition`)."""
    fn = _custom_definition(inst, em, keep)
    call = f"{fn}({', '.join(args)})"
    if not res:
        em.lines.append(f"{indent}{call}")
        return []
    if len(res) == 1:
        return [call]
    out = em.fresh("k")
    em.lines.append(f"{indent}{out} = {call}")
    return [f"{out}[{k}]" for k in range(len(res))]


#: torch code per control-flow op (the torch-source materializer's rule for each op)
_CONTROL_EMITTERS: dict[type[Op], Callable[..., list[str]]] = {
    If: _emit_if, Loop: _emit_loop, Scan: _emit_scan, Custom: _emit_custom,
    Region: _emit_region}


def _emit_control(inst: Inst, args: list[str], types: Sequence[TensorType], em: _Emitter, indent: str, dialect: str,
                  keep: list) -> list[str]:
    """The torch code of a control-flow instruction, by its op's emitter (each gets the fresh
    names of the results, for the forms that assign them)."""
    emit = _CONTROL_EMITTERS.get(type(inst.op))
    if emit is None:
        raise CodegenError(f"no torch code generator for control-flow op {inst.op.name!r}")
    return emit(inst, args, types, em, indent, dialect, keep, [em.fresh("r") for _ in inst.results])


def torch_source(g: Graph, dialect: str = "python", form: TorchForm = DEFAULT_FORM,
                 trainable: frozenset[str] = frozenset(), verify: bool = True,
                 dyn: DynShape | None = None) -> str:
    """Python source defining `Model(params)`: an `nn.Module` whose buffers (or parameters, or
    numbers: `form`) are the params (`p_<name>`, like `ir.materialize.to_torch.GraphModule`) and
    whose forward takes the graph inputs in order and returns the tuple of the outputs, in
    control-flow `dialect` and `form` (module doc); a gradient test's leaf params
    (`trainable`) are `nn.Parameter`s that require grad. `verify`: the source is run against
    the interpreter on example values first (`self_check`: outputs and written inputs).
    Raises CodegenError (also when that check finds a difference).

    `dyn`: a dynamic-shape test's symbolic dims (docs/dynshape.md; `g` is input set 0's
    graph): one program for every assignment, which binds each symbol to the size of the
    first input dim that is it (`B = x0.size(0)`), computes the attributes that depend on the
    symbols from them and prints every size query of the op's code as the query; the check
    runs it on example values of each assignment (`instantiate`)."""
    from ir.analysis.inplace import pure_form

    if form.inplace == "functional":
        g = pure_form(g)
    src = _source(g, dialect, form, trainable, dyn)
    if verify:
        graphs = [g] if dyn is None else [instantiate(g, dyn, a) for a in dyn.assignments]
        for k, gk in enumerate(graphs):
            problem = self_check(src, gk, dialect, form)
            if problem is not None:
                at = f" (shape assignment {dyn.shape_labels()[k]})" if dyn is not None else ""
                raise CodegenError(f"the generated torch code computes something else than "
                                   f"the interpreter{at}: {problem}")
    return src


def _source(g: Graph, dialect: str, form: TorchForm, trainable: frozenset[str],
            dyn: DynShape | None = None) -> str:
    from ir.analysis.inplace import has_effects, torch_plan


    keep: list = []  # keeps recorded tensors alive: their ids name them
    em = _Emitter(form)
    em.regions = plan_regions(g)
    if dyn is not None:
        _bind_symbols(g, dyn, em, "        ")
    if has_effects(g):  # the copies and contiguous bases the torch module's plan makes
        plan = torch_plan(g)
        em.top = g
        for key, lv in plan.levels.items():
            em.fix_inputs[key], em.fix_results[key] = dict(lv.fix_inputs), dict(lv.fix_results)
    env = {v.name: py_name(v.name) for v in g.inputs}
    ind = "        "
    # the 0-d params the number form holds as Python numbers (as `FormParams` decides)
    fixed = torch_plan(g).fixed_inputs() if has_effects(g) else frozenset()
    number_params = sorted(p.name for p in g.params
                           if form.numbers and p.type.rank == 0 and p.name not in fixed
                           and p.name not in trainable)
    for p in g.params:
        em.lines.append(f"{ind}{py_name(p.name)} = self.p_{p.name}")
        env[p.name] = py_name(p.name)
        if p.name in number_params:
            em.numbers.add(py_name(p.name))
    outs = _graph_lines(g, em, ind, dialect, env, keep)
    em.lines.append(f"{ind}return {_tuple(outs)}")
    head = ["import torch"]
    if em.uses_scan:
        head.append("from torch._higher_order_ops.scan import scan")
    head.append("")
    import re

    code = "\n".join([*em.defs, *em.lines])
    floats = {name: value for name, value in em.floats.items()
              if re.search(rf"\b{name}\b", code)}  # the ones the recorded calls read
    if floats:
        head += ["# floats the module reads from its ops and their modules' constants, not literals",
                 "# (under dynamic=True Dynamo makes each a SymFloat, as in the module the fuzzer compiled)",
                 *(f"{name} = {value!r}" for name, value in floats.items()), ""]
    if em.uses_fresh:
        head += ["", "def _fresh(ts):",
                 "    return tuple(t.clone(memory_format=torch.contiguous_format) for t in ts)", ""]
    if em.defs:
        head += ["", *em.defs]
    inputs = ", ".join(py_name(v.name) for v in g.inputs)
    if form.params == "parameter":
        register = ["            self.register_parameter(f\"p_{name}\", torch.nn.Parameter(",
                    "                torch.from_numpy(value), requires_grad=False))"]
    else:
        register = ["            self.register_buffer(f\"p_{name}\", torch.from_numpy(value))"]
    if trainable:  # a gradient test's leaf params
        register = [f"            if name in {sorted(trainable)!r}:",
                    "                self.register_parameter(f\"p_{name}\", torch.nn.Parameter(",
                    "                    torch.from_numpy(value)))",
                    "                continue", *register]
    if number_params:  # the number form's 0-d params: Python numbers
        register = [f"            if name in {number_params!r}:",
                    "                setattr(self, f\"p_{name}\", value.item())",
                    "                continue", *register]
    cls = ["", "class Model(torch.nn.Module):",
           f'    """The graph as plain torch code ({form.label(dialect)}: control flow and '
           'form)."""', "",
           "    def __init__(self, params):",
           "        super().__init__()",
           "        for name, value in params.items():",
           *register, "",
           f"    def forward(self{', ' if inputs else ''}{inputs}):"]
    return "\n".join(head + cls + em.lines) + "\n"


def _bind_symbols(g: Graph, dyn: DynShape, em: _Emitter, indent: str) -> None:
    """A dynamic-shape program's first lines: each symbol bound to the size of the first
    graph input dim that is it (`B = x0.size(0)`), and the emitter's symbols and the
    attributes that depend on them (`_Emitter.op_of`), valued at input set 0."""
    taken = {py_name(v.name) for v in (*g.inputs, *g.params)} | {"torch", "scan", "self"}
    at0 = dyn.assignment_of_set(0)
    em.sym_env = {}
    for sym, (i, axis) in dyn.sources(g).items():
        if not sym.isidentifier() or keyword.iskeyword(sym) or sym in taken:
            raise CodegenError(f"symbol {sym!r} cannot be a Python variable of the program")
        em.lines.append(f"{indent}{sym} = {py_name(g.inputs[i].name)}.size({axis})")
        em.sym_env[sym] = _SymInt(at0[sym], ("sym", sym))
    em.sym_attrs = {key: {k: parse_attr(v) for k, v in attrs.items()}
                    for key, attrs in dyn.attrs.items()}


def _form_of(src: str) -> TorchForm:
    """The form a `torch_source` module states in its docstring (the default when none)."""
    import re

    from ir.materialize.form import parse_label

    m = re.search(r"The graph as plain torch code \(([^:()]*): control flow and form\)", src)
    if m is None:
        return DEFAULT_FORM
    try:
        return parse_label(m.group(1))[1]
    except ValueError:
        return DEFAULT_FORM


#: how `check_source` starts its answer when the interpreter itself failed on the values, and
#: when the generated code did
INTERPRETER_FAILED = "the interpreter failed: "
GENERATED_FAILED = "the generated code failed: "


def check_source(src: str, g: Graph, values: dict[str, np.ndarray],
                 form: TorchForm | None = None) -> str | None:
    """Run the generated module and the interpreter (`GraphModule`, python dialect, `form`:
    by default the one the source states) on copies of `values`; None when they agree, else
    what differs. Compared: the outputs, then every graph input afterwards, since a module
    writes its arguments in place (`setitem`, `fill_`, ...: a write the source lacks shows
    there even when no output reads it). The functional form writes nothing: its reference
    is the graph's pure form."""
    import torch

    from ir.materialize.to_torch import GraphModule

    form = _form_of(src) if form is None else form

    def xs() -> list:  # fresh copies per run: a graph may write its inputs in place
        return [torch.from_numpy(np.array(values[v.name], order="C", copy=True))
                for v in g.inputs]

    try:
        params = {p.name: np.array(values[p.name], order="C", copy=True) for p in g.params}
        got_in, want_in = xs(), xs()
        with torch.no_grad():
            want = GraphModule(g, params, form=form).eval()(*want_in)
    except Exception as e:
        return f"{INTERPRETER_FAILED}{type(e).__name__}: {e}"
    ns: dict[str, Any] = {}
    try:
        exec(compile(src, "<generated>", "exec"), ns)
        with torch.no_grad():
            got = ns["Model"](params)(*got_in)
    except Exception as e:
        return f"{GENERATED_FAILED}{type(e).__name__}: {e}"
    if len(got) != len(want):
        return f"{len(got)} outputs vs {len(want)}"
    labels = [f"output {k}" for k in range(len(want))] + \
        [f"input %{v.name} (after the run)" for v in g.inputs]
    for what, a, b in zip(labels, [*got, *got_in], [*want, *want_in], strict=True):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            return f"{what}: {type(a).__name__} vs {type(b).__name__}"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{what}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
        if not torch.equal(a, b) and not torch.allclose(a.double(), b.double(), rtol=1e-6,
                                                        atol=1e-7, equal_nan=True):
            return f"{what}: values differ"
    return None


def example_values(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Values of every input and param of `g` like the recording's examples (`_example`:
    floats in [0.5, 1.5), ints 1, bools true), drawn from `seed`."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in (*g.inputs, *g.params):
        t = v.type
        shape = tuple(int(d) for d in t.shape)
        out[v.name] = (rng.uniform(0.5, 1.5, shape).astype(t.dtype.numpy) if t.dtype.is_float
                       else np.ones(shape, dtype=t.dtype.numpy))
    return out


def self_check(src: str, g: Graph, dialect: str = "python",
               form: TorchForm = DEFAULT_FORM) -> str | None:
    """`check_source` on example values (`example_values`): what differs, or None, also when
    there is nothing to judge: the interpreter itself fails on these values (values an op's
    validity depends on), or the generated code of a higher-order-op `dialect` raises (eager
    `torch.cond` and `torch.while_loop` run through Dynamo, whose failures can depend on what
    ran before in the process; a reproducer that raises shows it, unlike one computing
    something else)."""
    try:
        values = example_values(g)
    except Exception:
        return None
    problem = check_source(src, g, values, form)
    if problem is None or problem.startswith(INTERPRETER_FAILED):
        return None
    if dialect != "python" and problem.startswith(GENERATED_FAILED):
        return None
    return problem
