"""The interpreter: the one loop that evaluates a graph instruction by instruction.

Modelled on torch.fx's `Interpreter`: `run` walks a graph level's instructions in order over an
environment (value name -> value), evaluating each (fx's `run_node`) through named hooks, and a
subclass changes what happens at a hook without writing a loop of its own.
Bodies of control-flow instructions are never walked here: the op decides when and how often a
body runs (`Op.torch_call`: once, per trip, per step, or under torch.cond / while_loop), and each
run comes back through `run_body`, which interprets the body as a graph level of its own.

The hooks, in the order they are called (`fixes` and `start` once per level, the rest per
instruction):
  - `fixes(g)`: what the level's values pass through, and what it derives from its inputs,
    as they enter its environment (`Fixes`, data: see below);
  - `start(g, env)`: the level's values before its first instruction;
  - `before_inst(g, index, inst, args)`: the operands have been read (checks, side looks);
  - `op_of(g, index, inst, values)`: the op whose `torch_call` runs; each body run it asks for
    goes through `run_body(g, index, inst, body, args)`;
  - `after_call(g, index, inst, values)`: the call returned; its results are not bound yet;
  - `on_result(g, index, inst, r, t, values)`, per result `r`, once it is bound to `t`.

The subclasses: `ir.materialize.to_torch.TorchInterpreter` (the eager reference and the torch module's
forward, with an optional per-result hook), `ir.analysis.inplace.TorchPlan`'s interpreter (views and
in-place writes on torch), `ir.materialize.dynshape.DynInterpreter` (attributes computed from the inputs'
sizes), `ir.numerics.domain`'s checked evaluation (the validity rules, explore mode and the
control-flow trace).

Everything the torch module's forward runs is traced by Dynamo (torch.compile, torch.export).
Where the "python" dialect graph-breaks (an `if` on a predicate's value), Dynamo splits the
program at the calls on the way to the break, frame by frame, so the frames matter to what the
compiler gets: the loop calls `torch_call` itself (no per-instruction method in between) and a
body's run comes back through exactly one call, `run_body`, to `run` of the body, as the
interpreter loops did before they were one. A graph break inside the loop makes Dynamo run the
loop's frame eagerly, and then every hook called from it is a frame Dynamo compiles on its
own: so hooks on that path do no work on tensors or their sizes (and must not graph-break).
What is computed from tensors as they enter the environment (the in-place plan's copies, the
dynamic-shape module's sizes) is given as data, `Fixes`, whose callables are builtins (a C
function or a `functools.partial` of one makes no Python frame): applied by the loop itself,
they run eagerly or are traced with it, as inline code would be.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ir.core.graph import Graph, Inst, Value
from ir.core.op import Op


@dataclass(frozen=True)
class Fixes:
    """What one level computes from its tensors as they enter its environment, applied by the
    loop itself; every callable is a builtin (see the module doc: no Python frame).

    `inputs`: as the level starts, in order, each given input or param through its callable
    (None: looked up, left as it is); then `derived`: new entries of the environment, name ->
    (the value it is computed from, the callable); `results`: each result through its callable
    as it is bound."""

    inputs: Mapping[str, Callable[[Any], Any] | None] = field(default_factory=dict)
    derived: Mapping[str, tuple[str, Callable[[Any], Any]]] = field(default_factory=dict)
    results: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)


NO_FIXES = Fixes()


class Interpreter:
    """Evaluates graphs with each op's `torch_call` in one control-flow `dialect` ("python":
    plain if/for on concrete values; "hop": torch's higher-order ops).

    Owns the order of evaluation: instructions in program order, each one's operands read
    before it runs and its results bound after, all at once (`Inst` semantics), a body only
    when its op runs it. The values of a level are one dict, returned by `run`; a body gets a
    dict of its own, holding only its inputs at the start (bodies are closed)."""

    def __init__(self, dialect: str = "python", numbers: bool = False):
        self.dialect = dialect
        #: the `number` scalars form (`ir.materialize.form`): values may be Python numbers or
        #: SymInts (the loop counter, 0-d params given as numbers); each reaches an op as a
        #: number only where the op takes one (`Op.number_operand`), else as a 0-d tensor of
        #: its dtype, and a body's outputs are tensors
        self.numbers = numbers

    # ---- the loop --------------------------------------------------------------------------
    def run(self, g: Graph, env: Mapping[str, Any]) -> dict[str, Any]:
        """Every value of `g`'s level by name, given values for its inputs and params (fx's
        `run`; each pass of the loop is fx's `run_node`)."""
        fixes = self.fixes(g)
        values = self.start(g, env)
        for name, fix in fixes.inputs.items():
            if name not in values:
                continue
            if fix is not None:
                values[name] = fix(values[name])
        for name, (source, fix) in fixes.derived.items():
            values[name] = fix(values[source])
        for index, inst in enumerate(g.insts):
            args = [values[a] for a in inst.args]
            if self.numbers:
                args = number_args(g, inst, args)
            self.before_inst(g, index, inst, args)
            # the op is called from this frame and its bodies come back through one call
            # (run_body): a graph break in an op splits the frames Dynamo traces the same way
            # for every subclass (see the module doc)
            res = self.op_of(g, index, inst, values).torch_call(
                args, inst.blocks, partial(self.run_body, g, index, inst), self.dialect,
                numbers=self.numbers)
            self.after_call(g, index, inst, values)
            if len(inst.results) == 1:
                res = (res,)
            for r, t in zip(inst.results, res, strict=True):
                fix = fixes.results.get(r.name)
                if fix is not None:
                    t = fix(t)
                values[r.name] = t
                self.on_result(g, index, inst, r, t, values)
        return values

    # ---- hooks -----------------------------------------------------------------------------
    def fixes(self, g: Graph) -> Fixes:
        """What level `g` computes from its tensors as they enter its environment. Default:
        nothing."""
        return NO_FIXES

    def start(self, g: Graph, env: Mapping[str, Any]) -> dict[str, Any]:
        """The values of level `g` before its first instruction: a copy of `env`."""
        return dict(env)

    def before_inst(self, g: Graph, index: int, inst: Inst, args: list) -> None:
        """Called with the operands before the instruction runs. Default: nothing."""

    def op_of(self, g: Graph, index: int, inst: Inst, values: dict[str, Any]) -> Op:
        """The op that runs for the instruction (its `torch_call`), given the level's values so
        far. Default: its own."""
        return inst.op

    def run_body(self, g: Graph, index: int, inst: Inst, body: Graph, args: Sequence) -> list:
        """One run of `body` (a block of instruction `index` of `g`) on `args`, when the op
        asks for it: the body's outputs. Default: the body as a level of its own (`run`)."""
        values = self.run(body, {v.name: t for v, t in zip(body.inputs, args, strict=True)})
        if self.numbers:
            return tensor_outputs(body, values)
        return [values[o] for o in body.outputs]

    def after_call(self, g: Graph, index: int, inst: Inst, values: dict[str, Any]) -> None:
        """Called when the instruction has run, before its results are bound. Default: nothing."""

    def on_result(self, g: Graph, index: int, inst: Inst, r: Value, t: Any,
                  values: dict[str, Any]) -> None:
        """Called when result `r` of the instruction has been bound to `t` in `values` (its
        fix applied): a subclass may check it, or bind another value. Default: nothing."""


# ---- the `number` scalars form ----------------------------------------------------------------

def is_number(v: Any) -> bool:
    """A Python number or a SymInt/SymFloat/SymBool (not a tensor)."""
    import torch

    return isinstance(v, (bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool))


def scalar_tensor(v: Any, dtype: Any) -> Any:
    """A number as the 0-d tensor of GraphIR dtype `dtype` it stands for."""
    import torch

    return torch.scalar_tensor(v, dtype=dtype.torch)


def number_args(g: Graph, inst: Inst, args: list) -> list:
    """The operands of `inst` as its op takes them in the `number` form: a number stays one at
    the op's `number_operand` position when operand 0 is a tensor, and becomes a 0-d tensor
    of its GraphIR dtype everywhere else."""
    if not any(is_number(a) for a in args):
        return args
    types = g.types()
    keep = inst.op.number_operand
    out = list(args)
    for k, a in enumerate(args):
        if is_number(a) and not (k == keep and not is_number(args[0])):
            out[k] = scalar_tensor(a, types[inst.args[k]].dtype)
    return out


def tensor_outputs(g: Graph, values: Mapping[str, Any]) -> list:
    """`g`'s outputs from `values`, numbers as 0-d tensors of their dtype."""
    outs = [values[o] for o in g.outputs]
    if not any(is_number(v) for v in outs):
        return outs
    types = g.types()
    return [scalar_tensor(v, types[o].dtype) if is_number(v) else v
            for o, v in zip(g.outputs, outs, strict=True)]
