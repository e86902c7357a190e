"""A note's bug as another torch release raises it (campaign/triage/pipeline/note_known.py and the
recognize step): torch 2.14 moved the Subtraction of two bool tensors from `torch._check` to
`torch._check_not_implemented`, so F56's trigger (recorded on 2.13, `RuntimeError: ...`) fails as
`NotImplementedError: ...` on 2.14.1 and 2.15.0, the message unchanged; a campaign there must
name it F56, not call it new. The signatures below are the measured ones (the trigger graphs
run on 2.13.0, 2.14.1 and 2.15.0 as `findings-triggers` runs them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from campaign.triage.config import TriageConfig
from campaign.triage.pipeline.buckets import BucketKey
from campaign.triage.pipeline.clock import TriageClock
from campaign.triage.pipeline.note_known import NoteForms, known_note_keys
from campaign.triage.pipeline.state import TriageState
from campaign.triage.pipeline.steps.bucket import Bucketing
from campaign.triage.pipeline.steps.recognize import Recognize

NOTES = Path(__file__).resolve().parents[4] / "docs" / "findings"
F08 = "F08-torch_functionalize_views-case3"
F51 = "F51-nested_scan_detach_copy_backward"
F56 = "F56-functionalize_expand_view_bool_write"

SUBTRACTION = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
               "`^` or `logical_xor()` operator instead.")
#: F56's and F08's trigger graphs on torch 2.13.0 (as their notes record) and on 2.14.1 / 2.15.0
ON_213 = f"RuntimeError: {SUBTRACTION}"
ON_2141 = f"NotImplementedError: {SUBTRACTION}"
#: F51's trigger graph on 2.13.0 (its note's) and on 2.14.1: no longer in Dynamo's fake-tensor
#: run, and raised without a library frame
F51_ON_213 = ("TorchRuntimeError: RuntimeError when making fake tensor call: RuntimeError: "
              "derivative for aten::detach_copy is not implemented @ scan.run_flattened_scan < "
              "utils._maybe_compile_and_run_fn")
F51_ON_2141 = "RuntimeError: derivative for aten::detach_copy is not implemented"


def _key(backend: str, sig: str, config: str = "") -> BucketKey:
    return BucketKey(backend, "cpu", "crash", "compile", sig, None, config)


@pytest.fixture(scope="module")
def forms() -> NoteForms:
    return NoteForms.of(known_note_keys(NOTES))


def test_f56_on_2141_is_f56_by_its_trigger_key_up_to_the_release(forms):
    ids = {k.key.id: k.finding for k in known_note_keys(NOTES)}
    assert ids[_key("aot_eager", ON_213).id] == F56  # 2.13: the trigger's own key
    assert _key("aot_eager", ON_2141).id not in ids  # 2.14.1: another bucket id ...
    assert forms.by_key(_key("aot_eager", ON_2141)) == F56  # ... of F56's key
    assert forms.by_key(_key("aot_eager", ON_213)) == F56
    # F08 is the same upstream bug written up on Inductor's mixed dialect: its key is its own
    assert forms.by_key(_key("inductor?dialect=mixed", ON_2141)) == F08
    # in a configuration that holds the trigger's ('': every one)
    assert forms.by_key(_key("aot_eager", ON_2141, "fullgraph=false")) == F56


def test_what_the_release_key_does_not_forgive(forms):
    # another message, backend, stage or verdict is no trigger's
    assert forms.by_key(_key("aot_eager", "NotImplementedError: Subtraction of bools")) is None
    assert forms.by_key(_key("inductor", ON_2141)) is None
    assert forms.by_key(BucketKey("aot_eager", "cpu", "crash", "run", ON_2141)) is None
    assert forms.by_key(BucketKey("aot_eager", "cpu", "signal", "compile", ON_2141)) is None
    # a class no check raises says what failed
    assert forms.by_key(_key("aot_eager", f"AssertionError: {SUBTRACTION}")) is None
    # the cause two notes share (F08, F56: one bug written up twice) names neither
    assert forms.by_cause(_key("inductor", ON_213)) is None
    assert forms.by_cause(_key("inductor", ON_2141)) is None


def test_f51_on_2141_is_f51_by_its_cause_without_a_site(forms):
    assert forms.by_cause(_key("aot_eager", F51_ON_213)) == F51
    assert forms.by_key(_key("aot_eager", F51_ON_2141)) is None  # another wrapper, no frames
    assert forms.by_cause(_key("aot_eager", F51_ON_2141)) == F51
    # Inductor runs the same front end at compile
    assert forms.by_cause(_key("inductor", F51_ON_2141)) == F51
    # a site that is not the trigger's is another failure of the message
    assert forms.by_cause(_key("aot_eager", f"{F51_ON_2141} @ autograd.backward")) is None


def test_a_2141_campaigns_row_of_f56_is_known_and_named_f56(tmp_path):
    """The recognize and bucket steps on a torch 2.14.1 campaign's row of F56: its bucket keeps
    the signature it saw, is not new (not reduced), and names F56."""
    row = {"test_id": "t1", "ts": None, "backend": "aot_eager", "target": "cpu",
           "verdict": "crash", "stage": "compile", "error_sig": ON_2141, "backend_config": "",
           "finding_dir": None}
    state = TriageState.open(tmp_path, TriageConfig(db="off", findings=str(NOTES)), print)
    state.rows = [row]
    clock = TriageClock.of(60.0)
    Recognize().run(state, clock.step("recognize", 0.0, 0.0))
    Bucketing().run(state, clock.step("bucket", 0.0, 0.0))
    [(key, bucket)] = state.buckets.items()
    assert key == _key("aot_eager", ON_2141)
    assert (bucket.new, bucket.finding, bucket.status) == (False, F56, "known")
    assert bucket.row()["error_sig"] == ON_2141
