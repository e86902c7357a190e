"""The stage classes a campaign's actors are made of, and the generation stage's name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from campaign.config import Config

#: the generation stage's name in summaries and actor names
GEN = "generate"


@dataclass
class Stages:
    """The stage classes and the config their actors are built with: `generator_cls(config,
    name)` with `generate(items) -> results`, `evaluator_cls(config, backend, name)` with
    `evaluate(cases) -> results` (see campaign.pipeline; tests pass light doubles)."""

    generator_cls: type
    evaluator_cls: type
    config: Any


def default_stages(cfg: Config) -> Stages:
    """campaign.pipeline's stages, with the worker config `cfg` asks for."""
    from campaign.pipeline import Evaluator, Generator
    from campaign.sandbox import SandboxConfig
    from campaign.worker import WorkerConfig

    c = cfg.campaign
    return Stages(Generator, Evaluator, WorkerConfig(
        generator=cfg.generator, backends=list(c.backends), mutation=cfg.mutation,
        limits=SandboxConfig(timeout_s=c.sandbox_timeout_s,
                             confirm_timeout_factor=c.confirm_timeout_factor,
                             start_method=c.sandbox_start_method),
        merge={b: c.options(b).merge for b in c.backends if c.options(b).merge > 1},
        configs={b: c.options(b).configs for b in c.backends if c.options(b).configs > 0},
        compiler_coverage=c.coverage))
