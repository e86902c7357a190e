"""A test's shapes (campaign/modes/shapes.py): the one place that asks whether dims are symbolic."""
from __future__ import annotations

from campaign.modes.shapes import DYNAMIC, STATIC, shapes_of
from campaign.worker import WorkerConfig, make_dyn_test
from ir.gen.builder import GenConfig


def test_static_and_dynamic_shapes_answer_for_their_tests():
    cfg = WorkerConfig(generator=GenConfig(), backends=[], sandbox=False)
    made = [make_dyn_test(cfg, f"t{seed}", seed) for seed in range(4)]
    dyn = next(tc for tc in made if tc.dynshape is not None)
    assert shapes_of(dyn) is DYNAMIC and dyn.shapes is DYNAMIC
    assert set(DYNAMIC.files(dyn)) == {"dynshape.json"}
    fields = DYNAMIC.row_fields(dyn)
    assert fields["dyn_dims"] and len(fields["dyn_shapes"]) == dyn.n_sets
    shapes = {tuple(v.type.shape) for k in range(dyn.n_sets) for v in dyn.graph_of(k).inputs}
    assert len(shapes) > len(dyn.graph.inputs)  # some set runs another shape
    assert DYNAMIC.dims(dyn) and DYNAMIC.judges_sets()
    assert DYNAMIC.unreduced == "a dynamic-shape test: confirmed, not reduced"
    assert DYNAMIC.unmergeable == "dynamic shapes"
    static = dyn.__class__(dyn.test_id, dyn.seed, dyn.graph, dyn.values)
    assert shapes_of(static) is STATIC and STATIC.files(static) == {}
    assert STATIC.row_fields(static) == {"dyn_dims": [], "dyn_shapes": []}
    assert STATIC.graph_of(static, 3) is static.graph and STATIC.unreduced is None
