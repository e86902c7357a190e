"""Scopes: a rewrite inside a body (at any depth) gets what it needs from outside threaded in
through every enclosing if/loop/scan, up to new graph inputs and params."""
from __future__ import annotations

import random

from ir import GenConfig, parse, verify
from ir.core.dtypes import DType
from ir.core.paths import Path
from ir.core.span import span
from ir.core.types import TensorType
from mutators.scope import builder, copy_graph, put, scopes

NESTED = """
graph main(%x: f32[2,3], %n: i64[], %t: f32[], %w: param f32[3,3]) {
  %s = reduce_sum[axis=0, keepdim=false](%x) : f32[3]
  %s2 = reduce_sum[axis=0, keepdim=false](%s) : f32[]
  %c = gt(%s2, %t) : b8[]
  %y = if(%c, %x, %n) : f32[2,3] {
    graph then(%a: f32[2,3], %m: i64[]) {
      %l = loop(%m, %a) : f32[2,3] {
        graph body(%i: i64[], %b: f32[2,3]) {
          %q = tanh(%b) : f32[2,3]
          return %q
        }
      }
      return %l
    }
    graph else(%e: f32[2,3], %m2: i64[]) {
      %e2 = neg(%e) : f32[2,3]
      return %e2
    }
  }
  %z, %ys = scan[num_carries=1, reverse=false](%s, %y) : f32[3], f32[2,3] {
    graph body(%h: f32[3], %xt: f32[3]) {
      %h2 = add(%h, %xt) : f32[3]
      return %h2, %h2
    }
  }
  return %z, %ys
}"""


def test_scopes_list_every_body_with_its_depth_and_whether_it_iterates():
    g = verify(parse(NESTED))
    got = {(s.path, s.depth, s.iterated) for s in scopes(g)}
    assert got == {((), 0, False), (((3, 0),), 1, False), (((3, 0), (0, 0)), 2, True),
                   (((3, 1),), 1, False), (((4, 0),), 1, True)}


def test_needs_are_threaded_through_if_loop_and_scan_to_new_graph_inputs_and_params():
    g = verify(parse(NESTED))
    b = builder(g, random.Random(0), GenConfig())
    for path in [((3, 0), (0, 0)), ((3, 1),), ((4, 0),)]:
        body = Path(path).at(g)
        last = body.outputs[0]
        t = body.types()[last]
        need_in = body.inputs[0].__class__(b.fresh_name("b"), TensorType((), DType.float32))
        need_w = body.inputs[0].__class__(b.fresh_name("b"), TensorType((3,), DType.float32))
        mul = parse(f"""graph g(%p: {t}, %q: f32[], %r: f32[3]) {{
  %o = mul(%p, %q) : {t}
  %o2 = add(%o, %r) : {t}
  return %o2
}}""").insts
        from dataclasses import replace

        from ir.core.graph import Inst
        insts = [Inst(mul[0].op, (last, need_in.name), (replace(mul[0].results[0], name=b.fresh_name("v")),)),]
        insts.append(Inst(mul[1].op, (insts[0].results[0].name, need_w.name),
                          (replace(mul[1].results[0], name=b.fresh_name("v")),)))
        new_body = body.with_insts(body.insts + tuple(insts),
                                   (insts[1].results[0].name,) + body.outputs[1:])
        out = put(g, path, new_body, [(need_in, False), (need_w, True)], b.fresh_name)
        verify(out)
        assert len(out.inputs) == len(g.inputs) + 1 and len(out.params) == len(g.params) + 1
        assert out.output_types() == g.output_types()


def test_regions_know_their_live_ins_and_outs_and_copies_are_fresh():
    g = verify(parse(NESTED))
    r = span(g, 0, 3)
    assert r.ins == ("x", "t") and r.outs == ("s", "c")  # %s: the scan reads it too
    b = builder(g, random.Random(0), GenConfig())
    c = copy_graph(g, b.fresh_name)
    names = {v.name for v in g.all_values()}
    assert not names & {v.name for v in c.all_values()}
    verify(c)
