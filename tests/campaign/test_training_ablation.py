"""The training bug's ablation (campaign/triage/pipeline/training_ablation.py): which part of the training
step is wrong, and whether `aot_eager` agrees with eager on the same test."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_training import scaled_gradients

from campaign.backends import make_backend, register
from campaign.backends.inductor import InductorBackend
from campaign.triage.pipeline.reduction import BackendRunner, FindingCase, Reduction
from campaign.triage.pipeline.training_ablation import ablate, part_of_label
from campaign.worker import FuzzWorker, WorkerConfig
from ir.gen.builder import GenConfig
from mutators import MutationConfig


class WrongBackward(InductorBackend):
    """torch.compile with Dynamo's `eager` (no AOT autograd), every gradient of a gradient test
    scaled by 1.5: a backward bug after the stage `aot_eager` runs."""

    def _evaluate(self, m, result):
        return scaled_gradients(m, super()._evaluate(m, result))


register("wrong_backward", WrongBackward, device="cpu", compiler="eager")


@pytest.mark.parametrize(("label", "part"), [
    ("output 1", "forward"), ("grad %x3", "backward"), ("vjp %w", "backward"),
    ("jacrev output 0 / %x", "backward"), ("jvp output 2", "forward-mode derivative"),
    ("jacfwd output 0 / %x", "forward-mode derivative"), ("vmap output 0", "batched forward"),
    ("something", None)])
def test_the_part_is_read_off_the_result_label(label, part):
    assert part_of_label(label) == part


def test_the_aot_eager_stage_keeps_the_test_and_the_training_options_only():
    b = make_backend("inductor?dialect=python&fullgraph=false&memory_budget=0.5&max_fusion_size=8"
                     "&cpp_wrapper=true")
    twin = make_backend(b.stage_spec("aot_eager"))
    assert (twin.compiler, twin.dialect, twin.fullgraph) == ("aot_eager", "python", False)
    assert twin.training_flags == {"activation_memory_budget": 0.5}
    assert twin.flags == {} and not twin.cpp_wrapper
    assert make_backend("aot_eager?dialect=hop").stage_spec("aot_eager") == "aot_eager?dialect=hop"
    assert make_backend("ort").stage_spec("aot_eager") is None


def _confirmed(spec: str, seeds: int = 12) -> Reduction:
    w = FuzzWorker(WorkerConfig(generator=GenConfig(nodes=6, p_if=0.3, p_grad=1.0),
                                backends=[spec], sandbox=False, mutation=MutationConfig(rate=0.0)))
    for seed in range(seeds):
        tc = w.make_test(f"t{seed}", seed)
        if tc.grad is None:
            continue
        row = w.run_case(tc).rows[0]
        if row["verdict"] == "mismatch":
            case = FindingCase(Path("."), dict(row), tc.graph, tc.values, list(tc.extra_inputs),
                               tc.grad)
            return Reduction(case, "confirmed", tc.graph, tc.values, list(tc.extra_inputs), row,
                             {}, tc)
    pytest.fail(f"no gradient mismatch on {spec} in {seeds} seeds")


def test_a_wrong_gradient_is_the_backward_and_aot_eager_agrees():
    red = _confirmed("wrong_backward")
    assert red.row["error_sig"].startswith("Mismatch: grad %")
    runners: dict[str, BackendRunner] = {}

    def runner_for(spec: str) -> BackendRunner:
        return runners.setdefault(spec, BackendRunner(spec, sandbox=False))
    try:
        res = ablate(red, runner_for)
    finally:
        for r in runners.values():
            r.close()
    assert res is not None and res.part == "backward" and res.aot_eager == "agrees"
    assert any(s.startswith("aot_eager?") for s in runners)  # it ran the stage


class _Rows:
    """A runner that answers each evaluation by whether the test trains."""

    def __init__(self, trained: dict[str, Any], inference: dict[str, Any]):
        self.trained, self.inference, self.calls = trained, inference, []

    def run(self, *args: Any, grad: Any = None, transform: Any = None, **kw: Any):
        self.calls.append(grad is not None or transform is not None)
        return (self.trained if self.calls[-1] else self.inference), None, None


def test_a_crash_is_in_the_backward_when_the_inference_test_passes():
    red = _confirmed("wrong_backward")
    crash = {"verdict": "crash", "stage": "compile", "error_sig": "RuntimeError: boom", "mode": "grad"}
    red.row = crash
    red.case.info.update(crash)
    passing = {"verdict": "pass", "mode": "infer"}
    fake = _Rows(trained=crash, inference=passing)
    res = ablate(red, lambda spec: fake)  # type: ignore[arg-type, return-value]
    assert res is not None and res.part == "backward" and res.aot_eager == "fails the same way"
    fake = _Rows(trained=passing, inference=crash)
    res = ablate(red, lambda spec: fake)  # type: ignore[arg-type, return-value]
    assert res is not None and res.part == "forward" and res.aot_eager == "agrees"
    red.row = {**passing, "mode": "infer"}  # the backend ran no training step: no ablation
    assert ablate(red, lambda spec: fake) is None  # type: ignore[arg-type, return-value]
