"""Known bugs' triggers (campaign/known.py): a reduced graph's op skeleton matches the larger
tests that hold it, and not a new pattern; triggers load from a bugs table's bug folders."""
from __future__ import annotations

from campaign.known import Trigger, load_triggers, matching, skeleton
from campaign.triage.pipeline.buckets import Bucket, BucketKey, write_bugs_table
from ir.core.text import parse, print_graph

REDUCED = """graph main(%x: f32[4]) {
  %a = atan(%x) : f32[4]
  %b = sin(%a) : f32[4]
  return %b
}"""

#: holds atan -> sin (shapes, params and more ops around it): the known bug again
SAME_AGAIN = """graph main(%x: f32[2,3], %w: param f32[2,3]) {
  %m = mul(%x, %w) : f32[2,3]
  %a = atan(%m) : f32[2,3]
  %b = sin(%a) : f32[2,3]
  %c = exp(%b) : f32[2,3]
  return %c
}"""

#: both ops, but not atan feeding sin: a new pattern
NEW_PATTERN = """graph main(%x: f32[4]) {
  %s = sin(%x) : f32[4]
  %a = atan(%s) : f32[4]
  return %a
}"""

IF_BUG = """graph main(%p: b8[], %x: f32[3]) {
  %r = if(%p, %x) : f32[3] {
    graph then(%t: f32[3]) {
      %u = neg(%t) : f32[3]
      %v = abs(%u) : f32[3]
      return %v
    }
    graph else(%e: f32[3]) {
      return %e
    }
  }
  return %r
}"""


def test_skeleton_has_signatures_and_producer_consumer_edges_bodies_included():
    assert skeleton(parse(REDUCED)) == (frozenset({"atan(f32)->f32", "sin(f32)->f32"}),
                                        frozenset({("atan", "sin")}))
    sigs, edges = skeleton(parse(IF_BUG))
    assert sigs == {"if", "neg(f32)->f32", "abs(f32)->f32"}
    assert edges == {("neg", "abs")}


def test_a_dynamic_shape_bugs_trigger_matches_dynamic_shape_tests_only():
    """F18's max_pool1d specializes a symbolic length: a static test of the same skeleton
    cannot hit it, so it is not held back."""
    from campaign.triage.pipeline.note_known import ROOT, note_triggers

    f18 = [t for t in note_triggers(ROOT / "docs" / "findings") if t.dynamic_shapes and t.backend == "inductor"
           and "maxpool1d(f32)->f32" in t.sigs]
    assert len(f18) == 1
    pool = parse("graph main(%x: f32[3,8,6]) {\n  %v = maxpool1d[kernel=[2], stride=[2], "
                 "padding=[0]](%x) : f32[3,8,3]\n  %w = relu(%v) : f32[3,8,3]\n  return %w\n}")
    assert matching(f18, pool, ["inductor"], dynamic_shapes=True) == {"inductor": f18[0].bucket}
    assert matching(f18, pool, ["inductor"]) == {}


def test_a_trigger_matches_the_bug_again_but_not_a_new_pattern():
    ops, edges = skeleton(parse(REDUCED))
    known = [Trigger("tvm-crash-0123456789", "tvm", ops, edges)]
    assert matching(known, parse(SAME_AGAIN), ["ort", "tvm"]) == {"tvm": "tvm-crash-0123456789"}
    assert matching(known, parse(NEW_PATTERN), ["ort", "tvm"]) == {}
    assert matching(known, parse(SAME_AGAIN), ["ort"]) == {}  # another backend's bug
    in_f64 = SAME_AGAIN.replace("f32", "f64")  # the same ops on another dtype: not this bug
    assert matching(known, parse(in_f64), ["tvm"]) == {}


def test_a_bug_that_needs_a_drawn_option_holds_back_only_on_a_spec_that_sets_it():
    """A bucket reduced to `fullgraph=false` of `inductor?dialect=mixed` (a drawn option):
    most of that backend's tests run without it, so its trigger holds back nothing there; on
    a backend spec that sets the option itself it holds back its repeats."""
    ops, edges = skeleton(parse(REDUCED))
    drawn = Trigger("inductor-crash-0123456789", "inductor?dialect=mixed", ops, edges,
                    "fullgraph=false")
    assert matching([drawn], parse(SAME_AGAIN), ["inductor?dialect=mixed"]) == {}
    spec = "inductor?dialect=mixed&fullgraph=false"
    own = Trigger("inductor-crash-9876543210", spec, ops, edges, "fullgraph=false")
    assert matching([own], parse(SAME_AGAIN), [spec]) == {spec: "inductor-crash-9876543210"}


def test_load_triggers_from_a_bugs_table(tmp_path):
    reduced = parse(REDUCED)
    bug = Bucket(BucketKey("tvm", "cpu", "crash", "compile", "InternalError: x"),
                 reduced_insts=2, confirmed=True)
    folder = tmp_path / "bugs" / bug.key.id
    folder.mkdir(parents=True)
    (folder / "graph.gir").write_text(print_graph(reduced))
    bug.artifact_path = f"bugs/{bug.key.id}"
    unreduced = Bucket(BucketKey("ort", "cpu", "crash", "run", "Fail: y"))  # no graph: none
    ours = Bucket(BucketKey("ort", "cpu", "invalid", "reference", "Nan"), reduced_insts=1)
    write_bugs_table(tmp_path / "bugs.parquet", [bug, unreduced, ours])

    triggers = load_triggers([tmp_path])
    assert triggers == [Trigger(bug.key.id, "tvm",
                                frozenset({"atan(f32)->f32", "sin(f32)->f32"}),
                                frozenset({("atan", "sin")}))]
    assert load_triggers([tmp_path / "bugs.parquet", tmp_path]) == triggers  # once each
    assert load_triggers([tmp_path / "nothing-here"]) == []
