"""Checks of a campaign's config before anything starts (`preflight`, a resumed run's config,
the bug database the triage will use), and the facts about its backends that the campaign needs
from their registry (targets, ops they lack, merge keys). Errors name the config field:
ConfigError for a field that cannot work, CampaignError for a resumed run whose config
differs."""
from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path

from omegaconf import OmegaConf

from campaign.budget_plan import BudgetPlan
from campaign.config import Config, ConfigError, validate
from campaign.driver.errors import CampaignError
from campaign.driver.routing import Lacks


def preflight(cfg: Config) -> BudgetPlan:
    """Config checks that need the product's registries; errors name the field. Returns the
    campaign's budget plan (the budget parsed once; a triage that leaves no time fails)."""
    from campaign.backends import BACKENDS

    plan = BudgetPlan.of(validate(cfg), cfg.triage.budget, cfg.triage.enabled)
    for key in ("backends", "probe"):
        unknown = [b for b in getattr(cfg.campaign, key) if b not in BACKENDS]
        check_specs(key, unknown)  # why: a module not found, a bad option, ...
        if unknown:
            raise ConfigError(f"campaign.{key}: unknown backend {unknown[0]!r} "
                              f"(known: {', '.join(sorted(BACKENDS))})")
        check_specs(key, getattr(cfg.campaign, key))
    try:
        if not cfg.generator.enabled_ops():
            raise ConfigError("generator: ops_include/ops_exclude leave no op enabled")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return plan


def check_specs(key: str, specs: list[str]) -> None:
    """Every spec builds (`make_backend`): an unknown option, a bad value or a module that does
    not import is a ConfigError naming `campaign.<key>` and the spec."""
    from campaign.backends import make_backend

    for spec in specs:
        try:
            make_backend(spec)
        except ValueError as e:
            raise ConfigError(f"campaign.{key}: {e}") from None


def backend_targets(cfg: Config) -> dict[str, str]:
    """backend spec -> its target (`cpu` / `cuda`), which decides its actors' GPUs."""
    from campaign.backends import make_backend

    return {b: make_backend(b).target for b in cfg.campaign.backends}


def backend_lacks(cfg: Config) -> dict[str, Lacks]:
    """backend spec -> what it declares it cannot take (`Lacks`: `TestMode.lacks` and
    `refusal` per test mode); empty with capability routing off."""
    from campaign.backends import make_backend

    if not cfg.campaign.route:
        return {}
    return {b: Lacks.of(make_backend(b)) for b in cfg.campaign.backends}


def backend_merge_keys(cfg: Config) -> dict[str, Callable[[int], Hashable]]:
    """backend spec -> what its merged tests must share, from a test's seed
    (`Backend.merge_key`: the control-flow dialect and the configuration its evaluator compiles
    the test in; `campaign.merge.plan` merges only tests of one key). Only for backends that
    merge tests and choose either per test (`dialect=mixed`, `configs` > 0): their calls take
    queued tests of one key, so a call of k tests is one merged module, not one per key."""
    from campaign.backends import make_backend

    keys: dict[str, Callable[[int], Hashable]] = {}
    for b in cfg.campaign.backends:
        opts = cfg.campaign.options(b)
        if opts.merge > 1:
            backend = make_backend(b)
            backend.sample_configs = opts.configs
            if backend.dialect == "mixed" or (opts.configs > 0 and backend.CONFIG_SPACE):
                keys[b] = backend.merge_key
    return keys


def check_resume_config(conf: Config, out_dir: Path) -> None:
    """A resumed campaign must make the same tests: same seed, generator, mutation, backends."""
    old = OmegaConf.load(out_dir / "config.yaml")
    new = OmegaConf.structured(conf)
    for key in ("campaign.seed", "campaign.backends", "campaign.name", "generator", "mutation"):
        a, b = OmegaConf.select(old, key), OmegaConf.select(new, key)
        a = OmegaConf.to_container(a) if OmegaConf.is_config(a) else a
        b = OmegaConf.to_container(b) if OmegaConf.is_config(b) else b
        if a != b:
            raise CampaignError(f"campaign.resume=true: {key} differs from the run in {out_dir} "
                                f"({a!r} there, {b!r} now)")


def bug_db(conf: Config, out_dir: Path) -> Path | None:
    """The bug database the triage will use (`triage.db`, else `runs/bugdb` for an output dir
    under runs/: `campaign.triage.bugdb.store.resolve`), written back into `conf.triage.db` (`off`
    for none) so config.yaml records it; ConfigError (before any testing) when it is unusable."""
    from campaign.triage.bugdb.store import BugDb, BugDbError, resolve

    path = resolve(conf.triage.db, out_dir) if conf.triage.enabled else None
    conf.triage.db = str(path) if path is not None else "off"
    if path is None:
        return None
    try:
        BugDb.open(path)
    except BugDbError as e:
        raise ConfigError(str(e)) from None
    return path
