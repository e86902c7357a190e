"""The cause probe (campaign/triage/pipeline/cause_probe.py), on real torch runs: a wrong
gradient that goes away with its zero-trip loops taken out is F38 in a form no trigger
recorded (a scan in the loop's body, a leaf carried through); a wrong result that stays
without the loop (F41's) is another cause, even with the same verdict and a zero-trip loop in
it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from campaign.triage.pages.notes import NOTES_DIR
from campaign.triage.pipeline.cause_probe import NoteProbe, probe, stages, trigger_live
from campaign.triage.pipeline.note_known import ROOT, note_probes
from campaign.triage.pipeline.reduction import BackendRunner, FindingCase, Reduction
from ir.core.text import parse
from ir.core.verify import verify
from ir.materialize.grad import GradSpec

#: F38 in a form its triggers do not have: the loop's body runs a scan over a carried leaf
SCAN_IN_ZERO_TRIP_LOOP = """graph main(%n: i64[], %c: f32[], %xs: f32[4]) {
  %v, %w = loop(%n, %c, %xs) : f32[], f32[4] {
    graph body(%i: i64[], %b: f32[], %d: f32[4]) {
      %r = relu(%b) : f32[]
      %s, %ys = scan[num_carries=1, reverse=true](%r, %d) : f32[], f32[4] {
        graph body(%b1: f32[], %b2: f32[]) {
          %p = mul(%b1, %b2) : f32[]
          %q = sin(%p) : f32[]
          return %q, %q
        }
      }
      return %s, %d
    }
  }
  return %v
}"""

#: F41 (AOT autograd returns a mutated input in place of another output; live on 2.13 and
#: 2.14.1) beside a zero-trip loop over an input that is no leaf
F41_BESIDE_A_ZERO_TRIP_LOOP = """graph main(%x0: f32[1], %x4: f32[], %x17: f32[], %y: f32[2], %n: i64[]) {
  %v15 = fill_[value=2.0](%x4) : f32[]
  %v4 = setitem[starts=[0], ends=[1], steps=[0]](%x0, %x17) : f32[1]
  %v5 = cos(%x0) : f32[1]
  %v6 = loop(%n, %y) : f32[2] {
    graph body(%i: i64[], %b: f32[2]) {
      %s = sin(%b) : f32[2]
      return %s
    }
  }
  return %v5, %x0, %v15, %x4, %v6
}"""

SPEC = "aot_eager?dialect=hop"


@pytest.fixture
def runners():
    made: dict[str, BackendRunner] = {}

    def runner_for(spec: str) -> BackendRunner:
        return made.setdefault(spec, BackendRunner(spec, sandbox=False))
    yield runner_for
    for r in made.values():
        r.close()


def failing(text: str, values: dict[str, np.ndarray], leaves: tuple[str, ...], runner_for
            ) -> Reduction:
    """The representative of a bucket: the test run once on `SPEC`, failing."""
    g = verify(parse(text))
    row, _, tc = runner_for(SPEC).run("t0", 0, g, values, [], grad=GradSpec(leaves, ()))
    assert row["verdict"] == "mismatch", row
    info = {"backend": SPEC, "verdict": "mismatch", "test_id": "t0", "seed": 0, **row}
    case = FindingCase(Path("."), info, g, values, [], tc.grad)
    return Reduction(case, "confirmed", g, values, [], row, {}, tc)


def f38() -> list[NoteProbe]:
    return [p for p in note_probes(ROOT / NOTES_DIR) if p.finding.startswith("F38")]


def test_a_wrong_gradient_that_needs_the_zero_trip_loop_is_f38(runners):
    values = {"n": np.array(0), "c": np.array(0.8, np.float32),
              "xs": np.array([0.5, -1.0, 1.5, 0.25], np.float32)}
    red = failing(SCAN_IN_ZERO_TRIP_LOOP, values, ("c", "xs"), runners)
    seen: list[str] = []

    def live(note: NoteProbe) -> str | None:
        seen.append(note.finding)
        return trigger_live(note, runners)
    match = probe(red, SPEC, "mismatch", f38(), runners, live)
    assert match is not None and match.finding == "F38-while_loop_zero_trip_backward"
    assert "with its loop at 0 replaced by 'zero trips'" in match.why
    assert "F38-while_loop_zero_trip_backward's trigger F38-zero_trip_loop_sin.gir still fails" in match.why
    assert seen == ["F38-while_loop_zero_trip_backward"]  # the note's own trigger was re-run


def test_a_reduction_an_earlier_triage_cached_is_probed_on_its_findings_test(runners):
    """A cached reduction has no test case of a run here: the probe takes the finding's
    gradient spec, and a leaf the rewrite disconnects (`xs`) is still checked."""
    from dataclasses import replace

    values = {"n": np.array(0), "c": np.array(0.8, np.float32),
              "xs": np.array([0.5, -1.0, 1.5, 0.25], np.float32)}
    red = replace(failing(SCAN_IN_ZERO_TRIP_LOOP, values, ("c", "xs"), runners), tc=None,
                  status="cached")
    match = probe(red, SPEC, "mismatch", f38(), runners, lambda note: "F38-zero_trip_loop_sin.gir")
    assert match is not None and match.finding == "F38-while_loop_zero_trip_backward"


def test_another_cause_with_the_same_verdict_and_a_zero_trip_loop_stays_apart(runners):
    values = {"x0": np.array([0.3], np.float32), "x4": np.array(0.5, np.float32),
              "x17": np.array(0.7, np.float32), "y": np.array([0.1, 0.2], np.float32),
              "n": np.array(0)}
    red = failing(F41_BESIDE_A_ZERO_TRIP_LOOP, values, ("x17",), runners)
    assert red.row["error_sig"].startswith("Mismatch: output")  # F41's swapped output

    def live(note: NoteProbe) -> str | None:
        raise AssertionError("the triggers run only once the probe passed")
    assert probe(red, SPEC, "mismatch", f38(), runners, live) is None


def test_a_probe_names_nothing_when_the_notes_bug_is_not_live_here(runners):
    values = {"n": np.array(0), "c": np.array(0.8, np.float32),
              "xs": np.array([0.5, -1.0, 1.5, 0.25], np.float32)}
    red = failing(SCAN_IN_ZERO_TRIP_LOOP, values, ("c", "xs"), runners)
    assert probe(red, SPEC, "mismatch", f38(), runners, lambda note: None) is None


def test_a_probe_runs_on_the_failing_compiler_then_the_stage_before_its_code_generator():
    assert stages("inductor_dynamic") == [
        "inductor_dynamic", "aot_eager?device=cpu&dialect=hop&dynamic=true&fullgraph=true&unbacked=false"]
    assert stages(SPEC) == [SPEC]
    assert stages("ort") == ["ort"]
