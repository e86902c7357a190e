"""The campaign driver: the only package that imports Ray.

It starts a local Ray cluster or joins one (`ray.address`), checks that the cluster has what
the campaign's actors need, starts them, and runs the pipeline until the budget is spent:

    test i (seed = ids.test_seed(campaign.seed, i), backends sampled by rate)
      -> generation actors (CPU; `campaign.pipeline.Generator`): a valid test, packed, with its
         reference outputs; or the rows of an invalid one
      -> per backend, its own evaluation actors (`campaign.pipeline.Evaluator`), placed with the
         resources its target needs (GPU for cuda targets, custom resources from config):
         one row per (test, backend), and a finding for a non-pass
      -> results/*.parquet (campaign.storage) and findings/ (campaign.findings)

Modules, each owning one concept:
- `run`: `run_campaign`, from config to summary; `checks`: the config checks before anything
  starts (`preflight`) and the backends' registry facts; `cluster`: start or join Ray, the
  resources each stage needs and whether the cluster has them;
- `campaign`: one run's state, feeding, routing and recording tests, replacing failed actors;
  `loop`: the loop that drives it (dispatch, `ray.wait`, deadline, disk hold);
- `pool`: one stage's actors and queue, given its limits (`PoolLimits`); `work`: a test on its
  way; `actors`: a stage class as a Ray actor; `starts`: an actor's start (starting, ready,
  not placed, failed; no Ray); `routing`: capability routing and known bugs;
- `blame`: who is blamed when an actor dies, hangs or raises (a policy, without Ray);
- `results`: rows, findings, coverage and counts; `resume`: where a resumed run goes on;
  `summary`: what a run did; `stages`, `errors`: the stage classes, the errors.

Flow: every pool of actors (generation, each backend) keeps `in_flight_per_worker` calls on each
actor, each call a batch of tests sized so that it takes ~200 ms (Ray's per-call cost, ~1.5 ms of
CPU, is paid per batch; an evaluator faster than generation waits up to that long for a whole
batch rather than getting a call per generated batch); results are taken in completion order
with `ray.wait`. Actors run without Ray task events, with what they hold after their start
frozen out of the garbage collector's way (`gc.freeze`) and with one thread per library and a
small oneDNN primitive cache (`ACTOR_ENV`), so their memory plateaus. Each backend has its own
bounded queue (about `campaign.queue_s` seconds of its work): when it is full, a new test skips
that backend (counted, no row; `wait: true` makes generation wait for it instead), so a slow
backend never stalls a fast one. Generation runs only while some backend has room, so memory
stays bounded whatever the speeds.

Invariants:
- every test a backend was given gets exactly one row for that backend: its evaluator's, or one
  the driver makes when the evaluator died (crash, WorkerDied), hung (timeout, WorkerTimeout) or
  raised (invalid, WorkerError). A dead or hung actor is replaced; who is blamed and what is
  re-run is `blame`'s to say. Past `MAX_NODE_OOM` node-memory kills the campaign stops with that
  reason, keeping its rows;
- rows are flushed as whole Parquet files (campaign.storage) every `flush_every_s` seconds or
  `flush_rows` rows, also on Ctrl-C (the summary is printed, exit 130), on SIGTERM (exit 143)
  and on errors: a driver killed with -9 loses at most the rows of the last flush interval;
- `campaign.resume=true` continues the run in `output.dir`: same run id, test indices after the
  last one recorded, so no test id repeats;
- before any actor starts, the cluster's resources are checked against every actor's needs, and
  a campaign the cluster cannot host fails at once with a message naming the config fields
  (Ray would leave the actors pending forever);
- a slow start is no failure: an actor placed on a node and still in its constructor (imports
  on a loaded machine) is waited for, said so every `ray.start_timeout_s`, and its start time
  is in the summary; the other stages test meanwhile. An actor not placed (no live node could
  hold it, none had its request free for `ray.start_timeout_s`, or still none when testing
  ends) is given up on: its calls' tests go back to its pool, a backend none of whose actors is
  placed takes no more tests (counted as not placed, not as skipped while busy) and the summary
  names the actor, its request and what the nodes have and have free. The campaign stops, with
  one line saying why, only when an actor's first start failed (its constructor raised, its
  process died) or no generation actor or no backend can be placed.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: the public names, by the module that owns them; imported on first use, so that importing a
#: Ray-free module of the package (`blame`, `work`) imports neither Ray nor the stages
_OWNERS = {
    "ACTOR_ENV": "actors", "THREAD_ENV": "actors", "kill_leftovers": "actors",
    "MAX_NODE_OOM": "blame",
    "backend_lacks": "checks", "backend_merge_keys": "checks", "backend_targets": "checks",
    "bug_db": "checks", "check_resume_config": "checks", "check_specs": "checks",
    "preflight": "checks",
    "actor_needs": "cluster", "campaign_cores": "cluster", "check_resources": "cluster",
    "CampaignError": "errors", "DiskFull": "errors",
    "COVERAGE_DIR": "results",
    "run_campaign": "run",
    "GEN": "stages", "Stages": "stages", "default_stages": "stages",
    "Summary": "summary",
}
__all__ = [  # = _OWNERS' keys
    "ACTOR_ENV", "COVERAGE_DIR", "GEN", "MAX_NODE_OOM", "THREAD_ENV", "CampaignError",
    "DiskFull", "Stages", "Summary", "actor_needs", "backend_lacks", "backend_merge_keys",
    "backend_targets", "bug_db", "campaign_cores", "check_resources", "check_resume_config",
    "check_specs", "default_stages", "kill_leftovers", "preflight", "run_campaign",
]

if TYPE_CHECKING:
    from campaign.driver.actors import ACTOR_ENV, THREAD_ENV, kill_leftovers
    from campaign.driver.blame import MAX_NODE_OOM
    from campaign.driver.checks import (
        backend_lacks,
        backend_merge_keys,
        backend_targets,
        bug_db,
        check_resume_config,
        check_specs,
        preflight,
    )
    from campaign.driver.cluster import actor_needs, campaign_cores, check_resources
    from campaign.driver.errors import CampaignError, DiskFull
    from campaign.driver.results import COVERAGE_DIR
    from campaign.driver.run import run_campaign
    from campaign.driver.stages import GEN, Stages, default_stages
    from campaign.driver.summary import Summary


def __getattr__(name: str) -> Any:
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{owner}"), name)
