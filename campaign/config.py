"""The campaign's Hydra structured config: dataclasses registered in the ConfigStore, so a
mistyped key or a wrongly typed value is an error that names the key.

`conf/config.yaml` extends the `base_config` schema stored here; each `conf/campaign/*.yaml`
fills the `campaign` node. Values Hydra cannot type-check (the budget string, ranges) are checked
by `validate`, whose errors are one line naming the field.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from ir.generate import GenConfig
from mutators import MutationConfig


class ConfigError(ValueError):
    """A config value that is well-typed but unusable; the message names the field."""


@dataclass
class CampaignConfig:
    """What to run and for how long (the `campaign` group, one yaml per preset)."""

    name: str = MISSING
    #: a duration ("30s", "10m", "2h") or a number of tests ("500"); see `parse_budget`
    budget: str = "100"
    #: number of worker actors (one CPU each)
    workers: int = 2
    backends: list[str] = field(default_factory=lambda: ["ort"])
    #: base seed; test i gets `campaign.ids.test_seed(seed, i)`
    seed: int = 0
    #: calls queued per worker actor, so an actor never idles waiting for the driver
    in_flight_per_worker: int = 2
    #: write a results file at least this often ...
    flush_every_s: float = 30.0
    #: ... or as soon as this many rows are buffered
    flush_rows: int = 2000
    #: artifact folders kept per (backend, verdict, error_sig); further findings are only counted
    max_findings_per_signature: int = 5
    #: a worker call running longer than this is a hang: the actor is killed, the test recorded
    #: as a timeout (backends enforce their own, shorter, per-stage limits)
    test_timeout_s: float = 300.0
    #: abort when this many tests in a row fail inside the worker (a harness bug, not a finding)
    max_consecutive_worker_failures: int = 20
    #: backends whose support probe (campaign/probe.py, cached on disk) runs before the
    #: campaign; every op signature one of them cannot compile is kept out of the generator
    probe: list[str] = field(default_factory=list)


@dataclass
class RayConfig:
    """Where the workers run (the `ray` group)."""

    #: None starts a private local cluster; "auto" or "host:port" joins a running one
    address: Optional[str] = None
    #: CPUs of the local cluster (None: all cores); ignored when joining a cluster
    num_cpus: Optional[int] = None
    #: GPUs each worker actor reserves (for cuda backends)
    gpus_per_worker: float = 0.0
    #: root of the local cluster's session dirs; short, as socket paths are limited to 107 bytes
    temp_dir: str = "/tmp/dsray"
    #: forward workers' stdout/stderr to the console (off: it interleaves with the progress bar;
    #: the output stays in the Ray session's log files)
    log_to_driver: bool = False
    #: seconds to wait for the first workers to start before giving up
    start_timeout_s: float = 180.0


@dataclass
class OutputConfig:
    """Where results and findings go (the `output` group)."""

    #: None: the Hydra run dir (hydra.run.dir)
    dir: Optional[str] = None


@dataclass
class Config:
    """The whole campaign config (`conf/config.yaml` on top of this schema)."""

    campaign: CampaignConfig = field(default_factory=CampaignConfig)
    generator: GenConfig = field(default_factory=GenConfig)
    mutation: MutationConfig = field(default_factory=MutationConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    output: OutputConfig = field(default_factory=OutputConfig)


def register_configs() -> None:
    """Store the schema as `base_config` (idempotent; the yaml's defaults list names it)."""
    ConfigStore.instance().store(name="base_config", node=Config)


register_configs()


@dataclass(frozen=True)
class Budget:
    """When a campaign stops submitting tests: exactly one of `seconds` and `tests` is set."""

    seconds: Optional[float] = None
    tests: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.tests} tests" if self.tests is not None else f"{self.seconds:g} s"


_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh])")


def parse_budget(s: str | int) -> Budget:
    """`"30s"`, `"10m"`, `"2h"` (a duration) or `"500"` (a test count) -> Budget."""
    text = str(s).strip()
    if text.isdigit():
        if int(text) == 0:
            raise ConfigError(f"campaign.budget: must be positive, got {text!r}")
        return Budget(tests=int(text))
    m = _DURATION.fullmatch(text)
    if not m:
        raise ConfigError(
            f"campaign.budget: cannot parse {text!r} (expected e.g. 30s, 10m, 2h or a test count)"
        )
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    if seconds <= 0:
        raise ConfigError(f"campaign.budget: must be positive, got {text!r}")
    return Budget(seconds=seconds)


def _unknown_keys(node: DictConfig, path: str = "") -> list[str]:
    """Keys of `node` that its dataclass schema lacks (Hydra's `+key=` adds them silently)."""
    schema = OmegaConf.get_type(node)
    fields = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
    found = []
    for key in node.keys():
        full = f"{path}{key}"
        if fields is not None and key not in fields:
            found.append(full)
        if OmegaConf.is_missing(node, key):
            continue
        child = node[key]
        if isinstance(child, DictConfig):
            found += _unknown_keys(child, full + ".")
    return found


def to_config(cfg: Config | DictConfig) -> Config:
    """The plain dataclass form of a (Hydra-composed) config; raises on missing values and on
    keys the schema lacks."""
    if isinstance(cfg, Config):
        return cfg
    unknown = _unknown_keys(cfg)
    if unknown:
        raise ConfigError(f"{unknown[0]}: not a config key (added with '+'? see campaign/config.py)")
    obj: Any = OmegaConf.to_object(cfg)
    if not isinstance(obj, Config):
        raise ConfigError(f"expected a campaign Config, got {type(obj).__name__}")
    return obj


def validate(cfg: Config) -> Budget:
    """Check what the schema cannot; return the parsed budget. Errors name the field."""
    c = cfg.campaign
    budget = parse_budget(c.budget)
    checks = [
        (c.workers >= 1, f"campaign.workers: must be >= 1, got {c.workers}"),
        (c.in_flight_per_worker >= 1,
         f"campaign.in_flight_per_worker: must be >= 1, got {c.in_flight_per_worker}"),
        (len(c.backends) >= 1, "campaign.backends: must name at least one backend"),
        (len(set(c.backends)) == len(c.backends),
         f"campaign.backends: duplicate backend in {list(c.backends)}"),
        (c.flush_every_s > 0, f"campaign.flush_every_s: must be > 0, got {c.flush_every_s}"),
        (c.flush_rows >= 1, f"campaign.flush_rows: must be >= 1, got {c.flush_rows}"),
        (c.max_findings_per_signature >= 0,
         f"campaign.max_findings_per_signature: must be >= 0, got {c.max_findings_per_signature}"),
        (c.test_timeout_s > 0, f"campaign.test_timeout_s: must be > 0, got {c.test_timeout_s}"),
        (c.max_consecutive_worker_failures >= 1,
         "campaign.max_consecutive_worker_failures: must be >= 1, "
         f"got {c.max_consecutive_worker_failures}"),
        (cfg.ray.num_cpus is None or cfg.ray.num_cpus >= 1,
         f"ray.num_cpus: must be >= 1, got {cfg.ray.num_cpus}"),
        (cfg.ray.gpus_per_worker >= 0,
         f"ray.gpus_per_worker: must be >= 0, got {cfg.ray.gpus_per_worker}"),
    ]
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)
    return budget
