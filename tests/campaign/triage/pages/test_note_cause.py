"""A note's `cause:` (campaign/triage/pages/note_cause.py): what it reads, and one line naming
the field for each thing wrong."""
from __future__ import annotations

import pytest

from campaign.triage.pages.note_cause import CauseError, NoteCause, parse_cause
from campaign.triage.pages.notes import NOTES_DIR, load_notes
from campaign.triage.pipeline.note_known import ROOT

F38 = {"op": "loop", "inlining": "zero trips", "compilers": "eager aot_eager", "verdict": "mismatch"}


def test_a_cause_reads_and_covers_its_compilers_and_verdict():
    c = parse_cause(F38)
    assert c == NoteCause("loop", "zero trips", ("eager", "aot_eager"), "mismatch")
    assert c.covers("aot_eager?dialect=hop", "mismatch")
    assert not c.covers("inductor", "mismatch") and not c.covers("aot_eager", "crash")
    assert parse_cause(None) is None


@pytest.mark.parametrize("change, message", [
    ({"op": "sin"}, "cause.op: 'sin' is not a control-flow op"),
    ({"op": "lop"}, "cause.op: 'lop' is no op of the registry"),
    ({"inlining": "no trips"},
     "cause.inlining: 'no trips' is not a way loop inlines (one of: zero trips, its body once)"),
    ({"compilers": "aot_eager inductr"}, "cause.compilers: 'inductr' is no backend (known: "),
    ({"verdict": "wrong"},
     "cause.verdict: 'wrong' is not one of crash, signal, timeout, mismatch, recompile"),
    ({"verdict": ""}, "cause.verdict: missing (text)"),
    ({"why": "x"}, "cause.why: unknown field (known: op, inlining, compilers, verdict)"),
])
def test_a_wrong_field_is_one_line_naming_it(change, message):
    with pytest.raises(CauseError) as e:
        parse_cause({**F38, **change})
    assert str(e.value).startswith(message)


def test_f38_names_its_cause():
    notes = load_notes(ROOT / NOTES_DIR)
    assert notes["F38-while_loop_zero_trip_backward"].cause == NoteCause(
        "loop", "zero trips", ("eager", "aot_eager", "inductor", "inductor_dynamic", "inductor_cuda"),
        "mismatch")
