"""Numerical validity of a graph's values: the single check shared by the reference and the
input search.

A value set is valid when, at every instruction, (1) every `Op.domain` violation of its inputs is
zero, (2) every float result is finite and (3) every int result satisfies
|x| < 2**(bits/2 - 1), which keeps every product of two values and every sum of up to
2**(bits/2 - 2) values exact, so no backend can legitimately differ by wrapping around.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ir.analysis.inplace import InplaceError, functionalize, has_writes
from ir.core.graph import Graph, Inst, Value
from ir.core.interpreter import Interpreter
from ir.core.op import Op
from ir.core.paths import Path, Site
from ir.ops.control import is_control


@dataclass
class Violation:
    #: instruction index at the top level (for a violation inside a body: the top-level
    #: control-flow instruction holding it; the message names the inner instruction)
    index: int
    message: str
    #: differentiable violation measures (sum > 0), or empty when not differentiable
    penalties: list[torch.Tensor]
    #: where the violating instruction is (`ir.core.paths.Site`, e.g. (3, 1, 0) for instruction 0 of
    #: body 1, an if's else, of instruction 3); () when unknown (an input)
    path: Site | tuple[()] = ()
    #: found in a body the run did not run (explore mode: an if's other branch, the body of a
    #: loop at zero trips), not on the path the inputs run
    not_taken: bool = False


#: whether validity includes differentiability (`differentiable`)
_DIFFERENTIABLE: ContextVar[bool] = ContextVar("differentiable", default=False)


@contextmanager
def differentiable(on: bool = True) -> Iterator[None]:
    """Within it, a value set is valid only where every op is also differentiable
    (`Op.kinks` joins `Op.domain`): what a gradient test's inputs must meet. Every check
    made inside (the input search, the repair, the coverage sets, the reference) sees it, as
    `torch.enable_grad` reaches every call under it."""
    token = _DIFFERENTIABLE.set(on)
    try:
        yield
    finally:
        _DIFFERENTIABLE.reset(token)


def checks_kinks() -> bool:
    """Whether validity includes differentiability here (`differentiable`)."""
    return _DIFFERENTIABLE.get()


def int_limit(dtype: torch.dtype) -> int:
    return 2 ** (torch.iinfo(dtype).bits // 2 - 1)


def _as_numpy(t: torch.Tensor) -> np.ndarray | None:
    """`t`'s data as a numpy array without a copy (None for dtypes numpy lacks: bfloat16). For
    tiny tensors a numpy reduction costs a third of torch's dispatch, and the checks below run
    on every value of every evaluation of the input search."""
    if t.dtype is torch.bfloat16 or t.is_complex():
        return None
    try:
        return t.detach().numpy()
    except (RuntimeError, TypeError):  # a tensor numpy cannot share (a lazy neg/conj view)
        return None


def any_positive(p: torch.Tensor) -> bool:
    """Whether a violation measure is violated anywhere (some element > 0)."""
    a = _as_numpy(p)
    return bool((a > 0).any()) if a is not None else bool((p.detach() > 0).any())


def result_problem(name: str, t: torch.Tensor) -> str | None:
    if t.dtype.is_floating_point:
        a = _as_numpy(t)
        finite = np.isfinite(a).all() if a is not None else torch.isfinite(t).all()
        if not bool(finite):
            return f"value %{name} is not finite"
    elif t.dtype in (torch.int32, torch.int64) and t.numel():
        a = _as_numpy(t)
        lo, hi = (a.min(), a.max()) if a is not None else (t.min(), t.max())
        peak = max(int(hi), -int(lo))  # python ints: no wrap-around at -2**63
        if peak >= int_limit(t.dtype):
            return f"value %{name} reaches {peak} (>= {int_limit(t.dtype)}: integer overflow risk)"
    return None


class _Invalid(Exception):
    def __init__(self, violation: Violation):
        self.violation = violation


#: called after each run of a control-flow instruction with its site (`ir.numerics.flow_coverage.sites`:
#: "3", "3/0/1", ...), the indices of the bodies it ran, in order (an if: [0] then or [1]
#: else; a loop: [0] per trip), and the values of the graph or body it is in (by name)
ControlTrace = Callable[[str, list[int], dict[str, torch.Tensor]], None]


class _Checked(Interpreter):
    """The checked evaluation of one graph level (`ir.core.interpreter`), raising _Invalid at the
    first invalid instruction: before it runs, its operands are checked against `Op.domain`;
    as each result is bound, it is checked (`result_problem`). Bodies of control-flow
    instructions (if, loop, scan; nested ones too) run as the op decides (its "python"
    dialect: once, per trip, per step), each on an instance of their own through the same
    checks, and a violation found in one is lifted to this level (`_lifted`). `explore`: every
    `if` also runs (and checks) the branch it does not take, and every loop running zero trips
    its body once on the initial carried values, untraced, results discarded. `trace` (None:
    untraced) sees every run of a control-flow instruction, before its results are bound.

    An instance runs one level: `where` prefixes its messages, `scope` is the level's place
    (its trace sites are `scope.site(index)`); the running instruction's label, site and the
    bodies it ran (`ran`) are attributes."""

    def __init__(self, trace: ControlTrace | None, explore: bool, where: str = "",
                 scope: Path = Path()):
        super().__init__("python")
        self.trace = trace
        self.explore = explore
        self.where = where
        self.scope = scope
        self.label, self.here = "", ""
        self.ran: list[int] = []
        #: gradient tests: differentiability is checked too (`differentiable`)
        self.kinks = checks_kinks()

    # override ignored: this interpreter takes the caller's dict itself, not any mapping
    def start(self, g: Graph, env: dict[str, torch.Tensor]  # type: ignore[override]
              ) -> dict[str, torch.Tensor]:
        return env  # the caller's dict: what was computed stays readable after a violation

    def before_inst(self, g: Graph, index: int, inst: Inst, args: list) -> None:
        label = self.label = f"{self.where}inst {index} ({inst.op.name})"
        self.here = str(self.scope.site(index)) if inst.blocks else ""  # only traced sites
        self.ran = []
        penalties = [p for p in inst.op.domain(*args) if any_positive(p)]
        if penalties:
            raise _Invalid(Violation(index, f"{label}: inputs outside the op's safe domain",
                                     penalties, Site((index,))))
        if self.kinks:
            penalties = [p for p in inst.op.kinks(*args) if any_positive(p)]
            if penalties:
                raise _Invalid(Violation(index, f"{label}: inputs at a point where the op is "
                                         "not differentiable", penalties, Site((index,))))
        if self.explore and is_control(inst.op):
            for k, body_args, note in inst.op.unexplored(args):
                body = inst.blocks[k]
                _explore(body, body_args, f"{label} > {body.name} ({note}): ", index, k)

    def op_of(self, g: Graph, index: int, inst: Inst, values: dict[str, Any]) -> Op:
        return inst.op.transparent()  # every value checked, a custom op's body's too

    def run_body(self, g: Graph, index: int, inst: Inst, body: Graph,
                 body_args: Sequence) -> list[torch.Tensor]:
        inner = {v.name: t for v, t in zip(body.inputs, body_args, strict=True)}
        k = next(i for i, b in enumerate(inst.blocks) if b is body)
        self.ran.append(k)
        try:
            _Checked(self.trace, self.explore, f"{self.label} > {body.name}: ",
                     self.scope.into(index, k)).run(body, inner)
        except _Invalid as e:  # a violation inside a body is this instruction's, at this level
            raise _Invalid(_lifted(e.violation, index, k)) from None
        return [inner[o] for o in body.outputs]

    def after_call(self, g: Graph, index: int, inst: Inst,
                   values: dict[str, torch.Tensor]) -> None:
        if self.trace is not None and inst.blocks:
            self.trace(self.here, self.ran, values)

    def on_result(self, g: Graph, index: int, inst: Inst, r: Value, t: torch.Tensor,
                  values: dict[str, torch.Tensor]) -> None:
        problem = result_problem(r.name, t)
        if problem:
            raise _Invalid(Violation(index, f"{self.label}: {problem}", [], Site((index,))))


def _lifted(v: Violation, index: int, block: int, not_taken: bool = False) -> Violation:
    """A violation found in body `block` of instruction `index`, as seen at that level."""
    return replace(v, index=index, path=Site((index, block, *v.path)),
                   not_taken=v.not_taken or not_taken)


def _explore(body: Graph, operands: list[torch.Tensor], where: str, index: int,
             block: int) -> None:
    inner = {v.name: t for v, t in zip(body.inputs, operands, strict=True)}
    try:
        _Checked(None, True, where).run(body, inner)
    except _Invalid as e:
        raise _Invalid(_lifted(e.violation, index, block, not_taken=True)) from None


def evaluate_checked(g: Graph, env: Mapping[str, torch.Tensor], trace: ControlTrace | None = None,
                     explore: bool = False) -> tuple[dict[str, torch.Tensor], Violation | None]:
    """Evaluate `g` instruction by instruction and stop at the first invalid one; `trace`
    observes which bodies every control-flow instruction ran; `explore` checks the branches
    not taken and the bodies of loops running zero trips too, on the same operands (so that
    other input sets can run them: `ir.numerics.flow_coverage`).

    Returns every value computed so far and the violation (None when all values are valid)."""
    if has_writes(g):  # in-place writes: checked on the functionalized graph (docs/inplace.md)
        return _evaluate_functionalized(g, env, trace, explore)
    values = dict(env)
    for name, t in env.items():
        problem = result_problem(name, t)
        if problem:
            return values, Violation(-1, problem, [])
    try:
        _Checked(trace, explore).run(g, values)
    except _Invalid as e:
        return values, e.violation
    return values, None


# ---------------------------------------------------------------------------------------------
# validity: checked on the functionalized graph

_LABEL = re.compile(r"^inst (\d+) \(([^)]*)\)")


def _evaluate_functionalized(g: Graph, env: Mapping[str, torch.Tensor],
                             trace: ControlTrace | None, explore: bool
                             ) -> tuple[dict[str, torch.Tensor], Violation | None]:
    """`evaluate_checked` for a graph with in-place writes: the functionalized graph
    is evaluated and checked (same values, every one of them checked; no mutation, so the
    input search's gradients flow), and the results are mapped back: the violation's index
    and the trace's sites name the original instructions, and each original output name
    holds its final contents."""
    try:
        fn = functionalize(g)
    except InplaceError as e:  # e.g. a repair dropped what made it well-defined: drop more
        return dict(env), Violation(e.index, e.summary, [])
    tr = None if trace is None else (lambda site, ran, values: trace(fn.site(site), ran, values))
    values, violation = evaluate_checked(fn.graph, env, tr, explore)
    for o, fo in zip(g.outputs, fn.graph.outputs, strict=True):
        if fo in values:
            values[o] = values[fo]
    if violation is not None and violation.index >= 0:
        k = violation.index
        orig = fn.origin[k]
        m = _LABEL.match(violation.message)
        message = violation.message
        if m:
            message = (f"inst {orig} ({g.insts[orig].op.name}), functionalized inst {m.group(1)} "
                       f"({m.group(2)})" + message[m.end():])
        # the functionalized graph's body paths do not name the original's instructions
        violation = replace(violation, index=orig, message=message, path=Site((orig,)))
    return values, violation
