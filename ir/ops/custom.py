"""Custom operators: an instruction whose body is the kernel of a `torch.library.custom_op`.

    %r = custom[label=k0, mutates=[0]](%a, %b) : f32[3] {
      graph k0(%a1: f32[2,3], %b1: f32[3]) { ... return %new_a, %r1 }
    }

The body is a closed, straight-line, pure graph over the operands. Its first `len(mutates)`
outputs are the new contents of the operands named by `mutates` (operand indices, ascending):
the instruction overwrites their whole storage with them (`Effect.mutates`), as a custom op
declared with `mutates_args` writes its arguments; the rest of the outputs are the
instruction's results, new values (a custom op cannot return an alias of its inputs). A read of
a mutated operand, or of any view of its storage, after the instruction sees the new contents
(docs/inplace.md). The in-place rules hold for it as for an in-place op (`ir.analysis.inplace`):
no writes to params or body inputs, no overlapping operands.

Materialization (torch): each distinct op (label, body, mutates) is registered once per
process as `dynsmith::<label>_<digest>` (`register`):
  - the real CPU kernel runs the body's torch code eagerly, then copies the new contents into
    the mutated arguments and returns fresh contiguous results;
  - the fake kernel runs the body's torch code on the fake arguments (so a symbolic shape goes
    through as the types say) and returns empty tensors of the results' shapes;
  - `mutates_args` names exactly the operands in `mutates` (the schema: `Tensor(a0!) x0`);
  - a pure op with a float operand and result gets an autograd formula
    (`register_autograd`): the body's vjp (`torch.func.vjp`), which compilers trace into the
    backward graph. torch refuses autograd formulas on mutating custom ops, so a test that
    differentiates holds only pure ones (`ir.gen.custom`).
The program calls the registered op (Dynamo sees an opaque call, functionalization and
Inductor's re-inplacing see `mutates_args`). `ir.materialize.to_torch.GraphModule` registers its
graph's ops when it is built, before any compile; `torch_call` registers one when it runs
eagerly and finds it missing.

ONNX: the functionalized graph (pure form: `mutates` empty, the new contents are results) lowers
the body as a model-local function (domain `dynsmith`), called by one node.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import Interpreter
from ir.core.names import Names
from ir.core.op import PURE, Effect, RunBlock
from ir.core.text import print_graph
from ir.core.types import TensorType
from ir.ops.call import BodyCall

#: the torch library namespace every custom op is registered in
NAMESPACE = "dynsmith"


class _EffectOfMutates:
    """`Custom.effect`: an instance's `Effect(mutates=...)` (PURE when it writes nothing);
    the class's is PURE, as asked of every op class."""

    def __get__(self, op: Custom | None, cls: type | None = None) -> Effect:
        if op is None or not op.mutates:
            return PURE
        return Effect(mutates=tuple(op.mutates))


@dataclass(frozen=True)
class Custom(BodyCall):
    """`results = custom[label, mutates](operands) { body }`: see the module doc."""

    name: ClassVar[str] = "custom"
    torch_hop: ClassVar[str] = "torch.library.custom_op"
    #: the kernel returns fresh tensors, never an operand's memory
    torch_may_alias: ClassVar[bool] = False

    #: measured on 2.13 (eager, CPU). The reverse-mode transforms refuse the autograd formula
    #: `register_autograd` makes ("In order to use an autograd.Function with functorch
    #: transforms ... it must override the setup_context staticmethod"); forward mode runs
    #: but gives zero tangents (no jvp rule), which a reference must not compute; vmap runs
    #: the op per sample through the batching fallback (kept out until measured as a surface)
    eager_transform_refusals: ClassVar[Mapping[str, str]] = {
        **{t: "autograd.Function without functorch support" for t in ("grad", "vjp", "jacrev")},
        **{t: "no jvp rule: eager's tangents are zeros" for t in ("jvp", "jacfwd")},
        "vmap": "no batching rule (the fallback loops per sample)"}

    mutates: tuple[int, ...] = ()

    effect = _EffectOfMutates()  # per instance: its `mutates`

    @property
    def written(self) -> tuple[int, ...]:
        return self.mutates

    def with_written(self, written: tuple[int, ...]) -> Custom:
        return replace(self, mutates=written)

    def problem(self, ins: Sequence[TensorType]) -> str | None:
        m = list(self.mutates)
        if m != sorted(set(m)):
            return f"mutates {m}: operand indices must be distinct and ascending"
        if m and (m[0] < 0 or m[-1] >= len(ins)):
            return f"mutates {m}: the op has {len(ins)} operands"
        return None

    def body_problem(self, inst: Inst) -> str | None:
        if inst.blocks or not inst.op.effect.pure:
            return (f"body holds {inst.op.name}: a custom op's body is straight-line pure "
                    f"code (no control flow, views or in-place writes)")
        return None

    def pure_form(self) -> Custom:
        """The op computing the new contents as results (functionalization's form)."""
        return replace(self, mutates=())

    # ---- torch -------------------------------------------------------------------------------
    def qualname(self, body: Graph) -> str:
        """`dynsmith::<label>_<digest>`: one name per distinct (label, mutates, body)."""
        digest = hashlib.sha1(f"{self.label}|{list(self.mutates)}|{print_graph(body)}".encode())
        return f"{NAMESPACE}::{self.label}_{digest.hexdigest()[:12]}"

    def schema(self, body: Graph) -> str:
        """The op's torch schema: each operand a Tensor (`Tensor(aK!)` when mutated)."""
        args = ", ".join(f"Tensor(a{k}!) x{k}" if k in self.mutates else f"Tensor x{k}"
                         for k in range(len(body.inputs)))
        n = len(body.outputs) - len(self.mutates)
        rets = "()" if n == 0 else "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
        return f"({args}) -> {rets}"

    def differentiable(self, body: Graph) -> bool:
        """Whether the op gets an autograd formula: pure, with a float operand and result."""
        return (not self.mutates and any(v.type.dtype.is_float for v in body.inputs)
                and any(t.dtype.is_float for t in body.output_types()))

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        import torch

        (body,) = blocks
        if not torch.compiler.is_compiling():
            register(self, body)
        # under Dynamo, the op registered for this very body (printing it is not traceable)
        out = _BY_BODY[id(body), self.label, self.mutates][1](*args)
        n = len(body.outputs) - len(self.mutates)
        if n == 0:
            return ()
        return out if n == 1 else list(out)

    def function_name(self, body: Graph) -> str:
        return self.qualname(body).partition("::")[2]

    def transparent(self) -> Custom:
        return SeenThrough(self.label, self.mutates)


@dataclass(frozen=True)
class SeenThrough(Custom):
    """A custom op whose call runs its body through the interpreter (`run_block`: checked,
    traced, differentiable by the input search) instead of the registered kernel, with the
    kernel's semantics: the new contents copied into the mutated operands, fresh results.
    Not registered as an op of its own (`Op.transparent`)."""

    def torch_call(self, args: list, blocks: Sequence[Graph], run_block: RunBlock,
                   dialect: str = "python", numbers: bool = False) -> Any:
        outs = list(run_block(blocks[0], list(args)))
        m = len(self.mutates)
        for j, k in enumerate(self.mutates):
            args[k].copy_(outs[j].clone())
        res = outs[m:]
        return () if not res else res[0] if len(res) == 1 else res


# ---- registration ------------------------------------------------------------------------------

#: qualified name -> the registered op (per process; a name is one definition: `qualname`)
_REGISTERED: dict[str, Any] = {}
#: (id of a body, label, mutates) -> (that body, its registered op): what a traced call
#: looks up (the body is kept so that its id is not reused)
_BY_BODY: dict[tuple[int, str, tuple[int, ...]], tuple[Graph, Any]] = {}


def _body_fn(body: Graph) -> Callable[..., list]:
    """The body's torch code as a function of its inputs (its outputs, in order)."""
    interp = Interpreter("python")

    def run(*xs: Any) -> list:
        values = interp.run(body, {v.name: x for v, x in zip(body.inputs, xs, strict=True)})
        return [values[o] for o in body.outputs]
    return run


def register(op: Custom, body: Graph, qualname: str | None = None) -> Any:
    """Register `op` with `body` as a torch custom op (once per process); returns it.
    `qualname`: under that name instead of its own (`Custom.qualname`), replacing what is
    registered there: a cache test's near-twin takes the test's op's name with another schema
    (`campaign.modes.cache`; `unregister` frees the name again)."""
    key = (id(body), op.label, op.mutates)
    known = _BY_BODY.get(key)
    if qualname is None and known is not None and known[0] is body:
        return known[1]
    q = op.qualname(body) if qualname is None else qualname
    if qualname is not None and q in _REGISTERED:
        unregister(q)
    have = _REGISTERED.get(q)
    if have is None:
        have = _REGISTERED[q] = _define(op, body, q)
    _BY_BODY[key] = (body, have)
    return have


def unregister(qualname: str) -> None:
    """Remove the op registered as `qualname` from torch and from this process's tables."""
    custom = _REGISTERED.pop(qualname, None)
    if custom is None:
        return
    custom._lib._destroy()
    for key in [k for k, (_, c) in _BY_BODY.items() if c is custom]:
        del _BY_BODY[key]


def _define(op: Custom, body: Graph, q: str) -> Any:
    import torch

    fn = _body_fn(body)
    m = len(op.mutates)
    mutates = tuple(op.mutates)

    def kernel(*xs: Any) -> Any:
        outs = [o.clone(memory_format=torch.contiguous_format) for o in fn(*xs)]
        for j, k in enumerate(mutates):
            xs[k].copy_(outs[j])
        res = outs[m:]
        return None if not res else res[0] if len(res) == 1 else tuple(res)

    def fake(*xs: Any) -> Any:
        res = [torch.empty_like(o, memory_format=torch.contiguous_format) for o in fn(*xs)[m:]]
        return None if not res else res[0] if len(res) == 1 else tuple(res)

    custom = torch.library.custom_op(q, kernel, mutates_args=tuple(f"x{k}" for k in mutates),
                                     schema=op.schema(body))
    custom.register_fake(fake)
    if op.differentiable(body):
        _register_autograd(custom, body, fn)
    return custom


def _register_autograd(custom: Any, body: Graph, fn: Callable[..., list]) -> None:
    """The body's vjp as the op's backward: over its float inputs, from its float outputs."""
    import torch

    fin = [k for k, v in enumerate(body.inputs) if v.type.dtype.is_float]
    fout = [j for j, t in enumerate(body.output_types()) if t.dtype.is_float]
    n_in = len(body.inputs)

    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.save_for_backward(*inputs)

    def backward(ctx: Any, *grads: Any) -> tuple:
        xs = list(ctx.saved_tensors)

        def of_floats(*fx: Any) -> tuple:
            full = list(xs)
            for k, x in zip(fin, fx, strict=True):
                full[k] = x
            outs = fn(*full)
            return tuple(outs[j] for j in fout)

        _, vjp = torch.func.vjp(of_floats, *(xs[k] for k in fin))[:2]
        gin = vjp(tuple(grads[j] for j in fout))
        out: list = [None] * n_in
        for k, g in zip(fin, gin, strict=True):
            out[k] = g
        return tuple(out)

    custom.register_autograd(backward, setup_context=setup_context)


def register_all(g: Graph) -> None:
    """Register every custom op of `g` (bodies included): before a compiler traces it."""
    for inst, _ in g.walk():
        if isinstance(inst.op, Custom):
            register(inst.op, inst.blocks[0])


# ---- inlining ----------------------------------------------------------------------------------

def holds_custom(g: Graph) -> bool:
    """Whether an instruction of `g`, at any depth, is a custom op."""
    return any(isinstance(inst.op, Custom) for inst, _ in g.walk())


def inline_custom(g: Graph, names: Names | None = None) -> Graph:
    """`g` with every custom instruction (in bodies too) replaced by its body in place
    (`inline_inst`): the same program without the custom ops (what the rounding spread
    perturbs inside)."""
    names = Names.of(g) if names is None else names
    rename: dict[str, str] = {}
    insts: list[Inst] = []
    for inst in g.insts:
        inst = replace(inst, args=tuple(rename.get(a, a) for a in inst.args))
        if isinstance(inst.op, Custom):
            made, results = inline_inst(inst, names.suffixed)
            insts += made
            rename.update(results)
        else:
            insts.append(replace(inst, blocks=tuple(inline_custom(b, names) for b in inst.blocks)))
    return replace(g, insts=tuple(insts), outputs=tuple(rename.get(o, o) for o in g.outputs))


def inline_inst(inst: Inst, fresh: Callable[[str], str]) -> tuple[list[Inst], dict[str, str]]:
    """Custom instruction `inst` as straight-line code in its place: the body's instructions
    on the operands, then each mutated operand overwritten with its new contents by `copy_`;
    a body output that is a body input is cloned first (a result is new storage, and a later
    write must not reach it). Returns the instructions and, per result, the value holding it.
    `fresh(hint)`: a new value name."""
    from ir.ops.inplace import CopyInPlace
    from ir.ops.views import Clone

    op = cast(Custom, inst.op)
    (body,) = inst.blocks
    env = {v.name: a for v, a in zip(body.inputs, inst.args, strict=True)}
    out = [Inst(b.op, tuple(env.get(x, x) for x in b.args), b.results, b.blocks)
           for b in body.insts]
    types = body.types()
    outs: list[str] = []
    for o in body.outputs:
        if o in env:  # an input passed through: a copy of it
            v = Value(fresh(o), types[o])
            out.append(Inst(Clone(), (env[o],), (v,)))
            outs.append(v.name)
        else:
            outs.append(o)
    m = len(op.mutates)
    for j, k in enumerate(op.mutates):
        w = Value(fresh(inst.args[k]), types[body.outputs[j]])
        out.append(Inst(CopyInPlace(), (inst.args[k], outs[j]), (w,)))
    return out, {r.name: o for r, o in zip(inst.results, outs[m:], strict=True)}
