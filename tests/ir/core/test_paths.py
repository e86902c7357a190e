"""ir/core/paths.py: one path type for places in nested bodies, and the control-flow op protocol
(ir/ops/control.py `ControlFlow`) that every pass asks instead of testing op names."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ir import GenConfig, generate, parse, verify
from ir.core.graph import Inst
from ir.core.paths import Path, Site, control_sites, scopes
from ir.core.types import TensorType
from ir.core.verify import VerifyError
from ir.ops.control import ControlFlow, If, Loop, Scan, is_control

NESTED = """graph g(%p: b8[], %x: f32[3], %n: i64[], %xs: f32[4,3]) {
  %a = if(%p, %x, %xs) : f32[3] {
    graph then(%t0: f32[3], %xs0: f32[4,3]) {
      %c, %s = scan[num_carries=1, reverse=false](%t0, %xs0) : f32[3], f32[4,3] {
        graph body(%h: f32[3], %e: f32[3]) {
          %h2 = add(%h, %e) : f32[3]
          return %h2, %h2
        }
      }
      return %c
    }
    graph else(%e0: f32[3], %es: f32[4,3]) {
      return %e0
    }
  }
  %b = loop(%n, %a) : f32[3] {
    graph body(%i: i64[], %v: f32[3]) {
      %v2 = neg(%v) : f32[3]
      return %v2
    }
  }
  return %b
}"""

CONTROL = GenConfig(p_if=0.3, p_loop=0.2, p_scan=0.2, max_depth=2)


def test_paths_name_scopes_and_sites_name_instructions():
    g = verify(parse(NESTED))
    assert [p for p, _ in scopes(g)] == [(), ((0, 0),), ((0, 0), (0, 0)), ((0, 1),), ((1, 0),)]
    assert [str(s) for s, _ in control_sites(g)] == ["0", "0/0/0", "1"]
    body = Path([(0, 0), (0, 0)]).at(g)
    assert body.insts[0].op.name == "add"
    site = Path([(0, 0), (0, 0)]).site(0)
    assert site == (0, 0, 0, 0, 0) and str(site) == "0/0/0/0/0" and site.inst(g) is body.insts[0]
    assert Site.parse("0/0/0").enclosing() == (Site((0,)), 0)
    assert Site.parse("0/0/0").scope == ((0, 0),) and Site.parse("0/0/0").index == 0
    assert Site((0, 0, 0, 0, 0)).within(Site((0,)), 0) and not Site((0, 0, 0)).within(Site((0,)), 1)
    assert not Site((1,)).within(Site((0,)))
    assert str(Path([(3, 1), (0, 0)])) == "3.1/0.0"
    assert [type(h.op) for h in Path([(0, 0), (0, 0)]).holders(g)] == [If, Scan]


def test_replace_at_changes_only_the_scope_it_names():
    g = verify(parse(NESTED))
    path = Path([(1, 0)])
    body = path.at(g)
    new = body.with_insts([Inst(body.insts[0].op.__class__(), body.insts[0].args,
                                body.insts[0].results)])
    assert path.replace_at(g, body) == g
    h = path.replace_at(g, new)
    assert path.at(h) == new and h.insts[0] == g.insts[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_every_scope_round_trips_through_its_path(seed):
    g = generate(seed, CONTROL)
    for path, body in scopes(g):
        assert path.at(g) == body
        assert path.replace_at(g, body) == g
    for site, inst in control_sites(g):
        assert site.inst(g) == inst and Site.parse(str(site)) == site
        assert site.scope.site(site.index) == site


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_the_protocol_agrees_with_the_verifier_on_generated_graphs(seed):
    """For every control-flow instruction: its bodies take what `body_inputs` says, `relate`
    gives the results the verifier inferred, and `passed_operand` / `operand_inputs` are
    inverse; pruning nothing away keeps the instruction as it is."""
    g = generate(seed, CONTROL)
    for site, inst in control_sites(g):
        op = inst.op
        assert is_control(op)
        types = site.scope.at(g).types()
        ins = [types[a] for a in inst.args]
        assert op.body_inputs(ins, len(inst.blocks)) == [[v.type for v in b.inputs] for b in inst.blocks]
        assert op.relate(ins, [b.output_types() for b in inst.blocks], _Check()) == \
            [r.type for r in inst.results]
        for k, body in enumerate(inst.blocks):
            for i in range(len(body.inputs)):
                pos = op.passed_operand(k, i)
                if pos is not None:
                    assert (k, i) in op.operand_inputs(pos) and ins[pos] == body.inputs[i].type
        kept = op.prune(inst, set(range(len(inst.results))), lambda b, keep: b)
        assert kept.results == inst.results


class _Check:
    """A concrete `Relation`: raises where the operands and bodies disagree."""

    def same(self, a, b):
        assert list(a) == list(b)

    def eq(self, a, b):
        assert a == b

    def fail(self, why):
        raise AssertionError(why)


def test_relate_states_the_constraints_a_wrong_body_breaks():
    g = verify(parse(NESTED))
    loop = g.insts[1]
    with pytest.raises(AssertionError):
        loop.op.relate([TensorType((), g.inputs[2].type.dtype), TensorType((3,), g.inputs[1].type.dtype)],
                       [[TensorType((4,), g.inputs[1].type.dtype)]], _Check())


SCAN_TOP = """graph g(%x: f32[3], %xs: f32[4,3]) {
  %c, %s = scan[num_carries=1, reverse=false](%x, %xs) : f32[3], f32[4,3] {
    graph body(%h: f32[3], %e: f32[3]) {
      %h2 = add(%h, %e) : f32[3]
      return %h2, %h2
    }
  }
  return %c, %s
}"""


@pytest.mark.parametrize("text", [NESTED, SCAN_TOP])
def test_add_operands_threads_a_value_into_each_kind_of_body(text):
    g = verify(parse(text))
    names = iter(f"fresh{i}" for i in range(100))
    extra = next(v for v in g.inputs if v.type.rank == 1)
    for site, inst in control_sites(g):
        if site.scope:
            continue  # the outer value must be visible: top-level sites only
        inner = [replace(extra, name=next(names))]
        new = inst.op.add_operands(inst, 0, inner, [extra.name], lambda prefix: next(names))
        insts = list(g.insts)
        insts[site.index] = new
        try:
            verify(g.with_insts(insts))
        except VerifyError as e:  # pragma: no cover - the message says which op broke
            pytest.fail(f"{inst.op.name} at {site}: {e}")
        assert len(new.args) == len(inst.args) + 1 and new.args.count(extra.name) == inst.args.count(extra.name) + 1


def test_unexplored_names_the_bodies_the_inputs_do_not_run():
    import torch

    assert If().unexplored([torch.tensor(True), torch.ones(3)])[0][0] == 1
    assert If().unexplored([torch.tensor(False), torch.ones(3)])[0][0] == 0
    assert Loop().unexplored([torch.tensor(2), torch.ones(3)]) == []
    (k, args, note), = Loop().unexplored([torch.tensor(0), torch.ones(3)])
    assert (k, note, int(args[0])) == (0, "not run", 0)
    assert not Scan.may_skip_bodies and Scan().unexplored([torch.ones(3), torch.ones(4, 3)]) == []


def test_every_control_flow_op_implements_the_whole_protocol():
    for cls in (If, Loop, Scan):
        assert issubclass(cls, ControlFlow)
        for rule in ("body_inputs", "passed_operand", "operand_inputs", "relate", "prune",
                     "add_operands"):
            assert rule in cls.__dict__, f"{cls.name} lacks {rule}"
