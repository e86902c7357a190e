"""embedding (ir/ops/embedding.py): its type rule, its domain (indices in [0, V)) and the random
draw that keeps an int input read as indices within it, its gradient facts, and torch eager
against ONNX Runtime on graphs using it."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from opcheck import check_against

from campaign.backends import make_backend
from ir import parse, print_graph, verify
from ir.core.dtypes import DType
from ir.core.op import OP_REGISTRY, TypeRuleError
from ir.core.types import TensorType
from ir.numerics.domain import evaluate_checked
from ir.numerics.input_search import search_inputs
from ir.numerics.values import as_tensors, index_ranges, random_values

torch.set_num_threads(1)

F32, I64, I32 = DType.float32, DType.int64, DType.int32
EMBEDDING = OP_REGISTRY["embedding"]()

#: token ids through a table, a matmul and a reduction; the same ids through a second table
TOKENS = """graph main(%ids: i64[2,5], %w: param f32[7,8], %p: param f32[8,3], %w2: param f64[30,2]) {
  %e = embedding(%w, %ids) : f32[2,5,8]
  %h = matmul(%e, %p) : f32[2,5,3]
  %t = tanh(%h) : f32[2,5,3]
  %f = embedding(%w2, %ids) : f64[2,5,2]
  return %t, %f
}"""


def test_the_result_is_the_indices_shape_and_a_row():
    for ids in ((), (4,), (2, 3, 4)):
        (out,) = EMBEDDING.type_rule([TensorType((7, 8), F32), TensorType(ids, I32)])
        assert out == TensorType((*ids, 8), F32)


def test_float_indices_are_refused():
    with pytest.raises(TypeRuleError) as e:
        EMBEDDING.type_rule([TensorType((7, 8), F32), TensorType((2, 5), F32)])
    assert str(e.value) == "does not accept input dtypes (f32, f32)"
    with pytest.raises(ValueError) as e:  # the verifier's report: that line, then the instruction
        verify(parse(TOKENS.replace("i64[2,5]", "f32[2,5]")))
    assert str(e.value).splitlines()[0] == \
        "graph main, inst 0 (embedding): does not accept input dtypes (f32, f32)"


def test_a_weight_that_is_no_table_is_refused():
    with pytest.raises(TypeRuleError) as e:
        EMBEDDING.type_rule([TensorType((7, 8, 2), F32), TensorType((5,), I64)])
    assert str(e.value) == "weight must be a [V, D] table, got rank 3"


def test_the_domain_is_the_tables_rows():
    w = torch.zeros(7, 8)
    (inside,) = EMBEDDING.domain(w, torch.tensor([0, 3, 6]))
    assert inside.dtype.is_floating_point and not bool(inside.any())
    (outside,) = EMBEDDING.domain(w, torch.tensor([-2, 0, 7, 9]))
    assert outside.tolist() == [2.0, 0.0, 1.0, 3.0]


def test_the_random_draw_and_the_input_search_give_valid_indices():
    g = verify(parse(TOKENS))
    assert index_ranges(g) == {"ids": (0, 6)}  # both tables: the smaller one's rows
    for seed in range(20):
        ids = random_values(g, seed)["ids"]
        assert ids.min() >= 0 and ids.max() <= 6, ids
        assert len(set(ids.flat)) > 1
        result = search_inputs(g, seed)
        assert result.ok and result.iters == 0, result.violation
        _, violation = evaluate_checked(g, as_tensors(result.values))
        assert violation is None


def test_indices_out_of_range_are_a_domain_violation():
    g = verify(parse(TOKENS))
    values = random_values(g, 0)
    values["ids"] = np.full((2, 5), 7, dtype=np.int64)
    _, violation = evaluate_checked(g, as_tensors(values))
    assert violation is not None and violation.index == 0 and violation.penalties


def test_a_table_beyond_the_int_range_draws_its_first_rows():
    g = verify(parse("""graph main(%ids: i32[40], %w: param f32[3,2]) {
  %e = embedding(%w, %ids) : f32[40,2]
  return %e
}"""))
    ids = random_values(g, 1)["ids"]
    assert set(ids.tolist()) == {0, 1, 2}


def test_it_is_exact_differentiable_in_the_weight_and_saves_the_indices():
    assert EMBEDDING.exact and EMBEDDING.saves_for_backward and not type(EMBEDDING).generic
    w = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([[1, 1, 4]])
    assert EMBEDDING.kinks(w, ids) == []
    out = EMBEDDING.torch(w * 1, ids)
    out.sum().backward()
    assert w.grad is not None and w.grad[1].tolist() == [2.0] * 3 and w.grad[0].tolist() == [0.0] * 3
    out = EMBEDDING.torch(w * 1, ids)
    ids.add_(1)  # written in place after the forward: torch's backward reads the indices
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_torch_and_onnx_runtime_agree():
    g = verify(parse(TOKENS))
    assert parse(print_graph(g)) == g
    ort = make_backend("ort_noopt")
    for seed in range(3):
        outcome = check_against(g, seed, ort)
        assert outcome.valid and outcome.agrees, outcome.message
