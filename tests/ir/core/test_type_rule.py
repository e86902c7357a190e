"""`Op.type_rule`: the one rule of what an instruction accepts and yields, which the verifier,
the reducer's re-typing and the mutators ask; its refusals carry the verifier's messages."""
from __future__ import annotations

import pytest

import ir
from ir.core.dtypes import DType
from ir.core.op import TypeRuleError, lookup_op
from ir.core.types import TensorType


def _t(*shape: int, dtype: DType = DType.float32) -> TensorType:
    return TensorType(tuple(shape), dtype)


def test_accepted_types_give_the_result_types():
    add = lookup_op("add")()
    assert add.type_rule([_t(2, 3), _t(3)]) == [_t(2, 3)]


def test_refusals_say_why():
    add = lookup_op("add")()
    with pytest.raises(TypeRuleError) as e:
        add.type_rule([_t(2), _t(2, dtype=DType.int64)])
    assert str(e.value) == "does not accept input dtypes (f32, i64)"
    squeeze = lookup_op("squeeze")(axis=0)  # type: ignore[call-arg]
    with pytest.raises(TypeRuleError) as e:
        squeeze.type_rule([_t(2, 3)])
    assert str(e.value).startswith("constraint violated: ")


def test_the_verifier_reports_the_rules_message():
    g = ir.parse("""graph main(%x0: f32[2], %x1: i64[2]) {
      %v2 = add(%x0, %x1) : f32[2]
      return %v2
    }""")
    with pytest.raises(ir.VerifyError) as e:
        ir.verify(g)
    assert e.value.summary == "graph main, inst 0 (add): does not accept input dtypes (f32, i64)"
