"""Run a fuzzing campaign: `python run.py [campaign=cpu_ort] [campaign.budget=30s] [...]`.
Report on campaigns: `python run.py report runs/cpu_ort [-o report.html]` (docs/report.md).

Config: conf/config.yaml on the schema in campaign/config.py. Output: results/ (Parquet),
findings/, config.yaml and summary.json in `output.dir`, by default the Hydra run dir (one per
job of a `-m` sweep). Exit status: 0 done, 2 config or cluster error, 3 stopped (results could
not be written for campaign.disk_wait_s: summary printed, `campaign.resume=true` continues),
130 interrupted (Ctrl-C: results flushed, summary printed).
"""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from campaign.config import (
    ConfigError,
    drop_unlisted_options,
    register_configs,
    set_on_command_line,
    to_config,
    validate,
)

register_configs()


def _drop_unlisted_options(conf) -> None:
    """Options of backends no longer in `campaign.backends` go; a warning for those the user
    set on the command line (a preset's are dropped silently)."""
    overrides = list(HydraConfig.get().overrides.task)
    for spec in drop_unlisted_options(conf):
        if set_on_command_line(spec, overrides):
            print(f"warning: campaign.backend_options.{spec}: ignored, {spec!r} is not in "
                  f"campaign.backends {list(conf.campaign.backends)}", file=sys.stderr)


def _output_dir(conf) -> Path:
    """`output.dir` (or the Hydra run dir), created; ConfigError when it cannot be."""
    out = Path(conf.output.dir or HydraConfig.get().runtime.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"output.dir: cannot create {str(out)!r}: "
                          f"{e.strerror or e}") from None
    return out


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        conf = to_config(cfg)
        _drop_unlisted_options(conf)
        validate(conf)  # before the slow imports below, so a bad value fails at once
        if conf.campaign.resume and not conf.output.dir:
            raise ConfigError("campaign.resume=true: set output.dir to the output directory of "
                              "the run to continue")
        out_dir = _output_dir(conf)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    from campaign.driver import CampaignError, run_campaign  # imports Ray and torch
    from campaign.stop_signals import exit_status

    try:
        summary = run_campaign(conf, out_dir)
    except (ConfigError, CampaignError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if summary.stopped:  # e.g. a full disk for campaign.disk_wait_s
        sys.exit(3)
    if summary.interrupted:  # 130 after Ctrl-C, 143 after SIGTERM
        sys.exit(exit_status(summary.signal or "SIGINT"))


if __name__ == "__main__":
    if sys.argv[1:2] == ["report"]:  # python run.py report DIR... (the dashboard; no Hydra)
        from campaign.report.cli import main as report_main

        sys.exit(report_main(sys.argv[2:]))
    main()
