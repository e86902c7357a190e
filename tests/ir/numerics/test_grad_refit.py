"""`refit_grad` (ir/numerics/grad.py): a changed graph's leaves and cotangents."""
from __future__ import annotations

import numpy as np

from ir.core.text import parse
from ir.core.verify import verify
from ir.materialize.grad import GradSpec
from ir.numerics.grad import refit_grad

#: `w` no longer reaches an output (a cause probe took out the loop that read it)
G = verify(parse("""graph main(%x: f32[2], %w: f32[2]) {
  %y = sin(%x) : f32[2]
  return %y
}"""))


def test_a_leaf_no_output_depends_on_is_let_go_unless_kept():
    spec = GradSpec(("x", "w"), ({"y": np.ones(2, np.float32)},))
    assert refit_grad(spec, G, [G], 0).leaves == ("x",)
    kept = refit_grad(spec, G, [G], 0, keep_leaves=True)
    assert kept.leaves == ("x", "w")
    np.testing.assert_array_equal(kept.cotangents[0]["y"], np.ones(2, np.float32))
