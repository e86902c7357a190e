"""`run_campaign`: one campaign from its config to its summary. Checks the config, starts or
joins Ray, runs the testing phase (`campaign.driver.loop`) and, however it ends (the budget,
Ctrl-C, SIGTERM, a full disk, an error), flushes the rows, writes the summary and stops the
actors and what their sandboxes left; then the triage and report.html."""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from campaign.config import Config, ConfigError, to_config
from campaign.driver import checks
from campaign.driver.actors import kill_leftovers
from campaign.driver.campaign import Campaign
from campaign.driver.cluster import actor_needs, campaign_cores, check_resources, start_ray
from campaign.driver.errors import CampaignError, DiskFull
from campaign.driver.loop import Loop
from campaign.driver.stages import Stages, default_stages
from campaign.driver.summary import Summary, summarize
from campaign.stop_signals import sigterm_stops_campaign, warn_if_ctrl_c_ignored
from campaign.storage import ResultSink

log = logging.getLogger(__name__)

#: seconds of a wall-clock budget kept for building report.html after the triage
REPORT_S = 4.0


def _report(out_dir: Path) -> None:
    """report.html in the output dir (docs/report.md); a failure is logged, never raised."""
    try:
        from campaign.report import build_report

        res = build_report([out_dir], out_dir / "report.html")
        print(f"report: {res.out} ({res.size_bytes / 1e6:.1f} MB)", flush=True)
    except Exception as e:
        log.warning("report.html not built: %s: %s", type(e).__name__, e)


def run_campaign(cfg: Config | DictConfig, out_dir: Path, *,
                 stages: Stages | None = None) -> Summary:
    """Run one campaign into `out_dir` (results/, findings/, config.yaml, summary.json) and
    return its summary. `stages`: the stage classes (default: campaign.pipeline's).

    Raises ConfigError for an unusable config and CampaignError when the cluster cannot host
    the actors or they cannot start; results gathered so far are flushed either way."""
    conf = to_config(cfg)
    plan = checks.preflight(conf)
    budget = plan.budget
    out_dir = Path(out_dir)
    if conf.campaign.resume and not (out_dir / "config.yaml").is_file():
        raise CampaignError(f"campaign.resume=true: {out_dir} holds no campaign (no config.yaml); "
                            "set output.dir to the output directory of the run to continue")
    if conf.campaign.probe:
        from campaign.probe import deny_list  # runs the backends in this process, once cached

        conf.generator.deny = sorted(set(conf.generator.deny) | set(deny_list(conf.campaign.probe)))
        log.warning("support probe of %s: %d signatures kept out of the generator",
                    ", ".join(conf.campaign.probe), len(conf.generator.deny))
    if conf.campaign.resume:  # after the probe: config.yaml holds the deny list it made
        checks.check_resume_config(conf, out_dir)
    targets = checks.backend_targets(conf)
    needs = actor_needs(conf, targets)
    stages = stages or default_stages(conf)
    known = conf.triage.known + ([str(out_dir)] if conf.campaign.resume else [])
    db = checks.bug_db(conf, out_dir)
    from campaign.triage.pipeline.note_known import findings_dir

    notes = findings_dir(conf.triage.findings)
    if (known or db or notes) and hasattr(stages.config, "known"):
        from campaign.known import db_triggers, load_triggers
        from campaign.triage.pipeline.note_known import note_triggers

        stages.config.known = (load_triggers(known) + (db_triggers(db) if db else [])
                               + note_triggers(notes, db))
        log.warning("known bugs: %d triggers from %s", len(stages.config.known),
                    ", ".join(known + ([str(db)] if db else []) + ([str(notes)] if notes else [])))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"output.dir: cannot create {str(out_dir)!r}: {e.strerror or e}") from None
    if not conf.campaign.resume:
        try:
            (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(conf)))
        except OSError as e:
            raise CampaignError(f"output.dir: cannot write {out_dir / 'config.yaml'}: "
                                f"{e.strerror or e}") from None
    started = start_ray(conf, needs)
    t0 = time.monotonic()  # the budget counts from here: Ray's start-up is not in it
    camp: Campaign | None = None
    interrupted = False
    by_signal: str | None = None
    stopped: str | None = None
    try:
        check_resources(conf, needs)
        camp = Campaign(conf, plan, out_dir, stages, needs, targets,
                        cores=campaign_cores(conf, started and not conf.ray.address),
                        lacks=checks.backend_lacks(conf),
                        merge_keys=checks.backend_merge_keys(conf))
        camp.begin(t0)
        warn_if_ctrl_c_ignored(log)
        with logging_redirect_tqdm(), sigterm_stops_campaign() as received:
            try:
                camp.start_actors()
                total = (budget.tests - camp.next_index) if budget.tests is not None else None
                camp.recorder.bar = tqdm(total=total, unit="test", dynamic_ncols=True,
                                         disable=None, desc=conf.campaign.name)
                Loop(camp).run()
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (`Terminated`)
                interrupted, by_signal = True, received.stop_signal()
            except DiskFull as e:  # stops as on Ctrl-C, with its reason
                interrupted, stopped = True, str(e)
                log.error("%s", e)
            finally:
                camp.t_end = time.monotonic()
                if camp.recorder.bar is not None:
                    camp.recorder.bar.close()
    finally:
        if camp is not None:
            camp.sink.close()
            spill = _spill(camp.sink)
            camp.recorder.write_coverage(out_dir)
            summary = summarize(camp, interrupted, _actor_table(camp))
            summary.stopped, summary.signal = stopped, by_signal
            summary.rows_spilled, summary.spill_file = spill
            camp.stop_actors()
        if started:
            ray.shutdown()
        if camp is not None:
            kill_leftovers(camp.run_id)
    assert camp is not None
    try:
        (out_dir / "summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    except OSError as e:  # a full disk: the printed summary is all there is
        log.warning("summary.json: cannot write to %s (%s)", out_dir, e.strerror or e)
    print(summary.text(), flush=True)
    if conf.triage.enabled and not interrupted:
        from campaign.triage.pipeline.campaign_triage import triage_campaign  # buckets, reductions, repro.py

        end = t0 + plan.total_s - REPORT_S if plan.total_s is not None else None
        try:
            triage_campaign(out_dir, conf.triage, log=tqdm.write, deadline=end)
        except OSError as e:  # a full disk: the results are safe, triage can run later
            log.warning("triage: stopped, cannot write to %s (%s); run `python -m "
                        "campaign.triage %s` when there is space", out_dir, e.strerror or e,
                        out_dir)
    if conf.campaign.report and not interrupted:
        _report(out_dir)
    return summary


def _actor_table(campaign: Campaign) -> Callable[[], list[dict[str, Any]]]:
    """Where each actor ran, for the summary; none when that cannot be known (e.g. the
    cluster went away)."""

    def table() -> list[dict[str, Any]]:
        try:
            return campaign.actor_table()
        except Exception:
            return []

    return table


def _spill(sink: ResultSink) -> tuple[int, str | None]:
    """Rows the sink still holds after its last flush failed: written to the spill dir
    (`ResultSink.spill`), so a resume gets them back; (rows, file or None when lost)."""
    n = sink.buffered
    if not n:
        return 0, None
    try:
        f = sink.spill()
    except OSError as e:
        log.error("results: %d rows could not be written anywhere (%s)", n, e.strerror or e)
        return n, None
    log.warning("results: %d rows kept in %s until campaign.resume=true moves them back", n, f)
    return n, str(f)
