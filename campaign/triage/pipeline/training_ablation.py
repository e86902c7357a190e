"""Where a training bug is (docs/training.md): which part of the training step is wrong, and
whether the stage before Inductor (`aot_eager`: Dynamo and AOT autograd, no Inductor) agrees
with eager on the same reduced test.

`ablate(red, runner_for)` runs on the representative of a bucket whose test trained (mode
`grad` or `transform`) and returns a `TrainingAblation`:

  - `part`, what is wrong. For a mismatch it is read off the result that differs (the row's
    `Mismatch: <label>`): `forward` (an output), `backward` (a gradient, vjp, or jacrev), or
    `forward-mode derivative` (jvp, jacfwd). vmap's batched outputs are `batched forward`.
    A failure at stage `import` is `forward`: no backend has begun the backward there (TVM's
    import of a gradient test makes the loss of the imported outputs too, the forward), even
    when the inference test passes (F21's If returns a tuple only on the branch the inputs
    do not take, while the loss's multiply rejects its type whatever the inputs). Any other
    failure is re-run as an inference test (no leaves, no transform) in the same
    configuration: failing the same way makes it `forward`, passing makes it `backward` (the
    failure needs the training step). Anything else says what the inference run gave.
  - `aot_eager`, how `aot_eager` fares on the same test. Its spec is the failing backend's
    `Backend.stage_spec("aot_eager")`: the same dialect, form and AOT autograd options,
    without Inductor's. The value is `agrees` (the fault is Inductor's), `fails the same way`
    (Dynamo's or AOT autograd's), or `fails otherwise: ...`. It is `is the failing backend`
    when the bug is aot_eager's own, and None for a backend with no such stage (TVM, eager).

Each value is one string, written to the bugs table's columns `wrong_part` and `aot_eager`
and to report.md.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from campaign.triage.pipeline.reduction import BackendRunner, same_failure

#: the label prefixes of a transform test's results (`TransformSpec.labels`) and the part of
#: the training step each one is
PART_OF_LABEL: tuple[tuple[str, str], ...] = (
    ("output ", "forward"),
    ("vmap ", "batched forward"),
    ("grad ", "backward"),
    ("vjp ", "backward"),
    ("jacrev ", "backward"),
    ("jvp ", "forward-mode derivative"),
    ("jacfwd ", "forward-mode derivative"),
)


@dataclass(frozen=True)
class TrainingAblation:
    """What the ablation found (module doc); a field is None where it could not say."""

    part: str | None
    aot_eager: str | None

    def to_json(self) -> dict[str, str | None]:
        """Its form in a bug folder's info.json (`training_ablation`)."""
        return {"part": self.part, "aot_eager": self.aot_eager}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TrainingAblation:
        data = data or {}
        return cls(data.get("part"), data.get("aot_eager"))

    def text(self) -> str:
        return f"wrong part {self.part}; aot_eager {self.aot_eager}"

    def into(self, bucket: Any) -> None:
        """Set the bucket's columns `wrong_part` and `aot_eager` from it."""
        bucket.wrong_part, bucket.aot_eager = self.part, self.aot_eager


def part_of_label(label: str) -> str | None:
    """The part of the training step a result label names (`output 0` -> forward, `grad %x`
    -> backward, ...), or None for a label of no known form."""
    for prefix, part in PART_OF_LABEL:
        if label.startswith(prefix):
            return part
    return None


def _describe(row: dict[str, Any]) -> str:
    return f"{row.get('verdict')}" + (f" ({row.get('error_sig')})" if row.get("error_sig") else "")


def ablate(red: Any, runner_for: Callable[[str], BackendRunner]) -> TrainingAblation | None:
    """The ablation of a `campaign.triage.pipeline.reduction.Reduction` whose test trained; None for
    any other (an inference test, no test case). `runner_for(spec)` gives the runner of a
    backend spec (the triage's, so sandboxes are shared)."""
    tc = red.tc
    row = red.row or {}
    if tc is None or not tc.mode.differentiates or row.get("mode") != tc.mode.name:
        return None
    expect = {**red.case.info, **{k: row.get(k) for k in ("verdict", "stage", "error_sig")}}
    graph, values, extra = red.graph, red.values, list(tc.extra_inputs)

    def rerun(spec: str, train: bool) -> dict[str, Any]:
        runner = runner_for(spec)
        out, _, _ = runner.run(f"{red.case.test_id}-ablation", red.case.seed, graph, values, extra,
                               grad=tc.grad if train else None,
                               transform=tc.transform if train else None, drawn_for=graph)
        return out

    if row.get("verdict") == "mismatch":
        part = part_of_label(str(row.get("error_sig") or "").removeprefix("Mismatch: "))
    elif row.get("stage") == "import":
        part = "forward"
    else:
        plain = rerun(red.spec, train=False)
        part = ("forward" if same_failure(expect, plain) else
                "backward" if plain.get("verdict") == "pass" else
                f"unknown: as an inference test it gave {_describe(plain)}")
    from campaign.backends import make_backend

    stage = make_backend(red.spec).stage_spec("aot_eager")
    if stage is None:
        verdict = None
    elif stage == red.spec:
        verdict = "is the failing backend"
    else:
        twin = rerun(stage, train=True)
        verdict = ("fails the same way" if same_failure(expect, twin) else
                   "agrees" if twin.get("verdict") == "pass" else f"fails otherwise: {_describe(twin)}")
    return TrainingAblation(part, verdict)
