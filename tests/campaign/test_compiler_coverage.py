"""Compiler coverage (campaign/compiler_coverage.py, docs/coverage.md): measured in the backend's
sandbox process for its packages only, the union kept by the worker across sandbox processes,
`cov_new` in the rows, and novelty in the seed pool. The compiler is the stand-in
`covstand:CovStandIn`, whose measured code is the small package tests/campaign/covstand/compiler."""
from __future__ import annotations

import pytest

from campaign.artifacts import Materialized
from campaign.backends import make_backend
from campaign.compiler_coverage import CoverageConfig, CoverageSpec, CoverageUnion, measuring
from campaign.config import CampaignConfig, Config, ConfigError, drop_unlisted_options, validate
from campaign.sandbox import Sandbox, SandboxConfig
from campaign.testcase import TestCase
from campaign.verdict import Verdict
from campaign.worker import FuzzWorker, WorkerConfig
from ir.core.text import parse
from ir.numerics.values import random_values
from mutators import MutationConfig

NARROW = """graph main(%x0: f32[2,3], %w1: param f32[3,4]) {
  %v2 = matmul(%x0, %w1) : f32[2,4]
  %v3 = add(%v2, %v2) : f32[2,4]
  return %v3
}"""
#: the same features as NARROW (ops, dtypes, edges, depth), a result wider than 4
WIDE = NARROW.replace("4]", "6]")
RELU = """graph main(%x0: f32[2,3]) {
  %v1 = relu(%x0) : f32[2,3]
  return %v1
}"""


def _m(text: str, seed: int) -> Materialized:
    g = parse(text)
    return Materialized(TestCase(f"t{seed}", seed, g, random_values(g, seed),
                                 [{"seed": seed, "seed_id": f"gen/{seed}"}]))


def _spec() -> CoverageSpec:
    return CoverageSpec(make_backend("covstand:CovStandIn").COVERAGE_PACKAGES)


def _lines(covered) -> set[tuple[str, int]]:
    return {(f, n) for f, lines in covered.items() for n in lines}


def test_only_the_listed_packages_are_measured():
    b = make_backend("covstand:CovStandIn")
    with measuring(_spec()) as probe:
        result = b.evaluate(_m(NARROW, 1))
    assert result.verdict is None and not result.failed
    files = set(probe.covered)
    # the compiler package ran, and nothing else is recorded: not the backend's own module
    # (covstand/__init__.py ran too), not campaign/, torch or numpy
    assert files and all("/covstand/compiler/" in f for f in files), files
    assert any(f.endswith("covstand/compiler/__init__.py") for f in files)


def test_in_the_sandbox_the_lines_come_back_and_match_in_process():
    b = make_backend("covstand:CovStandIn")
    with measuring(_spec()) as probe:
        b.evaluate(_m(NARROW, 1))
    with Sandbox(b, coverage=_spec()) as sb:
        result = sb.evaluate(_m(NARROW, 1))
    assert result.covered is not None
    assert _lines(result.covered) == _lines(probe.covered)


def test_a_test_the_rate_leaves_out_is_not_measured():
    spec = CoverageSpec(("covstand/compiler",), rate=0.5)
    chosen = [s for s in range(200) if spec.measures(s)]
    assert 60 < len(chosen) < 140 and chosen == [s for s in range(200) if spec.measures(s)]
    left_out = next(s for s in range(200) if not spec.measures(s))
    with Sandbox(make_backend("covstand:CovStandIn"), coverage=spec) as sb:
        assert sb.evaluate(_m(NARROW, left_out)).covered is None
        assert sb.evaluate(_m(NARROW, chosen[0])).covered is not None


def test_the_union_survives_a_crash_of_the_sandbox_process():
    cfg = WorkerConfig(backends=["covstand:CovStandIn?crash_seed=2"],
                       compiler_coverage=CoverageConfig(enabled=True),
                       mutation=MutationConfig(rate=0))
    with FuzzWorker(cfg) as w:
        name = w.backends[0].name
        first = w.run_case(_m(NARROW, 1).tc).rows[0]
        crashed = w.run_case(_m(RELU, 2).tc).rows[0]  # relu's lines ran, then SIGSEGV
        again = w.run_case(_m(NARROW, 3).tc).rows[0]  # a fresh process: nothing new
        relu = w.run_case(_m(RELU, 4).tc).rows[0]
        sb = w.sandboxes[name]
        assert sb.stats.deaths == 1 and sb.stats.processes == 2
    assert first["verdict"] == "pass" and first["cov_new"] > 0
    assert first["damage"] is None  # the tracer leaves no thread, handler or variable behind
    assert crashed["verdict"] == Verdict.SIGNAL.value and crashed["cov_new"] is None
    assert again["verdict"] == "pass" and again["cov_new"] == 0
    # the crashed test's own lines were lost with its process: relu's branch is new here
    assert relu["verdict"] == "pass" and relu["cov_new"] > 0


def test_union_add_returns_exactly_the_new_lines():
    u = CoverageUnion()
    assert u.add({"a.py": frozenset({1, 2})}) == {"a.py": frozenset({1, 2})}
    assert u.add({"a.py": frozenset({2, 3}), "b.py": frozenset({1})}) == {
        "a.py": frozenset({3}), "b.py": frozenset({1})}
    assert u.add({"a.py": frozenset({1})}) == {} and len(u) == 4


def test_a_test_reaching_new_compiler_code_is_novel_and_one_reaching_none_is_not():
    """In the worker's whole path (its own pool hears of the coverage): WIDE has no graph
    feature NARROW lacks, so only the compiler's new lines (its wide-result branch) make it
    novel; a second NARROW reaches nothing new and is not kept."""
    cfg = WorkerConfig(backends=["covstand:CovStandIn"], sandbox=False,
                       compiler_coverage=CoverageConfig(enabled=True),
                       mutation=MutationConfig(seeds=None, generated_seeds=0))
    w = FuzzWorker(cfg)
    pool = w.mutation.pool
    tests = [_m(NARROW, 1).tc, _m(NARROW, 2).tc, _m(WIDE, 3).tc]
    tests[2].lineage = [{"seed": 3, "seed_id": "t1", "parent": "t1"},
                        {"mutator": "mutate_shape", "test": "t3"}]
    rows = [w.run_case(tc).rows[0] for tc in tests]
    assert [r["novel"] for r in rows] == [True, False, False]  # by graph features
    assert rows[1]["cov_new"] == 0 and rows[2]["cov_new"] > 0
    assert "t1" in pool.entries  # novel by its graph
    assert "t2" not in pool.entries
    e = pool.entries["t3"]
    assert e.new_coverage and not e.new_signature
    assert pool.entries["t1"].finds == 1  # its parent is credited, and its mutator
    assert pool.mutator_finds == {"mutate_shape": 1}
    # its energy: twice a plain entry's (no finds, never chosen, same op class)
    assert pool.weight(e) == pytest.approx(2.0 / pool.freq[e.klass])


def test_coverage_feedback_of_a_test_no_longer_known_or_invalid_keeps_nothing():
    cfg = WorkerConfig(backends=["covstand:CovStandIn"], sandbox=False,
                       mutation=MutationConfig(seeds=None, generated_seeds=0))
    pool = FuzzWorker(cfg).mutation.pool
    assert pool.coverage_feedback("never-seen", 10) is False
    assert pool.coverage_feedback("never-seen", 0) is False
    assert len(pool) == 0


def test_the_backends_own_packages_and_the_config_override():
    c = CoverageConfig(enabled=True, rate=0.25, packages={"tvm": ["tvm/relax/frontend"], "ort": []})
    inductor = make_backend("inductor")
    assert c.spec("inductor", inductor.COVERAGE_PACKAGES) == CoverageSpec(
        ("torch/_dynamo", "torch/_functorch", "torch/_higher_order_ops", "torch/_inductor"), 0.25)
    assert c.spec("tvm", ("tvm/relax",)) == CoverageSpec(("tvm/relax/frontend",), 0.25)
    assert c.spec("ort", make_backend("ort").COVERAGE_PACKAGES) is None  # next to no Python
    own = CoverageConfig(enabled=True, rate=0.5, rates={"inductor": 0.1, "tvm": 0.0})
    assert own.spec("inductor", ("torch/_dynamo",)) == CoverageSpec(("torch/_dynamo",), 0.1)
    assert own.spec("onnx_export", ("torch/export",)) == CoverageSpec(("torch/export",), 0.5)
    assert own.spec("tvm", ("tvm/relax",)) is None
    assert CoverageConfig(enabled=False).spec("inductor", inductor.COVERAGE_PACKAGES) is None


@pytest.mark.parametrize("coverage, message", [
    (CoverageConfig(rate=1.5), "campaign.compiler_coverage.rate: must be in [0, 1], got 1.5"),
    (CoverageConfig(rate=-0.1), "campaign.compiler_coverage.rate: must be in [0, 1], got -0.1"),
    (CoverageConfig(rates={"ort": 2.0}), "campaign.compiler_coverage.rates.ort: must be in [0, 1], got 2.0"),
    (CoverageConfig(rates={"tvm": 0.5}),
     "campaign.compiler_coverage.rates.tvm: 'tvm' is not in campaign.backends ['ort']"),
    (CoverageConfig(packages={"tvm": ["tvm/relax"]}),
     "campaign.compiler_coverage.packages.tvm: 'tvm' is not in campaign.backends ['ort']"),
    (CoverageConfig(packages={"ort": ["onnxruntime/*"]}),
     "campaign.compiler_coverage.packages.ort: bad package 'onnxruntime/*' (a path fragment such as "
     "torch/_dynamo, no wildcards)"),
    (CoverageConfig(packages={"ort": [" / "]}),
     "campaign.compiler_coverage.packages.ort: bad package ' / ' (a path fragment such as "
     "torch/_dynamo, no wildcards)"),
])
def test_bad_coverage_config_is_one_line_naming_the_field(coverage, message):
    cfg = Config(campaign=CampaignConfig(name="c", backends=["ort"], coverage=coverage))
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value) == message


def test_a_presets_rates_and_packages_for_a_backend_left_out_are_dropped():
    cfg = Config(campaign=CampaignConfig(name="c", backends=["ort"], coverage=CoverageConfig(
        enabled=True, rates={"tvm": 0.5, "ort": 0.2}, packages={"onnx_export": ["onnxscript"]})))
    drop_unlisted_options(cfg)
    assert cfg.campaign.coverage.rates == {"ort": 0.2} and cfg.campaign.coverage.packages == {}
    validate(cfg)


def test_a_tracer_that_fails_is_our_harness_error_never_the_compilers_crash(monkeypatch):
    import campaign.compiler_coverage

    def broken(spec):
        raise RuntimeError("no tracer here")

    # a sandbox process forked from this one inherits the broken tracer (the fork server's
    # processes would not: they never saw the patch)
    monkeypatch.setattr(campaign.compiler_coverage, "_tracer", broken)
    with Sandbox(make_backend("covstand:CovStandIn"), SandboxConfig(start_method="fork"),
                 coverage=_spec()) as sb:
        result = sb.evaluate(_m(NARROW, 1))
    assert result.verdict is Verdict.INVALID and result.harness
    assert result.error_msg == "sandbox could not measure compiler coverage: no tracer here"


def test_the_campaign_config_reaches_the_workers():
    from campaign.driver.stages import default_stages

    cov = CoverageConfig(enabled=True, rate=0.3, rates={"ort": 1.0})
    cfg = Config(campaign=CampaignConfig(name="c", backends=["ort"], coverage=cov))
    assert default_stages(cfg).config.compiler_coverage == cov


def test_a_merged_modules_lines_are_its_first_parts():
    from campaign.pipeline import Evaluator, pack_case
    from campaign.worker import Prepared

    spec = "covstand:CovStandIn"
    maker = FuzzWorker(WorkerConfig(backends=[spec], sandbox=False))
    preps = [maker.prepare(_m(text, seed).tc) for text, seed in ((NARROW, 1), (RELU, 2))]
    assert all(isinstance(p, Prepared) for p in preps)
    cfg = WorkerConfig(backends=[spec], merge={spec: 2},
                       compiler_coverage=CoverageConfig(enabled=True))
    ev = Evaluator(cfg, spec, "e")
    try:
        reports = ev.evaluate([pack_case(p) for p in preps])
    finally:
        ev.close()
    rows = [r.rows[0] for r in reports]
    assert [r["merged"] for r in rows] == [2, 2] and [r["verdict"] for r in rows] == ["pass"] * 2
    assert rows[0]["cov_new"] > 0 and rows[1]["cov_new"] is None
    assert [(t, b) for t, b, _ in reports[0].coverage] == [("t1", spec)]
    assert reports[1].coverage == []
