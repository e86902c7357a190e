"""The driver's side of compiler coverage (docs/coverage.md): the campaign's union per backend,
each row's `cov_new` against it, coverage/union.parquet and growth.parquet when it ends, and
the tests that reached new lines sent to the generation actors' seed pools."""
from __future__ import annotations

import json
import sys

import pyarrow.parquet as pq
import ray.cloudpickle
import stage_doubles
from stage_doubles import Cfg, Report

from campaign.compiler_coverage_log import CampaignCoverage
from campaign.config import BackendOptions, CampaignConfig, Config, RayConfig
from campaign.driver.run import run_campaign
from campaign.driver.stages import Stages
from campaign.storage import read_results

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Gen(stage_doubles.Gen):
    def coverage_feedback(self, outcomes):
        return self.record(outcomes)


def index(tid: str) -> int:
    return int(tid.rsplit("-", 1)[1])


class Ev(stage_doubles.Ev):
    """Test i ran line i % 3 of c.py (test 4 was not measured); what it reports is all of
    it, as an evaluator whose own union was new (a fresh actor) would."""

    def report(self, tid, row):
        cov = [] if index(tid) == 4 else [(tid, self.backend,
                                           {"/x/c.py": frozenset({index(tid) % 3})})]
        return Report([row], [], cov)


def test_the_campaign_keeps_the_union_and_writes_it_with_its_growth(ray_cluster, tmp_path):
    out = tmp_path / "feedback.jsonl"
    cfg = Config(campaign=CampaignConfig(
        name="cov", budget="9", workers=1, backends=["ort"], flush_every_s=60.0, max_batch=1,
        backend_options={"ort": BackendOptions(wait=True)}), ray=RayConfig(start_timeout_s=60))
    summary = run_campaign(cfg, tmp_path / "run", stages=Stages(Gen, Ev, Cfg(["ort"], str(out))))
    rows = sorted(read_results(tmp_path / "run").to_pylist(), key=lambda r: index(r["test_id"]))
    assert len(rows) == 9
    # whatever order the tests came back in: each line is new once, test 4 not measured
    cov = {index(r["test_id"]): r["cov_new"] for r in rows}
    assert cov[4] is None
    assert sorted(v for i, v in cov.items() if i != 4) == [0] * 5 + [1] * 3
    new_tests = {r["test_id"] for r in rows if r["cov_new"]}
    assert summary.coverage == {"ort": 3}
    union = pq.read_table(tmp_path / "run" / "coverage" / "union.parquet").to_pylist()
    assert union == [{"backend": "ort", "file": "/x/c.py", "line": n} for n in (0, 1, 2)]
    growth = pq.read_table(tmp_path / "run" / "coverage" / "growth.parquet").to_pylist()
    assert [g["lines"] for g in growth] == [1, 2, 3]
    assert {g["test_id"] for g in growth} == new_tests and all(g["new"] == 1 for g in growth)
    assert growth == sorted(growth, key=lambda g: g["t_s"])
    # the seed pools hear of the tests that reached new lines (fire and forget: the actor may
    # be stopped before the last call ran)
    got = {tuple(x) for line in out.read_text().splitlines() for x in json.loads(line)}
    assert got <= {(t, "ort", 1) for t in new_tests} and got
    # read back as a resumed campaign starts from it
    again = CampaignCoverage.load(tmp_path / "run" / "coverage")
    assert again.totals() == {"ort": 3} and len(again.growth) == 3
