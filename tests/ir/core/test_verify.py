"""verify's negative cases: each rule, with the exact one-line message."""
from __future__ import annotations

import pytest

from ir import VerifyError, parse, verify

GOOD = """
graph main(%x0: f32[2,3], %w1: param f32[3,4]) {
  %v2 = matmul(%x0, %w1) : f32[2,4]
  %v3 = relu(%v2) : f32[2,4]
  return %v3
}
"""


def check_fails(text: str) -> VerifyError:
    with pytest.raises(VerifyError) as info:
        verify(parse(text))
    return info.value


def test_good_graph_verifies():
    g = parse(GOOD)
    assert verify(g) is g


@pytest.mark.parametrize(
    "text, summary",
    [
        (
            GOOD.replace("relu(%v2)", "relu(%v9)"),
            "graph main, inst 1 (relu): operand %v9 is not defined",
        ),
        (
            GOOD.replace("%v3 = relu", "%v2 = relu"),
            "graph main, inst 1 (relu): value %v2 is defined twice",
        ),
        (
            GOOD.replace("return %v3", "return %v7"),
            "graph main: output %v7 is not defined",
        ),
        (
            GOOD.replace(": f32[2,4]\n  %v3", ": f32[2,5]\n  %v3"),
            "graph main, inst 0 (matmul): result types (f32[2,5]) differ from the type rule's (f32[2,4])",
        ),
        (
            GOOD.replace("%w1: param f32[3,4]", "%w1: param f32[5,4]"),
            "graph main, inst 0 (matmul): constraint violated: False",
        ),
        (
            GOOD.replace("%w1: param f32[3,4]", "%w1: param f64[3,4]"),
            "graph main, inst 0 (matmul): does not accept input dtypes (f32, f64)",
        ),
        (
            GOOD.replace("relu(%v2)", "relu(%v2, %v2)"),
            "graph main, inst 1 (relu): expects 1 operands, got 2",
        ),
        (
            GOOD.replace("%x0: f32[2,3]", "%x0: f32[0,3]").replace("f32[2,4]", "f32[0,4]"),
            "graph main: value %x0: type f32[0,3] has a dimension < 1",
        ),
        (
            GOOD.replace("%v3 = relu(%v2) : f32[2,4]", "%v3, %v4 = relu(%v2) : f32[2,4], f32[2,4]"),
            "graph main, inst 1 (relu): binds 2 results, op has 1",
        ),
    ],
)
def test_rule_violation_messages(text: str, summary: str):
    err = check_fails(text)
    assert err.summary == summary


def test_error_quotes_failing_instruction_in_context():
    err = check_fails(GOOD.replace("relu(%v2)", "relu(%v9)"))
    lines = str(err).splitlines()
    assert lines[0] == "graph main, inst 1 (relu): operand %v9 is not defined"
    assert ">>> %v3 = relu(%v9) : f32[2,4]" in lines
    assert "    %v2 = matmul(%x0, %w1) : f32[2,4]" in lines


def test_use_before_definition():
    text = """
graph main(%x0: f32[2]) {
  %v1 = relu(%v2) : f32[2]
  %v2 = relu(%x0) : f32[2]
  return %v1
}
"""
    assert check_fails(text).summary == "graph main, inst 0 (relu): operand %v2 is not defined"


def test_no_outputs():
    from ir.core.dtypes import DType
    from ir.core.graph import Graph, Value
    from ir.core.types import TensorType

    g = Graph("main", (Value("x", TensorType((2,), DType.float32)),), (), ())
    with pytest.raises(VerifyError) as info:
        verify(g)
    assert info.value.summary == "graph main: graph has no outputs"


def test_symbolic_shape_rejected():
    import z3

    from ir.core.dtypes import DType
    from ir.core.graph import Graph, Value
    from ir.core.types import TensorType

    g = Graph("main", (Value("x", TensorType((z3.Int("n"),), DType.float32)),), (), ("x",))
    with pytest.raises(VerifyError) as info:
        verify(g)
    assert info.value.summary == "graph main: value %x: type f32[n] is not concrete"
