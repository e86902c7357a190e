"""Graph rewrites (`ir.core.rewrite`): removing instructions and reconnecting their uses."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from ir import GenConfig, generate, parse, verify
from ir.core.graph import Graph, Value
from ir.core.rewrite import remove_insts, remove_unused

CHAIN = """graph main(%x0: f32[3], %x1: f32[3]) {
  %v2 = relu(%x0) : f32[3]
  %v3 = add(%v2, %x1) : f32[3]
  %v4 = reduce_sum[axis=0, keepdim=false](%v3) : f32[]
  %v5 = neg(%v3) : f32[3]
  return %v4, %v5, %v2
}
"""


def test_every_use_of_a_removed_result_reads_its_replacement():
    g = verify(parse(CHAIN))
    asked = []

    def reconnect(r: Value, only_outputs: bool) -> str:
        asked.append((r.name, only_outputs))
        return "x1"

    out = remove_insts(g, [1], reconnect)
    assert asked == [("v3", False)]
    assert [i.args for i in out.insts] == [("x0",), ("x1",), ("x1",)]
    assert out.outputs == ("v4", "v5", "v2")
    verify(out)


def test_a_result_only_outputs_read_is_asked_as_such_and_without_a_value_its_outputs_go():
    g = verify(parse(CHAIN))
    asked = []

    def reconnect(r: Value, only_outputs: bool) -> None:
        asked.append((r.name, only_outputs))
        return None

    out = remove_insts(g, [3], reconnect)
    assert asked == [("v5", True)]
    assert out.outputs == ("v4", "v2") and len(out.insts) == 3
    assert remove_insts(g, [3], reconnect, keep_outputs=True) is None  # a body's signature


def test_removal_fails_when_an_instruction_still_reads_a_result_without_a_value():
    g = verify(parse(CHAIN))
    assert remove_insts(g, [1], lambda r, only: None) is None
    # ... unless its readers go too
    out = remove_insts(g, [1, 2, 3], lambda r, only: None)
    assert out.outputs == ("v2",) and [i.op.name for i in out.insts] == ["relu"]


def test_unread_results_are_not_asked_for_and_no_output_left_is_no_graph():
    g = verify(parse("""graph main(%x0: f32[3]) {
  %v1 = relu(%x0) : f32[3]
  %v2 = neg(%x0) : f32[3]
  return %v2
}
"""))
    out = remove_insts(g, [0], lambda r, only: (_ for _ in ()).throw(AssertionError(r)))
    assert [i.op.name for i in out.insts] == ["neg"]
    assert remove_insts(g, [0, 1], lambda r, only: None) is None


def _earlier_same_type(level: Graph, index: int, r: Value, gone: set[str]) -> str | None:
    """The latest value of `r`'s type defined before instruction `index` of `level`."""
    types = level.types()
    earlier = [v.name for v in (*level.inputs, *level.params)]
    for inst in level.insts[:index]:
        earlier += list(inst.result_names)
    same = [n for n in reversed(earlier) if types[n] == r.type and n not in gone]
    return same[0] if same else None


def _levels(g: Graph, path: tuple = ()):
    """Every graph level (the top, then each body, outer first) with its path of
    (instruction, block) indices."""
    yield path, g
    for i, inst in enumerate(g.insts):
        for k, body in enumerate(inst.blocks):
            yield from _levels(body, path + ((i, k),))


def _with_level(g: Graph, path: tuple, new: Graph) -> Graph:
    """`g` with the level at `path` replaced by `new`."""
    if not path:
        return new
    (i, k), rest = path[0], path[1:]
    inst = g.insts[i]
    blocks = list(inst.blocks)
    blocks[k] = _with_level(blocks[k], rest, new)
    return g.with_insts(g.insts[:i] + (replace(inst, blocks=tuple(blocks)),) + g.insts[i + 1:])


CONTROL = GenConfig(p_if=0.3, p_loop=0.2, p_scan=0.15, max_depth=2, nodes=10)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), pick=st.integers(0, 10_000))
def test_removing_an_instruction_anywhere_keeps_the_graph_verifying(seed, pick):
    """Any instruction, at any nesting level, reconnected to the latest earlier value of the
    same type (a body keeps its outputs): the graph still verifies, the instruction is gone,
    and no removed name is read anywhere."""
    g = generate(seed, CONTROL)
    places = [(path, level, i) for path, level in _levels(g) for i in range(len(level.insts))]
    path, level, i = places[pick % len(places)]
    gone = set(level.insts[i].result_names)
    new = remove_insts(level, [i], lambda r, only: _earlier_same_type(level, i, r, gone),
                       keep_outputs=bool(path))
    if new is None:
        return
    assert len(new.insts) == len(level.insts) - 1
    assert not gone & {a for inst in new.insts for a in inst.args} and not gone & set(new.outputs)
    out = _with_level(g, path, new if path else remove_unused(new))
    verify(out)
    if path:
        assert new.inputs == level.inputs and new.output_types() == level.output_types()
