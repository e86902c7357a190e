"""A bug folder's repro.py compiles the program the campaign compiled (issue 30, point 5): the
leads L4/L5 (docs/findings F44) failed in the campaign's Inductor under `dynamic=true` and not in
their repro.py, which printed batch norm's epsilon (`ir.ops.norm.EPS`, a global the fuzzer's
module reads at trace time: a dynamic SymFloat to Dynamo) as a literal (a constant)."""
from __future__ import annotations

import numpy as np
import pytest

import ir
from campaign.testcase import TestCase
from campaign.triage.pipeline.reduction import BackendRunner, FindingCase, Reduction
from campaign.triage.pipeline.repro import check_repro, write_bug_folder

#: lead L4 minimized: EPS read inside a cond branch and outside it
F44 = """graph main(%p: f32[], %t: f32[], %x: f32[2,3], %s: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) {
  %c = gt(%p, %t) : b8[]
  %n1 = if(%c, %x, %s, %b, %m, %v) : f32[2,3] {
    graph then(%b4: f32[2,3], %b5: f32[3], %b6: f32[3], %b7: f32[3], %b8: f32[3]) {
      %v9 = batch_norm(%b4, %b5, %b6, %b7, %b8) : f32[2,3]
      return %v9
    }
    graph else(%b10: f32[2,3], %b11: f32[3], %b12: f32[3], %b13: f32[3], %b14: f32[3]) {
      return %b10
    }
  }
  %n2 = batch_norm(%x, %s, %b, %m, %v) : f32[2,3]
  %y = add(%n1, %n2) : f32[2,3]
  return %y
}"""


@pytest.mark.slow
def test_a_dynamic_float_bug_of_the_campaign_reproduces_through_repro_py(tmp_path):
    g = ir.verify(ir.parse(F44))
    rng = np.random.default_rng(0)
    values = {v.name: rng.uniform(0.5, 1.5, tuple(int(d) for d in v.type.shape))
              .astype(np.float32) for v in g.inputs}
    values["p"] = np.array(2.0, np.float32)  # the branch with the batch norm
    backend, config = "inductor?dialect=hop", "dynamic=true"
    runner = BackendRunner(backend, timeout_s=300)
    try:
        row, _, _ = runner.run("t", 0, g, values, config=config)
    finally:
        runner.close()
    # torch 2.13 fails (F44); should a torch fix it, the repro must pass alike
    failing = row["verdict"] == "crash"
    case = FindingCase(tmp_path, {"backend": backend, "backend_config": config,
                                  "verdict": row["verdict"]}, g, values, [])
    tc = TestCase("t", 0, g, values, [{"seed": 0}], [])
    red = Reduction(case, "reduced", g, values, [], row, {}, tc, config=config)
    dest = tmp_path / "bug"
    key = {k: row.get(k) for k in ("verdict", "stage", "error_sig")}
    written = write_bug_folder(dest, f"{backend}&{config}", "x-crash-x", key, red, 0)
    assert written["repro"], written
    src = (dest / "repro.py").read_text()
    assert "_f_EPS = 1e-05" in src and "DYNAMIC = True" in src, src
    outcome, out = check_repro(dest, row["verdict"], row.get("error_class"), timeout_s=600)
    assert outcome == ("reproduced" if failing else "not reproduced"), (row, out)
