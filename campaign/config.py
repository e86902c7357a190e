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
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from campaign.compiler_coverage import CoverageConfig
from campaign.env_fault import EnvFaultConfig
from campaign.proctree import START_METHODS
from campaign.triage.config import TriageConfig
from ir.gen.builder import GenConfig
from mutators import MutationConfig


class ConfigError(ValueError):
    """A config value that is well-typed but unusable; the message names the field."""


@dataclass
class BackendOptions:
    """How one backend is scheduled: `campaign.backend_options.<spec>` (the spec as written in
    `campaign.backends`). On the command line, change one a preset has with
    `campaign.backend_options.ort.rate=0.2`; add one with
    `'+campaign.backend_options={tvm: {rate: 0.2}}'` (merged with the preset's)."""

    #: evaluation actors of this backend (None: `campaign.workers`)
    actors: int | None = None
    #: share of the tests this backend evaluates, chosen by test seed (a rerun picks the same)
    rate: float = 1.0
    #: when this backend's queue is full, false: the test skips it (counted, no row), so a slow
    #: backend never stalls the others; true: generation waits for it (every sampled test runs)
    wait: bool = False
    #: Ray resources of each of its actors: CPUs, GPUs (None: 1 for a cuda target, else 0;
    #: fractions share a GPU), and custom resources that nodes declare
    #: (`ray start --resources='{"tvm_box": 4}'`)
    num_cpus: float = 1.0
    num_gpus: float | None = None
    resources: dict[str, float] = field(default_factory=dict)
    #: this backend's share of the campaign's cores (`campaign.scheduler`, weighted fair
    #: queueing over the stages' core-seconds; normalized over all stages); an idle backend's
    #: share goes to the others
    share: float = 1.0
    #: independent tests compiled as one module (a slow compiler's time per test barely
    #: grows with the graph); each part is judged on its own, and a merged compile that fails
    #: is split back into its parts, each run alone (campaign/merge.py); 1: no merging
    merge: int = 1
    #: the fraction of tests compiled in a configuration drawn from the backend's
    #: configuration space (`campaign.backends.configs`, docs/configs.md; recorded in the
    #: row's `backend_config`); 0: every test runs the spec's own configuration
    configs: float = 0.0


@dataclass
class GenerationOptions:
    """Ray resources of each generation actor (`campaign.generation`); there are
    `campaign.workers` of them; `share`: generation's share of the cores (as a backend's)."""

    num_cpus: float = 1.0
    resources: dict[str, float] = field(default_factory=dict)
    share: float = 1.0


@dataclass
class CampaignConfig:
    """What to run and for how long (the `campaign` group, one yaml per preset)."""

    name: str = MISSING
    #: a duration ("30s", "10m", "2h") or a number of tests ("500"); see `parse_budget`
    budget: str = "100"
    #: generation actors, and evaluation actors per backend unless its options say otherwise
    workers: int = 2
    backends: list[str] = field(default_factory=lambda: ["ort"])
    #: per-backend scheduling: actors, sampling rate, resources (keys: specs in `backends`)
    backend_options: dict[str, BackendOptions] = field(default_factory=dict)
    generation: GenerationOptions = field(default_factory=GenerationOptions)
    #: base seed; test i gets `campaign.ids.test_seed(seed, i)`
    seed: int = 0
    #: calls queued per actor, so an actor never idles waiting for the driver
    in_flight_per_worker: int = 2
    #: tests per actor call at most; the driver sizes batches so that a call takes ~200 ms
    #: (Ray's per-call cost is paid per batch), starting at 1
    max_batch: int = 16
    #: each backend's queue holds about this many seconds of its work (at least a batch per
    #: actor); a test finding it full skips that backend unless its options say `wait`
    queue_s: float = 5.0
    #: write a results file at least this often ...
    flush_every_s: float = 30.0
    #: ... or as soon as this many rows are buffered
    flush_rows: int = 2000
    #: artifact folders kept per (backend, verdict, error_sig); further findings are only counted
    max_findings_per_signature: int = 5
    #: seconds a backend may take on one test in its sandbox process (import + compile + run)
    sandbox_timeout_s: float = 60.0
    #: a test that runs past `sandbox_timeout_s` is re-run at once in a fresh sandbox process
    #: with this many times the limit, and is a `timeout` only if that runs out too (a compile
    #: slow only under the campaign's load is no hang); 0: no re-run (timeouts unconfirmed)
    confirm_timeout_factor: float = 3.0
    #: how sandbox processes start (`campaign.sandbox`, the process model): `forkserver`, from
    #: a fresh process that never ran autograd (sound on every torch build); `fork`, from the
    #: actor itself (torch from 2.14 refuses autograd in such a child once the actor traced a
    #: training graph: only for comparison)
    sandbox_start_method: str = "forkserver"
    #: a test running longer than this in an actor (per test of a batch) is a hang: the actor
    #: is killed, the test recorded as a timeout; must exceed the sandbox's limit plus its
    #: confirming re-run's, `sandbox_timeout_s * (1 + confirm_timeout_factor)`
    test_timeout_s: float = 300.0
    #: abort when this many tests in a row fail inside the worker (a harness bug, not a finding)
    max_consecutive_worker_failures: int = 20
    #: backends whose support probe (campaign/probe.py, cached on disk) runs before the
    #: campaign; every op signature one of them cannot compile is kept out of the generator
    probe: list[str] = field(default_factory=list)
    #: continue the campaign in `output.dir` (same config): test indices go on after the last
    #: one recorded, so no test id repeats; a test budget counts the tests of every run
    resume: bool = False
    #: cores the campaign's actors may keep busy at once (campaign/scheduler.py: at most this
    #: many actor calls run, handed out by share); None: this machine's cores for a local
    #: cluster, the cluster's CPUs when joining one; 0: no limit (every actor runs when it has
    #: work, `in_flight_per_worker` calls queued on each, and the OS shares the cores)
    cores: int | None = None
    #: capability routing: a test holding an op a backend declares it lacks
    #: (`Backend.LACKS`, e.g. TVM's importer has no Loop) is not sent to it (no row; counted as
    #: not applicable), and a backend that would idle gets tests generated without those ops
    route: bool = True
    #: known bugs (`triage.known`, and on resume the run's own bugs table): a test matching a
    #: known bug's trigger (docs/triage.md) is sent to that bug's backend with this chance
    #: (chosen by test seed), so compile time goes to new tests; 1: no holding back
    known_rate: float = 0.1
    #: build report.html (docs/report.md) in the output dir when the campaign ends
    report: bool = False
    #: seconds a campaign waits for a full disk (results that cannot be written: generation
    #: paused, rows kept in memory, writes retried) before it stops as on Ctrl-C (exit 3;
    #: `campaign.resume=true` continues it)
    disk_wait_s: float = 600.0
    #: compiler coverage per test in the backends' sandboxes, and its feedback into the seed
    #: pool (docs/coverage.md)
    coverage: CoverageConfig = field(default_factory=CoverageConfig)
    #: environment faults (campaign/env_fault.py): a backend of which at least `min_tests`
    #: tests within `window_s` seconds came back, at least `share` of them failing with one
    #: signature, is held back (no more tests; one line says why) and the others go on;
    #: `min_tests: 0` turns it off
    env_fault: EnvFaultConfig = field(default_factory=EnvFaultConfig)

    def options(self, backend: str) -> BackendOptions:
        return self.backend_options.get(backend) or BackendOptions()

    def actors_of(self, backend: str) -> int:
        n = self.options(backend).actors
        return self.workers if n is None else n


@dataclass
class RayConfig:
    """Where the workers run (the `ray` group)."""

    #: None starts a private local cluster; "auto" (the cluster `ray start --head` started on
    #: this machine) or "host:port" joins a running one, with token authentication
    #: (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token holds the cluster's token)
    address: str | None = None
    #: logical CPUs of the local cluster (None: the cores, or what the campaign's actors ask
    #: for if more: they are pipeline stages, rarely all busy); ignored when joining
    num_cpus: int | None = None
    #: custom resources the local cluster declares (e.g. to try `resources` options locally)
    resources: dict[str, float] = field(default_factory=dict)
    #: root of the local cluster's session dirs; short, as socket paths are limited to 107 bytes
    temp_dir: str = "/tmp/dsray"
    #: forward workers' stdout/stderr to the console (off: it interleaves with the progress bar;
    #: the output stays in the Ray session's log files)
    log_to_driver: bool = False
    #: seconds an actor may wait to be placed before it is given up on (its backend goes on
    #: without it); an actor placed and still starting is waited for, said so every this often
    start_timeout_s: float = 180.0


@dataclass
class OutputConfig:
    """Where results and findings go (the `output` group)."""

    #: None: the Hydra run dir (hydra.run.dir)
    dir: str | None = None


@dataclass
class Config:
    """The whole campaign config (`conf/config.yaml` on top of this schema)."""

    campaign: CampaignConfig = field(default_factory=CampaignConfig)
    generator: GenConfig = field(default_factory=GenConfig)
    mutation: MutationConfig = field(default_factory=MutationConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    #: what runs when the campaign ends: buckets, reductions, reproducers (docs/triage.md)
    triage: TriageConfig = field(default_factory=TriageConfig)


def register_configs() -> None:
    """Store the schema as `base_config` (idempotent; the yaml's defaults list names it)."""
    ConfigStore.instance().store(name="base_config", node=Config)


register_configs()


@dataclass(frozen=True)
class Budget:
    """When a campaign stops submitting tests: exactly one of `seconds` and `tests` is set."""

    seconds: float | None = None
    tests: int | None = None

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
        full = f"{path}{key!s}"
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


def mutation_checks(m: MutationConfig) -> list[tuple[bool, str]]:
    """The `mutation` group's checks (docs/mutation.md)."""
    from mutators import MUTATORS
    from mutators.model_seeds import entry_problem

    unknown = sorted(set(m.weights) - set(MUTATORS))
    seeds_problem = entry_problem(m.seeds)
    return [
        (0.0 <= m.rate <= 1.0, f"mutation.rate: must be in [0, 1], got {m.rate}"),
        (m.max_steps >= 1, f"mutation.max_steps: must be >= 1, got {m.max_steps}"),
        (m.retries >= 1, f"mutation.retries: must be >= 1, got {m.retries}"),
        (m.pool_size >= 1, f"mutation.pool_size: must be >= 1, got {m.pool_size}"),
        (not unknown, f"mutation.weights: unknown mutator {unknown[0]!r} (known: "
                      f"{', '.join(sorted(MUTATORS))})" if unknown else ""),
        (all(w >= 0 for w in m.weights.values()), "mutation.weights: weights must be >= 0"),
        (not seeds_problem, seeds_problem),
        (m.model_weights in ("real", "fresh"),
         f"mutation.model_weights: must be real or fresh, got {m.model_weights!r}"),
        (m.windows >= 1, f"mutation.windows: must be >= 1, got {m.windows}"),
        (1 <= m.window_min <= m.window_max,
         f"mutation.window_min, window_max: need 1 <= window_min <= window_max, got "
         f"{m.window_min}, {m.window_max}"),
    ]


def drop_unlisted_options(cfg: Config) -> list[str]:
    """Remove `campaign.backend_options` entries (and `campaign.compiler_coverage.rates`/`packages`
    ones) whose spec is not in `campaign.backends` (a
    preset's options for a backend the user's `campaign.backends=[...]` left out); returns
    their specs, so the caller can warn about those the user set on the command line."""
    c = cfg.campaign
    dropped = [spec for spec in c.backend_options if spec not in c.backends]
    for spec in dropped:
        del c.backend_options[spec]
    # a preset's per-backend coverage rates and packages go with them, silently
    for table in (c.coverage.rates, c.coverage.packages):
        for spec in [s for s in table if s not in c.backends]:
            del table[spec]
    return dropped


def set_on_command_line(spec: str, overrides: list[str]) -> bool:
    """Whether one of Hydra's task overrides sets options of backend `spec`."""
    for o in overrides:
        key, _, value = o.lstrip("+~").partition("=")
        if key.startswith(f"campaign.backend_options.{spec}"):  # .ort.rate=... or .ort=...
            rest = key[len(f"campaign.backend_options.{spec}"):]
            if rest in ("", ) or rest.startswith("."):
                return True
        if key == "campaign.backend_options" and re.search(
                rf"[{{,]\s*['\"]?{re.escape(spec)}['\"]?\s*:", value):
            return True
    return False


#: (file, problem) of bad seeds already warned about (validate may run twice per campaign)
_warned_seeds: set[tuple[str, str]] = set()


def seed_problem(m: MutationConfig) -> str:
    """The first bad file of `mutation.seeds` as one line (`mutation.seeds: <file>:<line>:
    problem`), "" when every file parses and verifies, or when bad ones are skipped
    (`mutation.skip_bad_seeds`: a warning per file instead). Seeds matter only when mutation
    is on (`mutation.rate` > 0)."""
    import logging

    from mutators.model_seeds import entry_problem, load_all, options_of
    from mutators.source import SeedError

    if entry_problem(m.seeds) or m.rate <= 0:
        return ""  # mutation_checks says so
    bad: list[tuple[Any, SeedError]] = []
    load_all(m.seeds, options_of(m), skip_bad=True, bad=bad)
    if bad and not m.skip_bad_seeds:
        return (f"mutation.seeds: {bad[0][1]}"
                + (f" (and {len(bad) - 1} more bad files)" if len(bad) > 1 else "")
                + "; fix it, or set mutation.skip_bad_seeds=true to leave bad seeds out")
    for f, e in bad:
        if (str(f), str(e)) not in _warned_seeds:
            _warned_seeds.add((str(f), str(e)))
            logging.getLogger(__name__).warning("mutation.seeds: seed left out: %s", e)
    return ""


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
        (c.sandbox_start_method in START_METHODS,
         f"campaign.sandbox_start_method: must be one of {', '.join(START_METHODS)}, got "
         f"{c.sandbox_start_method!r}"),
        (c.sandbox_timeout_s > 0,
         f"campaign.sandbox_timeout_s: must be > 0, got {c.sandbox_timeout_s}"),
        (c.confirm_timeout_factor == 0 or c.confirm_timeout_factor >= 1,
         f"campaign.confirm_timeout_factor: must be 0 (no re-run) or >= 1, "
         f"got {c.confirm_timeout_factor}"),
        (c.test_timeout_s > c.sandbox_timeout_s * (1 + c.confirm_timeout_factor),
         f"campaign.test_timeout_s: must exceed sandbox_timeout_s * (1 + confirm_timeout_factor)"
         f" = {c.sandbox_timeout_s * (1 + c.confirm_timeout_factor):g} (a timeout and its "
         f"confirming re-run), got {c.test_timeout_s}"),
        (c.max_consecutive_worker_failures >= 1,
         "campaign.max_consecutive_worker_failures: must be >= 1, "
         f"got {c.max_consecutive_worker_failures}"),
        (c.max_batch >= 1, f"campaign.max_batch: must be >= 1, got {c.max_batch}"),
        (c.queue_s >= 0, f"campaign.queue_s: must be >= 0, got {c.queue_s}"),
        (c.cores is None or c.cores >= 0, f"campaign.cores: must be >= 0, got {c.cores}"),
        (0.0 <= c.known_rate <= 1.0,
         f"campaign.known_rate: must be in [0, 1], got {c.known_rate}"),
        (c.generation.share > 0,
         f"campaign.generation.share: must be > 0, got {c.generation.share}"),
        (c.disk_wait_s >= 0, f"campaign.disk_wait_s: must be >= 0, got {c.disk_wait_s}"),
        (cfg.ray.num_cpus is None or cfg.ray.num_cpus >= 1,
         f"ray.num_cpus: must be >= 1, got {cfg.ray.num_cpus}"),
        (c.generation.num_cpus >= 0,
         f"campaign.generation.num_cpus: must be >= 0, got {c.generation.num_cpus}"),
    ]
    for name, amount in {**c.generation.resources, **cfg.ray.resources}.items():
        checks.append((amount >= 0, f"resource {name!r}: must be >= 0, got {amount}"))
    for spec, o in c.backend_options.items():
        key = f"campaign.backend_options.{spec}"
        checks += [
            (spec in c.backends, f"{key}: {spec!r} is not in campaign.backends {list(c.backends)}"),
            (o.actors is None or o.actors >= 1, f"{key}.actors: must be >= 1, got {o.actors}"),
            (0.0 < o.rate <= 1.0, f"{key}.rate: must be in (0, 1], got {o.rate}"),
            (o.num_cpus >= 0, f"{key}.num_cpus: must be >= 0, got {o.num_cpus}"),
            (o.share > 0, f"{key}.share: must be > 0, got {o.share}"),
            (o.merge >= 1, f"{key}.merge: must be >= 1, got {o.merge}"),
            (0.0 <= o.configs <= 1.0, f"{key}.configs: must be in [0, 1], got {o.configs}"),
            (o.num_gpus is None or o.num_gpus >= 0,
             f"{key}.num_gpus: must be >= 0, got {o.num_gpus}"),
        ]
        checks += [(v >= 0, f"{key}.resources.{r}: must be >= 0, got {v}")
                   for r, v in o.resources.items()]
    checks += c.coverage.problems(list(c.backends))
    checks += c.env_fault.problems()
    checks += mutation_checks(cfg.mutation)
    for ok, msg in checks:
        if not ok:
            raise ConfigError(msg)
    msg = seed_problem(cfg.mutation)
    if msg:
        raise ConfigError(msg)
    from campaign.triage.config import problem as triage_problem

    triage_msg = triage_problem(cfg.triage)
    if triage_msg:
        raise ConfigError(triage_msg)
    return budget
