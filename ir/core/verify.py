"""`verify(graph)`: the one judge of GraphIR well-formedness, in the style of JAX's check_jaxpr.

Checks, recursing into every sub-graph:
  - names are unique across the whole graph, nesting levels included;
  - every operand is defined earlier in the same graph (bodies are closed: they see only their own
    inputs), and every output is defined;
  - params (weights) appear only in the top-level graph;
  - types are concrete (positive int dims) and attributes concrete;
  - per op: arity, and the instruction's one type rule (`Op.type_rule`, which the reducer and
    the mutators ask too: accepted input dtypes, `Op.problem` (rules with a message of their
    own), `requires` holds, control-flow bodies fit (`Op.check_blocks`)); the declared result
    types equal the rule's;
  - graphs with views or in-place writes: the in-place analysis (`ir.analysis.inplace.check`: aliasing,
    overlaps, writes to params and body inputs, mutated inputs returned).
Failures raise `VerifyError`, whose first line names the failing instruction and the rule, and
whose remaining lines quote the instruction in context.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NoReturn

from ir.core.graph import Graph, Inst
from ir.core.op import Op, TypeRuleError
from ir.core.text import format_inst_head
from ir.core.types import TensorType


class VerifyError(ValueError):
    """An ill-formed graph. `summary` is the one-line reason; str() adds the quoted context."""

    def __init__(self, summary: str, context: str = ""):
        self.summary = summary
        self.context = context
        super().__init__(summary + ("\n" + context if context else ""))


#: the judges of memory effects (views, in-place writes: `Op.effect`), which the layers above
#: the core register: the in-place analysis' alias rules (`ir.analysis.inplace`, registered
#: when `ir` is imported). Each raises a `VerifyError` for an ill-defined graph.
EFFECT_CHECKS: list[Callable[[Graph], None]] = []


def register_effect_check(check: Callable[[Graph], None]) -> None:
    """Have `verify` run `check` on every graph with views or in-place writes."""
    if check not in EFFECT_CHECKS:
        EFFECT_CHECKS.append(check)


def verify(g: Graph) -> Graph:
    """Raise VerifyError if `g` is ill-formed; return `g` so calls can be chained."""
    _Checker().graph(g, path=f"graph {g.name}", top=True)
    if any(not inst.op.effect.pure for inst, _ in g.walk()):  # views, in-place writes
        if not EFFECT_CHECKS:  # pragma: no cover - `import ir` registers the in-place analysis
            raise RuntimeError("no check of memory effects is registered (import ir first)")
        for check in EFFECT_CHECKS:
            check(g)
    return g


def quote_context(g: Graph, index: int, radius: int = 2) -> str:
    """The instructions around `index`, the offending one marked `>>>`: what every error about
    an instruction quotes (the verifier's, the in-place analysis')."""
    lines = []
    for i in range(max(0, index - radius), min(len(g.insts), index + radius + 1)):
        mark = ">>> " if i == index else "    "
        lines.append(mark + format_inst_head(g.insts[i]))
    return "\n".join(lines)


def _type_problem(t: TensorType) -> str | None:
    for d in t.shape:
        if not isinstance(d, int) or isinstance(d, bool):
            return f"type {t} is not concrete"
        if d < 1:
            return f"type {t} has a dimension < 1"
    return None


class _Checker:
    def __init__(self) -> None:
        self.seen: set[str] = set()

    def define(self, name: str, t: TensorType, fail: Callable[[str], NoReturn]) -> None:
        if name in self.seen:
            fail(f"value %{name} is defined twice")
        self.seen.add(name)
        problem = _type_problem(t)
        if problem:
            fail(f"value %{name}: {problem}")

    def graph(self, g: Graph, path: str, top: bool) -> None:
        def fail_decl(msg: str) -> NoReturn:
            raise VerifyError(f"{path}: {msg}")

        if g.params and not top:
            fail_decl("params are only allowed in the top-level graph")
        scope: dict[str, TensorType] = {}
        for v in (*g.inputs, *g.params):
            self.define(v.name, v.type, fail_decl)
            scope[v.name] = v.type

        for index, inst in enumerate(g.insts):
            where = f"{path}, inst {index} ({inst.op.name})"

            def fail(msg: str, index: int = index, where: str = where) -> NoReturn:
                raise VerifyError(f"{where}: {msg}", quote_context(g, index))

            self.inst(inst, scope, where, fail)
            for r in inst.results:
                self.define(r.name, r.type, fail)
                scope[r.name] = r.type

        if not g.outputs:
            fail_decl("graph has no outputs")
        for o in g.outputs:
            if o not in scope:
                fail_decl(f"output %{o} is not defined")

    def inst(self, inst: Inst, scope: dict[str, TensorType], where: str,
             fail: Callable[[str], NoReturn]) -> None:
        op: Op = inst.op
        for a in inst.args:
            if a not in scope:
                fail(f"operand %{a} is not defined")
        arity = op.arity
        n = len(inst.args)
        if isinstance(arity, int) and n != arity:
            fail(f"expects {arity} operands, got {n}")
        if isinstance(arity, tuple) and not arity[0] <= n <= arity[1]:
            fail(f"expects {arity[0]} to {arity[1]} operands, got {n}")
        if op.num_results is not None and len(inst.results) != op.num_results:
            fail(f"binds {len(inst.results)} results, op has {op.num_results}")
        if not op.is_concrete:
            fail("attributes are not concrete")
        if inst.blocks and not op.takes_blocks:
            fail("op takes no sub-graphs")
        for b_index, block in enumerate(inst.blocks):
            self.graph(block, f"{where} > block {b_index} graph {block.name}", top=False)
        try:
            expected = op.type_rule([scope[a] for a in inst.args], inst.blocks)
        except TypeRuleError as e:
            fail(str(e))
        got = [r.type for r in inst.results]
        if expected != got:
            fail(f"result types {_fmt(got)} differ from the type rule's {_fmt(expected)}")


def _fmt(ts: Iterable[TensorType]) -> str:
    return "(" + ", ".join(str(t) for t in ts) + ")"
