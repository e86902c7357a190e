"""The driver sends every evaluated row's verdict to the generation actors' seed pools
(`campaign.driver.loop.Loop.send_feedback`, docs/mutation.md); stage classes without `feedback` get none."""
from __future__ import annotations

import json
import sys

import ray.cloudpickle
import stage_doubles
from stage_doubles import Cfg, Report

from campaign.config import BackendOptions, CampaignConfig, Config, RayConfig
from campaign.driver.run import run_campaign
from campaign.driver.stages import Stages
from campaign.storage import read_results

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Gen(stage_doubles.Gen):
    def feedback(self, outcomes):
        return self.record(outcomes)


class Ev(stage_doubles.Ev):
    def report(self, tid, row):
        crash = tid.endswith("3")
        row.update(verdict="crash" if crash else "pass", error_sig="Boom" if crash else None)
        return Report([row])


def test_backend_verdicts_reach_the_generation_actors(ray_cluster, tmp_path):
    out = tmp_path / "feedback.jsonl"
    cfg = Config(campaign=CampaignConfig(
        name="fb", budget="12", workers=1, backends=["ort"], flush_every_s=60.0,
        backend_options={"ort": BackendOptions(wait=True)}), ray=RayConfig(start_timeout_s=60))
    run_campaign(cfg, tmp_path / "run", stages=Stages(Gen, Ev, Cfg(["ort"], str(out))))
    rows = read_results(tmp_path / "run").to_pylist()
    assert len(rows) == 12
    # fire and forget: the actor may be stopped before the last call ran
    got = {tuple(x) for line in out.read_text().splitlines() for x in json.loads(line)}
    assert got and got <= {(r["test_id"], f"ort:{r['verdict']}" + (":Boom" if r["error_sig"] else ""))
                           for r in rows}
    assert any(sig == "ort:crash:Boom" for _, sig in got) or len(got) < 12
