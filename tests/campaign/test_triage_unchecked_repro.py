"""A repro.py a triage wrote but had no time to run (the campaign's own triage at its deadline:
"N pieces of work did not fit the budget; continue with `python -m campaign.triage DIR`") is run by the
triage that continues, which reuses the reduction and used to leave `repro_status` empty
(issue 30, point 5: two 10-minute campaigns had no repro checked at all)."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
from test_triage import PATTERN, _case, campaign_dir

from campaign.triage import TriageConfig
from campaign.triage.pipeline.campaign_triage import triage

#: a stand-in repro.py (the test double's backend has none): it says it reproduced
FAKE_REPRO = 'print("REPRODUCED: crash: a stand-in")\nraise SystemExit(1)\n'


def test_the_continuing_triage_checks_a_repro_an_earlier_one_did_not(tmp_path):
    out = campaign_dir(tmp_path / "run", [PATTERN], [_case("run-000000", 0)])
    triage(out, TriageConfig(max_tests=150, check_repro=False), log=lambda s: None)
    (row,) = [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]
    folder = out / row["artifact_path"]
    info = json.loads((folder / "info.json").read_text())
    assert info["repro_status"] == "none"  # a test double: no repro.py of its own
    (folder / "repro.py").write_text(FAKE_REPRO)
    info["repro_status"] = None  # as a triage out of time leaves it
    (folder / "info.json").write_text(json.dumps(info))

    again = triage(out, TriageConfig(max_tests=150), log=lambda s: None)
    assert again.reductions == 0  # the reduction is reused
    (row,) = [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]
    assert row["repro_status"] == "reproduced" and row["repro"], row
    assert json.loads((folder / "info.json").read_text())["repro_status"] == "reproduced"

    # checked once: a third triage takes the recorded outcome, it does not run it again
    (folder / "repro.py").write_text('raise SystemExit(3)\n')
    triage(out, TriageConfig(max_tests=150), log=lambda s: None)
    (row,) = [r for r in pq.read_table(out / "bugs.parquet").to_pylist() if r["kind"] == "bug"]
    assert row["repro_status"] == "reproduced"
