"""`mutators.solve.solve` on operands outside an op's declared ranks."""
from __future__ import annotations

import random

from ir.core.dtypes import DType
from ir.core.graph import Value
from ir.core.op import OP_REGISTRY
from ir.core.types import TensorType
from ir.gen.builder import GenConfig, SymbolicGraphBuilder
from mutators.solve import solve


def test_an_operand_outside_the_ops_first_ranks_is_declined_not_sampled():
    # a transpose of a vector: its `sample` would shuffle forever looking for a non-identity
    # permutation (a mutate_shape re-solve once hung a campaign's generation actor on this)
    b = SymbolicGraphBuilder(random.Random(0), GenConfig(), ["x"])
    transpose = OP_REGISTRY["transpose"]
    assert 1 not in transpose.first_ranks()
    x = Value("x", TensorType((5,), DType.float32))
    assert solve(b, transpose, [x], [DType.float32]) is None
    # a rank it takes still solves
    y = Value("x", TensorType((2, 3), DType.float32))
    inst = solve(b, transpose, [y], [DType.float32])
    assert inst is not None and inst.results[0].type.shape == (3, 2)
