"""Test doubles for the triage: backends with an injected bug, loaded by dotted path
(`buggy_backends:WrongOnOp?op=atan`; this directory is on sys.path under pytest, and on
PYTHONPATH for the injected-bug campaign, see docs/triage.md). Not product code.

- `WrongOnOp(op)`: the reference's answer, except that every result of op `op` (nested ones
  too) is wrong: floats x -> 1.5x + 1, ints +1, bools negated.
- `CrashOnPattern(producer, consumer)`: raises at compile when an instruction of op `consumer`
  reads a result of op `producer` (at any nesting level); the message carries value names and
  shapes, which the signature normalizes away.
- `SegfaultOnOp(op)`: a SIGSEGV at compile when the graph contains op `op`.
- `HangOnOp(op, seconds)`: compiles for `seconds` (a hang) when the graph contains op `op`,
  on every attempt.
- `SlowOnce(seconds, marks)`: the first attempt at each test id compiles for `seconds`, later
  ones (the sandbox's confirming re-run) at once: a compile slow only under load. `marks` is
  a directory remembering the test ids seen (the attempts run in different processes).
- `BuggyWithOption(op, wrong, vectorize, unroll, fuse)`: a compiler with a configuration space
  (`CONFIG_SPACE`: `vectorize`, `unroll`, `fuse`) whose bug needs one option value: with
  `vectorize=true`, a graph holding op `op` crashes at compile (`wrong`: its results are wrong
  instead, a mismatch); `unroll` and `fuse` change nothing.
- `StaleAfterOther()`: the reference's answer for every call, except that a call whose
  inputs equal an earlier call's, made after another call, gets that other call's outputs (a
  cache entry served for inputs it was not made for: a repeat test's bug).
- `StaleWarmCache()`: takes cache tests (`campaign.modes.cache`): its warm compile of a test
  serves the near-twin's program (its graph run on the test's inputs: a cache key that misses
  what tells them apart), its cold one the test's; other tests as the reference. Its findings
  are reproduced as Inductor's (`repro_spec`: a cache test's repro.py runs torch's real
  caches, which do not have its bug).
- `BuggyInForm(scalars, params, inplace)`: torch eager on the test's module in the Python
  dialect, its configuration space the torch program forms (`FORM_SPACE`), which crashes at
  compile when the module it was given holds an `nn.Parameter` (the form `params=parameter`).
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np
import torch

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult
from campaign.backends.base import ReproSpec
from campaign.backends.configs import Option
from campaign.backends.eager import EagerBackend
from campaign.backends.forms import FORM_SPACE
from campaign.verdict import Stage
from ir.core.graph import Graph


def _perturb(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return ~t
    if t.dtype.is_floating_point:
        return t * 1.5 + 1
    return t + 1


def evaluate(g: Graph, env: dict, wrong_op: str | None = None) -> dict:
    """The reference interpreter (python dialect), with `wrong_op`'s results perturbed."""
    env = dict(env)

    def run_block(body: Graph, args) -> list:
        vals = evaluate(body, {v.name: t for v, t in zip(body.inputs, args, strict=True)}, wrong_op)
        return [vals[o] for o in body.outputs]

    for inst in g.insts:
        res = inst.op.torch_call([env[a] for a in inst.args], inst.blocks, run_block, "python")
        res = (res,) if len(inst.results) == 1 else tuple(res)
        if inst.op.name == wrong_op:
            res = tuple(_perturb(t) for t in res)
        for r, t in zip(inst.results, res, strict=True):
            env[r.name] = t
    return env


def outputs(m: Materialized, wrong_op: str | None = None) -> list[np.ndarray]:
    g = m.tc.graph
    outs = []
    for values in m.tc.value_sets():
        env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}
        with torch.no_grad():
            env = evaluate(g, env, wrong_op)
        outs += [env[o].numpy() for o in g.outputs]
    return outs


def find_pattern(g: Graph, producer: str, consumer: str) -> str | None:
    """A consumer instruction reading a producer's result, as text; None if there is none."""
    made = {r.name: inst for inst in g.insts if inst.op.name == producer for r in inst.results}
    for inst in g.insts:
        if inst.op.name == consumer:
            for a in inst.args:
                if a in made:
                    return f"%{inst.results[0].name} = {consumer}(%{a}) : {inst.results[0].type}"
        for b in inst.blocks:
            hit = find_pattern(b, producer, consumer)
            if hit:
                return hit
    return None


class WrongOnOp(Backend):
    def __init__(self, op: str = "atan"):
        self.name = "WrongOnOp"
        self.op = op

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        self.stage(Stage.COMPILE, lambda: None, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: outputs(m, self.op), result, "run_ms")


class StaleAfterOther(Backend):
    def __init__(self) -> None:
        self.name = "StaleAfterOther"

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        self.stage(Stage.COMPILE, lambda: None, result, "compile_ms")
        g, n = m.tc.graph, len(m.tc.graph.outputs)
        right = outputs(m)
        seen: list[dict[str, np.ndarray]] = []
        outs: list[np.ndarray] = []
        for k, values in enumerate(m.tc.value_sets()):
            again = any(all(np.array_equal(values[v.name], s[v.name]) for v in g.inputs)
                        for s in seen)
            outs += right[(k - 1) * n:k * n] if again and k else right[k * n:(k + 1) * n]
            seen.append(values)
        return outs


class StaleWarmCache(Backend):
    def __init__(self) -> None:
        self.name = "StaleWarmCache"

    def takes_cache_tests(self) -> bool:
        return True

    def repro_spec(self) -> ReproSpec | None:
        from campaign.backends import make_backend

        return make_backend("inductor").repro_spec()

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        from ir.materialize.to_torch import run_graph_torch

        self.stage(Stage.COMPILE, lambda: None, result, "compile_ms")
        right = outputs_of(m.tc.graph, m.tc.value_sets())
        if m.tc.cache is None:
            return right
        twin = m.tc.cache.twin_graph(m.tc)
        n = len(m.tc.graph.outputs)
        out: list[np.ndarray] = []
        for k, values in enumerate(m.tc.value_sets()):
            env = {x: torch.from_numpy(np.array(v, copy=True)) for x, v in values.items()}
            with torch.no_grad():
                stale = [t.numpy() for t in run_graph_torch(twin, env)][:n]
            out += stale + right[k * n:(k + 1) * n]
        return out


def outputs_of(g: Graph, sets: list[dict]) -> list[np.ndarray]:
    """`g`'s outputs on each value set (torch eager, views and writes as torch runs them)."""
    from ir.materialize.to_torch import run_graph_torch

    outs: list[np.ndarray] = []
    for values in sets:
        env = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in values.items()}
        with torch.no_grad():
            outs += [t.numpy() for t in run_graph_torch(g, env)]
    return outs


class PatternError(RuntimeError):
    pass


class CrashOnPattern(Backend):
    def __init__(self, producer: str = "relu", consumer: str = "add"):
        self.name = "CrashOnPattern"
        self.producer, self.consumer = producer, consumer

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        def compile_():
            hit = find_pattern(m.tc.graph, self.producer, self.consumer)
            if hit:
                raise PatternError(f"cannot fuse {self.producer} into {hit} at 0x7f3a2b10")

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: outputs(m), result, "run_ms")


class SegfaultOnOp(Backend):
    def __init__(self, op: str = "tanh"):
        self.name = "SegfaultOnOp"
        self.op = op

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        def compile_():
            if any(inst.op.name == self.op for inst, _ in m.tc.graph.walk()):
                ctypes.string_at(0)

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: outputs(m), result, "run_ms")


class HangOnOp(Backend):
    def __init__(self, op: str = "tanh", seconds: float = 600.0):
        self.name = "HangOnOp"
        self.op, self.seconds = op, seconds

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        def compile_():
            if any(inst.op.name == self.op for inst, _ in m.tc.graph.walk()):
                time.sleep(self.seconds)

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: outputs(m), result, "run_ms")


class SlowOnce(Backend):
    def __init__(self, seconds: float = 600.0, marks: str = ""):
        self.name = "SlowOnce"
        self.seconds, self.marks = seconds, marks

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        def compile_():
            mark = os.path.join(self.marks, m.tc.test_id)
            if not os.path.exists(mark):
                open(mark, "w").close()
                time.sleep(self.seconds)

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: outputs(m), result, "run_ms")


class OptionError(RuntimeError):
    pass


class BuggyWithOption(Backend):
    CONFIG_SPACE = (
        Option("vectorize", (False, True), "the option the injected bug needs"),
        Option("unroll", (1, 2, 4), "changes nothing"),
        Option("fuse", (True, False), "changes nothing"),
    )

    def __init__(self, op: str = "tanh", wrong: bool = False, vectorize: bool = False,
                 unroll: int = 1, fuse: bool = True):
        self.name = "BuggyWithOption"
        self.op, self.wrong = op, bool(wrong)
        self.vectorize, self.unroll, self.fuse = bool(vectorize), int(unroll), bool(fuse)

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        hit = self.vectorize and any(inst.op.name == self.op for inst, _ in m.tc.graph.walk())

        def compile_():
            if hit and not self.wrong:
                raise OptionError(f"vectorized {self.op} at 0x7f3a2b10")

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return self.stage(Stage.RUN, lambda: outputs(m, self.op if hit else None), result,
                          "run_ms")


class BuggyInForm(EagerBackend):
    CONFIG_SPACE = FORM_SPACE

    def __init__(self, scalars: str = "tensor", params: str = "buffer", inplace: str = "written"):
        super().__init__(dialect="python", scalars=scalars, params=params, inplace=inplace)
        self.name = "BuggyInForm"

    def _module(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        from ir.materialize.dynshape import torch_module

        module = torch_module(m.tc.graph, m.tc.dynshape, m.tc.params(), dialect="python",
                              form=self.form)

        def compile_():
            if any(True for _ in module.parameters()):
                raise OptionError("nn.Parameter weight at 0x7f3a2b10")

        self.stage(Stage.COMPILE, compile_, result, "compile_ms")
        return super()._module(m, result)


#: a mutating custom op (the cache and localization tests' program): its `schema` twin is the op made pure (its write dropped, so the twin
#: computes tanh(x * x), the test tanh(x * x - y))
WRITES = """graph main(%x: f32[2,5], %y: f32[5]) {
  %a = mul(%x, %x) : f32[2,5]
  %c = clone(%a) : f32[2,5]
  custom[label=w, mutates=[0]](%c, %y) : () {
    graph w(%c1: f32[2,5], %y1: f32[5]) {
      %n = sub(%c1, %y1) : f32[2,5]
      return %n
    }
  }
  %o = tanh(%c) : f32[2,5]
  return %o
}
"""
