"""The driver sends every evaluated row's verdict to the generation actors' seed pools
(`_Campaign.send_feedback`, docs/mutation.md); stage classes without `feedback` get none."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import ray.cloudpickle

from campaign.config import BackendOptions, CampaignConfig, Config, RayConfig
from campaign.driver import Stages, run_campaign
from campaign.row import ResultRow
from campaign.storage import read_results

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@dataclass
class Cfg:
    backends: list
    out: str = ""


@dataclass
class Report:
    rows: list
    findings: list = field(default_factory=list)


@dataclass
class Made:
    test_id: str
    seed: int
    case: object
    base: object
    report: object
    ms: float = 0.1


def _base(tid: str, seed: int) -> dict:
    return ResultRow.graphless(tid, seed, graph_hash="h", n_insts=1, n_inputs=1, dialect="eager",
                               gen_ms=0.1, host="h", worker="gen").to_dict()


class Gen:
    def __init__(self, cfg: Cfg, name: str):
        self.cfg = cfg

    def generate(self, items):
        return [Made(t, s, f"{t}|{s}", _base(t, s), None) for t, s, *_ in items]

    def feedback(self, outcomes):
        with open(self.cfg.out, "a") as f:
            f.write(json.dumps(outcomes) + "\n")
        return 0


class Ev:
    def __init__(self, cfg: Cfg, backend: str, name: str):
        self.backend = backend

    def evaluate(self, cases):
        out = []
        for case in cases:
            tid, seed = case.split("|")
            verdict = "crash" if tid.endswith("3") else "pass"
            out.append(Report([{**_base(tid, int(seed)), "backend": self.backend, "target": "cpu",
                                "verdict": verdict, "error_sig": "Boom" if verdict == "crash" else None}]))
        return out


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
