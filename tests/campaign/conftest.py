"""Shared fixtures for the campaign tests: one local Ray for the session, a result-row factory."""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

RAY_TEMP_DIR = "/tmp/dsray-test"  # short: Ray's socket paths are limited to 107 bytes


@pytest.fixture(scope="session")
def ray_cluster():
    """A local 2-CPU Ray cluster shared by the session; stopped only if this fixture started it
    (`ray.shutdown` stops the processes this driver started, never other clusters)."""
    import ray

    if ray.is_initialized():
        yield ray
        return
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=RAY_TEMP_DIR,
             logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def sample_row(**overrides: Any) -> dict[str, Any]:
    """A complete worker row (every RESULT_SCHEMA column but campaign/run_id/finding_dir)."""
    row: dict[str, Any] = {
        "test_id": "r-000000", "seed": 7, "lineage": '[{"seed": 7}]', "mutators": [],
        "seed_id": "gen/7", "seed_model": "", "parent_id": None, "step_mutators": [],
        "mutation_discarded": 0,
        "novel": True,
        "graph_hash": "abc", "n_insts": 3, "n_inputs": 1, "n_params": 0, "max_depth": 1, "n_if": 1,
        "n_loop": 0, "n_scan": 0, "n_rnn": 0, "n_custom": 0, "n_region": 0, "n_inplace": 0, "n_view_writes": 0, "n_input_sets": 2, "branch_coverage": 1.0, "n_if_both": 1, "trip_counts": [],
        "ops": ["add", "relu"], "dtypes": ["f32"], "dialect": "eager", "mode": "infer", "grad_leaves": 0, "transform": "", "backend": "ort",
        "target": "cpu", "verdict": "pass", "stage": None, "error_class": None,
        "error_sig": None, "error_msg": None, "mismatch_output": None, "mismatch_input_set": None,
        "max_abs_err": None,
        "max_rel_err": None, "gen_ms": 1.5, "ref_ms": 0.1, "compile_ms": 2.0, "run_ms": 0.3, "cpu_ms": 2.1,
        "backend_config": "", "merged": None,
        "n_compiles": 1, "cache_hits": None, "cov_new": None, "timeout_confirmed": None,
        "timeout_limit_s": None,
        "confirm_limit_s": None, "confirm_s": None, "dyn_dims": [], "dyn_shapes": [], "recompile_input_set": None,
        "failed_input_set": None, "dyn_finding": None, "leaked_procs": 0, "damage": None,
        "host": "h", "worker": "w0@1", "ts": datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    }
    row.update(overrides)
    return row


@pytest.fixture
def make_row() -> Callable[..., dict[str, Any]]:
    return sample_row
