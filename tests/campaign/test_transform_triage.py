"""The triage of transform tests (docs/training.md): a transform finding is reduced under its
transform (the spec refitted to each candidate), and its repro.py compiles the same
transformed program in plain torch."""
from __future__ import annotations

import numpy as np
import pytest

from campaign.backends import register
from campaign.backends.eager import EagerBackend
from campaign.testcase import npz_bytes
from campaign.triage.pipeline.reduction import (
    BackendRunner,
    FindingCase,
    Reduction,
    load_finding,
    reduce_finding,
)
from campaign.triage.pipeline.repro import check_repro, write_bug_folder
from campaign.worker import FuzzWorker, WorkerConfig
from ir import parse, verify
from ir.gen.builder import GenConfig
from ir.materialize.transforms import TRANSFORMS, TransformSpec, refit_transform
from mutators import MutationConfig


class WrongTransform(EagerBackend):
    """Eager, with every result of a transform test scaled by 1.5: a transform bug."""

    def _evaluate(self, m, result):
        outs = super()._evaluate(m, result)
        if m.tc.transform is None:
            return outs
        return [o * 1.5 for o in outs]


register("wrong_transform", WrongTransform)

TWO_OUTPUTS = """
graph main(%x: f32[3], %y: f32[3], %w: param f32[3]) {
  %a = mul(%x, %w) : f32[3]
  %b = add(%a, %y) : f32[3]
  %c = tanh(%b) : f32[3]
  return %a, %c
}
"""

SMALLER = """
graph main(%x: f32[3], %w: param f32[3]) {
  %a = mul(%x, %w) : f32[3]
  %d = reduce_sum[axis=0, keepdim=false](%a) : f32[]
  return %a, %d
}
"""


def test_refitting_a_derivative_transform_keeps_what_the_candidate_still_has():
    old, new = verify(parse(TWO_OUTPUTS)), verify(parse(SMALLER))
    cts = {"a": np.ones(3, np.float32), "c": np.full(3, 2.0, np.float32)}
    spec = TransformSpec("vjp", ("x", "y", "w"), ("python",), outputs=(0, 1), cotangents=(cts,))
    values = [{"x": np.ones(3, np.float32), "w": np.ones(3, np.float32)}]
    fit = refit_transform(spec, old, new, values, seed=1)
    assert fit is not None and fit.name == "vjp"
    assert fit.leaves == ("x", "w")  # y is gone
    assert fit.outputs == (0,)  # a is kept by name; c is gone, d was never differentiated
    assert np.array_equal(fit.cotangents[0]["a"], cts["a"])
    # when no differentiated output is left, every float output a leaf reaches is
    jac = TransformSpec("jacrev", ("x",), ("python",), outputs=(1,))
    fit = refit_transform(jac, old, new, values, seed=1)
    assert fit is not None and fit.outputs == (0, 1)
    tangents = TransformSpec("jvp", ("x", "y"), ("python",), outputs=(1,),
                             tangents=({"x": np.full(3, 3.0, np.float32), "y": np.ones(3, np.float32)},))
    fit = refit_transform(tangents, old, new, values, seed=1)
    assert fit is not None and list(fit.tangents[0]) == ["x"]
    assert np.array_equal(fit.tangents[0]["x"], np.full(3, 3.0, np.float32))
    ints = verify(parse("graph main(%n: i64[3]) {\n  %m = add(%n, %n) : i64[3]\n  return %m\n}\n"))
    assert refit_transform(spec, old, ints, [{"n": np.ones(3, np.int64)}], seed=1) is None


def test_refitting_vmap_batches_every_input_that_differs_between_its_samples():
    old, new = verify(parse(TWO_OUTPUTS)), verify(parse(SMALLER))
    spec = TransformSpec("vmap", ("y",), ("python", "hop"), in_dims=(0,), samples=(0, 1))
    sets = [{"x": np.ones(3, np.float32), "w": np.ones(3, np.float32)},
            {"x": np.zeros(3, np.float32), "w": np.ones(3, np.float32)}]
    fit = refit_transform(spec, old, new, sets, seed=1)
    # y is gone; x differs between the two samples, so it is batched now
    assert fit is not None and fit.leaves == ("x",) and fit.samples == (0, 1) and fit.in_dims == (0,)
    # samples the candidate has no input sets for: set 0, B times
    fit = refit_transform(spec, old, new, sets[:1], seed=1)
    assert fit is None or fit.samples == (0, 0)


def _transform_finding(tmp_path, name: str):
    """A finding of `wrong_transform` under transform `name`, written to `tmp_path`."""
    w = FuzzWorker(WorkerConfig(
        generator=GenConfig(nodes=10, p_if=0.3, p_loop=0.2, p_scan=0.2, p_grad=1.0,
                            p_transform=1.0, transforms=[name]),
        backends=["wrong_transform"], sandbox=False, mutation=MutationConfig(rate=0.0)))
    for seed in range(30):
        tc = w.make_test(f"t{seed}", seed)
        if tc.transform is None:
            continue
        rep = w.run_case(tc)
        if rep.rows[0]["verdict"] != "mismatch":
            continue
        assert rep.rows[0]["mode"] == "transform" and rep.rows[0]["transform"] == name
        for file, data in rep.findings[0].files.items():
            (tmp_path / file).write_bytes(data)
        return tc
    pytest.fail(f"no {name} test with a nonzero result in 30 seeds")


@pytest.mark.parametrize("name", ["vmap", "jacrev"])
def test_a_transform_finding_is_reduced_under_its_transform(tmp_path, name):
    tc = _transform_finding(tmp_path, name)
    case = load_finding(tmp_path)
    assert case is not None and case.transform is not None
    assert (case.transform.name, case.transform.leaves) == (name, tc.transform.leaves)
    runner = BackendRunner("wrong_transform", sandbox=False)
    try:
        red = reduce_finding(case, runner, max_tests=120)
    finally:
        runner.close()
    assert red.status == "reduced", red.note
    assert red.tc.transform is not None and red.tc.transform.name == name
    assert red.reduced_insts < red.original_insts
    assert red.row["verdict"] == "mismatch"


SCAN = """
graph main(%x: f32[2,3], %h: f32[3], %w: param f32[3]) {
  %hw = mul(%h, %w) : f32[3]
  %c, %ys = scan[num_carries=1, reverse=false](%hw, %x) : f32[3], f32[2,3] {
    graph body(%b0: f32[3], %b1: f32[3]) {
      %b2 = mul(%b0, %b1) : f32[3]
      %b3 = tanh(%b2) : f32[3]
      return %b3, %b2
    }
  }
  return %c, %ys
}
"""


def _spec_for(name: str, g) -> TransformSpec:
    rng = np.random.default_rng(0)
    if name == "vmap":
        return TransformSpec("vmap", ("x", "h"), ("python", "hop"), in_dims=(1, 0), samples=(0, 1, 0))
    cts = ({"c": rng.uniform(-1, 1, 3).astype(np.float32),
            "ys": rng.uniform(-1, 1, (2, 3)).astype(np.float32)},) if name in ("grad", "vjp") else ()
    tgs = ({"h": rng.uniform(-1, 1, 3).astype(np.float32),
            "w": rng.uniform(-1, 1, 3).astype(np.float32)},) if name == "jvp" else ()
    return TransformSpec(name, ("h", "w"), ("python",), outputs=(0, 1), cotangents=cts, tangents=tgs)


@pytest.mark.slow
@pytest.mark.parametrize("name", TRANSFORMS)
def test_every_transform_repro_computes_the_reference(tmp_path, name):
    """repro.py of a transform finding on aot_eager (which is right here): it runs the
    transform in plain torch and agrees with dynsmith's reference; off the reference, it
    reproduces."""
    _transform_repro(tmp_path, name)


def test_a_transform_repro_computes_the_reference(tmp_path):
    """One of the above in the default suite (two fresh processes, ~10 s)."""
    _transform_repro(tmp_path, "vjp")


def _transform_repro(tmp_path, name: str) -> None:
    from campaign.testcase import TestCase

    g = verify(parse(SCAN))
    rng = np.random.default_rng(1)
    values = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
              "h": rng.uniform(-1, 1, 3).astype(np.float32),
              "w": rng.uniform(-1, 1, 3).astype(np.float32)}
    extra = [{"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
              "h": rng.uniform(-1, 1, 3).astype(np.float32)}]
    tc = TestCase("t", 0, g, values, [{"seed": 0}], extra, transform=_spec_for(name, g))
    # eager runs the derivative transforms of a higher-order op in no dialect but python's
    spec = "aot_eager" if name == "vmap" else "aot_eager?dialect=python"
    for delta, want in ((0.0, "not reproduced"), (1.0, "reproduced")):
        folder = tmp_path / f"case{delta}"
        folder.mkdir()
        case = FindingCase(folder, {"backend": spec, "verdict": "mismatch"}, g, values,
                           extra, transform=tc.transform)
        red = Reduction(case, "reduced", g, values, extra, {"verdict": "mismatch", "stage": "compare"},
                        {}, tc)
        dest = folder / "bug"
        written = write_bug_folder(dest, spec, "x-mismatch-x", {"verdict": "mismatch"}, red, 0)
        assert written["repro"], written
        src = (dest / "repro.py").read_text()
        assert "transform_program(model, sets, INPUTS, OUTPUTS, HERE)" in src
        assert (dest / "transform.json").is_file()
        if delta:
            with np.load(dest / "expected.npz") as z:
                shifted = {k: z[k] + np.asarray(delta, z[k].dtype) for k in z.files}
            (dest / "expected.npz").write_bytes(npz_bytes(shifted))
            (dest / "truth.npz").unlink(missing_ok=True)
        outcome, out = check_repro(dest, "mismatch", "Mismatch", timeout_s=240)
        assert outcome == want, out
        if delta:
            assert "REPRODUCED: mismatch" in out, out
