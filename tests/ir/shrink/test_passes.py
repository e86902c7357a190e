"""The reducer's passes (`ir.shrink.passes`) ask the op: control flow is unwrapped the ways each
op offers (`ControlFlow.inlinings`), and every candidate verifies."""
from __future__ import annotations

import ir
from ir.shrink.passes import pass_unwrap_control

GRAPH = """graph main(%x0: f32[1,3], %x1: i64[], %x2: f32[3], %x3: b8[]) {
  %v3 = loop(%x1, %x2) : f32[3] {
    graph body(%i0: i64[], %b0: f32[3]) {
      %b1 = sin(%b0) : f32[3]
      return %b1
    }
  }
  %v4, %v5 = scan[num_carries=1, reverse=false](%v3, %x0) : f32[3], f32[1,3] {
    graph body(%c0: f32[3], %s0: f32[3]) {
      %c1 = mul(%c0, %s0) : f32[3]
      %c2 = cos(%c1) : f32[3]
      return %c1, %c2
    }
  }
  %v6 = if(%x3, %v5) : f32[1,3] {
    graph then(%t0: f32[1,3]) {
      %t1 = neg(%t0) : f32[1,3]
      return %t1
    }
    graph else(%e0: f32[1,3]) {
      return %e0
    }
  }
  return %v6
}"""


class _Ctx:
    def env(self) -> dict:
        return {}


def test_each_control_flow_op_is_unwrapped_the_ways_it_offers():
    g = ir.verify(ir.parse(GRAPH))
    cands = list(pass_unwrap_control(_Ctx(), g))
    assert [c.desc for c in cands] == [
        "loop %v3 -> zero trips", "loop %v3 -> its body once",
        "scan %v4 -> its body once (length 1)",
        "if %v6 -> its then branch", "if %v6 -> its else branch"]
    for c in cands:
        ir.verify(c.graph)
    ops = [sorted(i.op.name for i, _ in c.graph.walk()) for c in cands]
    assert "loop" not in ops[0] and "sin" not in ops[0]
    assert "loop" not in ops[1] and "sin" in ops[1]
    assert "scan" not in ops[2] and {"squeeze", "unsqueeze", "mul", "cos"} <= set(ops[2])
    assert "if" not in ops[3] and "neg" in ops[3]
    assert "if" not in ops[4] and "neg" not in ops[4]
