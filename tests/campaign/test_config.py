"""The Hydra config: presets compose, typos are errors naming the key, budgets parse."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from campaign.config import (
    BackendOptions,
    Budget,
    CampaignConfig,
    Config,
    ConfigError,
    parse_budget,
    to_config,
    validate,
)
from ir.gen.builder import GenConfig
from mutators import MutationConfig

CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_the_tour_is_the_default_and_converts_to_dataclasses():
    """`python run.py` shows the product: dynamic graphs on four compilers, two minutes of
    wall clock, the triage and report.html at the end."""
    cfg = to_config(_compose())
    assert cfg.campaign.name == "tour"
    assert cfg.campaign.backends == ["ort", "tvm", "inductor?dialect=mixed", "onnx_export"]
    assert isinstance(cfg.generator, GenConfig) and isinstance(cfg.mutation, MutationConfig)
    assert cfg.generator.p_if > 0 and cfg.generator.p_loop > 0 and cfg.generator.p_inplace > 0
    assert cfg.ray.address is None and cfg.output.dir is None
    assert cfg.campaign.report and cfg.triage.enabled and cfg.triage.budget == "25%"
    assert validate(cfg) == Budget(seconds=120.0)


def test_shares_cores_and_triage_shares_are_checked():
    from campaign.budget_plan import BudgetPlan

    for override, msg in [
        ("campaign.backend_options.ort.share=0", "campaign.backend_options.ort.share: must be > 0, got 0.0"),
        ("campaign.generation.share=-1", "campaign.generation.share: must be > 0, got -1.0"),
        ("campaign.cores=-2", "campaign.cores: must be >= 0, got -2"),
        ("campaign.known_rate=2", "campaign.known_rate: must be in [0, 1], got 2.0"),
        ("campaign.env_fault.share=0.3",
         "campaign.env_fault.share: must be in (0.5, 1], got 0.3"),
        ("triage.budget=150%", "triage.budget: a share must be between 0% and 100%, got '150%'"),
        ("triage.budget=soon", "triage.budget: a duration like 10m, a share like 25% (or 0: "
                               "no reductions), got 'soon'"),
        ("triage.newer_pythons=[/no/such/python]",
         "triage.newer_pythons: '/no/such/python' is not an executable file"),
        ("campaign.sandbox_start_method=spawn",
         "campaign.sandbox_start_method: must be one of forkserver, fork, got 'spawn'"),
    ]:
        with pytest.raises(ConfigError) as ei:
            validate(to_config(_compose("campaign=smoke", override)))
        assert str(ei.value) == msg
    cfg = to_config(_compose("campaign.budget=2m", "triage.budget=2m"))
    with pytest.raises(ConfigError) as ei:
        BudgetPlan.of(validate(cfg), cfg.triage.budget)
    assert str(ei.value) == ("triage.budget: 2m (120 s) leaves no time for testing in "
                             "campaign.budget=120 s (3.6 s are kept for stopping): give the "
                             "triage less, or the campaign more")
    plan = BudgetPlan.of(validate(to_config(_compose("campaign.budget=10m"))), "25%")
    assert (plan.testing_s, plan.triage_s, plan.total_s) == (600 - 150 - 15, 150, 600)
    assert BudgetPlan.of(validate(to_config(_compose("campaign=smoke"))), "25%").testing_s is None


def test_cpu_ort_preset_and_budget_override():
    cfg = to_config(_compose("campaign=cpu_ort", "campaign.budget=30s"))
    assert cfg.campaign.name == "cpu_ort"
    assert validate(cfg) == Budget(seconds=30.0)
    assert validate(to_config(_compose("campaign=cpu_ort"))) == Budget(seconds=600.0)


def test_mistyped_key_is_a_clear_error():
    with pytest.raises(ConfigCompositionException) as ei:
        _compose("campaign.budgett=1")
    assert "Could not override 'campaign.budgett'" in str(ei.value)
    assert "Key 'budgett' not in 'CampaignConfig'" in str(ei.value.__cause__)


def test_mistyped_value_is_a_clear_error():
    with pytest.raises(ConfigCompositionException) as ei:
        _compose("campaign.workers=two")
    assert "campaign.workers=two" in str(ei.value)
    assert "Value 'two' of type 'str' could not be converted to Integer" in str(ei.value.__cause__)


@pytest.mark.parametrize("text, budget", [
    ("30s", Budget(seconds=30.0)), ("10m", Budget(seconds=600.0)), ("2h", Budget(seconds=7200.0)),
    ("1.5m", Budget(seconds=90.0)), ("500", Budget(tests=500)), (" 20 ", Budget(tests=20)),
    (150, Budget(tests=150)),
])
def test_parse_budget_good(text, budget):
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text, message", [
    ("10q", "campaign.budget: cannot parse '10q' (expected e.g. 30s, 10m, 2h or a test count)"),
    ("", "campaign.budget: cannot parse '' (expected e.g. 30s, 10m, 2h or a test count)"),
    ("-5", "campaign.budget: cannot parse '-5' (expected e.g. 30s, 10m, 2h or a test count)"),
    ("m", "campaign.budget: cannot parse 'm' (expected e.g. 30s, 10m, 2h or a test count)"),
    ("0", "campaign.budget: must be positive, got '0'"),
    ("0s", "campaign.budget: must be positive, got '0s'"),
])
def test_parse_budget_bad(text, message):
    with pytest.raises(ConfigError) as ei:
        parse_budget(text)
    assert str(ei.value) == message


@pytest.mark.parametrize("field, value, message", [
    ("workers", 0, "campaign.workers: must be >= 1, got 0"),
    ("in_flight_per_worker", 0, "campaign.in_flight_per_worker: must be >= 1, got 0"),
    ("backends", [], "campaign.backends: must name at least one backend"),
    ("backends", ["ort", "ort"], "campaign.backends: duplicate backend in ['ort', 'ort']"),
    ("flush_rows", 0, "campaign.flush_rows: must be >= 1, got 0"),
    ("sandbox_timeout_s", 0, "campaign.sandbox_timeout_s: must be > 0, got 0"),
    ("confirm_timeout_factor", 0.5,
     "campaign.confirm_timeout_factor: must be 0 (no re-run) or >= 1, got 0.5"),
    ("test_timeout_s", 200.0,
     "campaign.test_timeout_s: must exceed sandbox_timeout_s * (1 + confirm_timeout_factor) = "
     "240 (a timeout and its confirming re-run), got 200.0"),
])
def test_validate_names_the_field(field, value, message):
    cfg = Config(campaign=CampaignConfig(name="t", **{field: value}))
    with pytest.raises(ConfigError) as ei:
        validate(cfg)
    assert str(ei.value) == message


@pytest.mark.parametrize("override, key", [("+campaign.foo=1", "campaign.foo"),
                                           ("+generator.nodez=3", "generator.nodez")])
def test_key_appended_with_plus_is_rejected(override, key):
    with pytest.raises(ConfigError) as ei:
        to_config(_compose(override))
    assert str(ei.value) == f"{key}: not a config key (added with '+'? see campaign/config.py)"


def test_every_preset_composes_and_validates():
    presets = sorted(p.stem for p in (Path(CONF_DIR) / "campaign").glob("*.yaml"))
    assert {"tour", "smoke", "cpu_ort", "cpu_all", "cpu_dynamic", "cpu_tvm", "gpu_tvm"} <= set(presets)
    for name in presets:
        cfg = to_config(_compose(f"campaign={name}"))
        assert cfg.campaign.name == name
        validate(cfg)
    dynamic = to_config(_compose("campaign=cpu_dynamic"))
    assert dynamic.generator.p_if > 0 and dynamic.generator.p_loop > 0
    configs = to_config(_compose("campaign=cpu_configs"))
    assert all(configs.campaign.options(b).configs > 0 for b in configs.campaign.backends)


def test_a_configs_fraction_outside_0_1_is_a_clear_error():
    with pytest.raises(ConfigError) as ei:
        validate(to_config(_compose("campaign=cpu_configs",
                                    "campaign.backend_options.tvm.configs=1.5")))
    assert str(ei.value) == "campaign.backend_options.tvm.configs: must be in [0, 1], got 1.5"


def test_unknown_probe_backend_is_a_clear_error():
    from campaign.driver.checks import preflight

    with pytest.raises(ConfigError, match=r"^campaign.probe: unknown backend 'nope' \(known: "):
        preflight(to_config(_compose("campaign.probe=[nope]")))


def test_gpu_preset_puts_each_cuda_backend_on_its_own_gpu_share():
    cfg = to_config(_compose("campaign=gpu_tvm"))
    assert cfg.campaign.backends == ["tvm_cuda", "tvm_torch_cuda", "ort_cuda", "inductor_cuda"]
    assert all(cfg.campaign.options(b).num_gpus == 0.25 and cfg.campaign.actors_of(b) == 1
               for b in cfg.campaign.backends)


def test_backend_options_from_the_command_line():
    cfg = to_config(_compose("campaign=cpu_all", "campaign.backend_options.tvm.rate=0.2",
                             "campaign.backend_options.ort.actors=3"))
    assert cfg.campaign.options("tvm").rate == 0.2 and cfg.campaign.actors_of("ort") == 3
    cfg = to_config(_compose("campaign=cpu_ort", "campaign.backends=[ort,tvm]",
                             "+campaign.backend_options={tvm: {rate: 0.5, num_gpus: 0}}"))
    assert cfg.campaign.options("tvm").rate == 0.5 and cfg.campaign.options("ort").wait
    assert cfg.campaign.actors_of("tvm") == cfg.campaign.workers  # default: one per worker
    assert validate(cfg) == Budget(seconds=600.0)
    with pytest.raises(ConfigCompositionException):
        _compose("campaign=cpu_ort", "campaign.backend_options.ort.ratee=0.2")


@pytest.mark.parametrize("options, message", [
    ({"tvm": BackendOptions()}, "campaign.backend_options.tvm: 'tvm' is not in campaign.backends "
                                "['ort']"),
    ({"ort": BackendOptions(rate=0.0)}, "campaign.backend_options.ort.rate: must be in (0, 1], got 0.0"),
    ({"ort": BackendOptions(actors=0)}, "campaign.backend_options.ort.actors: must be >= 1, got 0"),
    ({"ort": BackendOptions(num_gpus=-1)},
     "campaign.backend_options.ort.num_gpus: must be >= 0, got -1"),
    ({"ort": BackendOptions(resources={"box": -1})},
     "campaign.backend_options.ort.resources.box: must be >= 0, got -1"),
])
def test_backend_options_are_checked(options, message):
    cfg = Config(campaign=CampaignConfig(name="t", backends=["ort"], backend_options=options))
    with pytest.raises(ConfigError) as ei:
        validate(cfg)
    assert str(ei.value) == message


def test_the_sandbox_limits_reach_the_evaluators():
    from campaign.driver.stages import default_stages

    cfg = Config(campaign=CampaignConfig(name="t", sandbox_timeout_s=20.0,
                                         confirm_timeout_factor=2.0))
    validate(cfg)
    limits = default_stages(cfg).config.limits
    assert (limits.timeout_s, limits.confirm_timeout_factor) == (20.0, 2.0)


def test_cpu_tvm_makes_no_test_tvm_cannot_import():
    """TVM 0.27's Relax ONNX importer has no Loop, Scan, LSTM, GRU or RNN: cpu_tvm's generator
    and mutators (mutation rate 0.8, the shipped seeds) make none, and still make ifs."""
    from campaign.driver.stages import default_stages
    from campaign.worker import FuzzWorker

    wcfg = default_stages(to_config(_compose("campaign=cpu_tvm"))).config
    wcfg.sandbox = False
    worker = FuzzWorker(wcfg)
    ops: set[str] = set()
    for seed in range(60):
        tc = worker.make_test(f"t{seed}", seed)
        ops |= {inst.op.name for inst, _ in tc.graph.walk()}
        worker.mutation.observe(tc.test_id, tc.graph, tc.lineage, True, None)
    assert not ops & {"loop", "scan", "lstm", "gru", "rnn"}
    assert "if" in ops and len(ops) > 30


def test_overriding_backends_drops_the_presets_options_for_the_others():
    from campaign.config import drop_unlisted_options, set_on_command_line

    cfg = to_config(_compose("campaign=cpu_ort", "campaign.backends=[tvm]"))
    assert drop_unlisted_options(cfg) == ["ort"]
    assert cfg.campaign.backend_options == {}
    assert validate(cfg) == Budget(seconds=600.0)
    overrides = ["campaign.backends=[tvm]", "campaign.backend_options.ort.rate=0.5"]
    assert set_on_command_line("ort", overrides)
    assert not set_on_command_line("ort", overrides[:1])
    assert set_on_command_line("ort", ["+campaign.backend_options={ort: {rate: 0.2}}"])
    assert not set_on_command_line("ort", ["campaign.backend_options.ort_noopt.rate=0.5",
                                           "+campaign.backend_options={ort_noopt: {rate: 1}}"])


@pytest.mark.parametrize("spec, message", [
    ("tvm?opt_level=9", "campaign.backends: backend 'tvm?opt_level=9': tvm: opt_level must be "
                        "0..3, got 9"),
    ("tvm?opt_levl=3", "campaign.backends: backend 'tvm?opt_levl=3': unknown option 'opt_levl' "
                       "(known: target, opt_level, pipeline, mcpu)"),
    ("nosuchmod.x:Y", "campaign.backends: backend 'nosuchmod.x:Y': cannot import module "
                      "'nosuchmod.x': No module named 'nosuchmod'"),
])
def test_an_error_in_a_backend_spec_names_the_spec(spec, message):
    from campaign.config import drop_unlisted_options
    from campaign.driver.checks import preflight

    cfg = to_config(_compose("campaign=cpu_ort", f"campaign.backends=['{spec}']"))
    drop_unlisted_options(cfg)
    with pytest.raises(ConfigError) as e:
        preflight(cfg)
    assert str(e.value) == message
