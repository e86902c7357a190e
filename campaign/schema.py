"""The Parquet results schema: one row per test x backend. docs/results-schema.md documents it;
tests check the two agree. Always write with this explicit schema (an all-null column would
otherwise be typed null and break readers)."""
from __future__ import annotations

import json

import pyarrow as pa

RESULT_SCHEMA = pa.schema(
    [
        pa.field("campaign", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("test_id", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("lineage", pa.string(), nullable=False),
        pa.field("mutators", pa.list_(pa.string()), nullable=False),
        pa.field("seed_id", pa.string(), nullable=False),
        pa.field("parent_id", pa.string(), nullable=True),
        pa.field("step_mutators", pa.list_(pa.string()), nullable=False),
        pa.field("mutation_discarded", pa.int32(), nullable=False),
        pa.field("novel", pa.bool_(), nullable=True),
        pa.field("graph_hash", pa.string(), nullable=False),
        pa.field("n_insts", pa.int32(), nullable=False),
        pa.field("n_inputs", pa.int32(), nullable=False),
        pa.field("n_params", pa.int32(), nullable=False),
        pa.field("max_depth", pa.int32(), nullable=False),
        pa.field("n_if", pa.int32(), nullable=False),
        pa.field("n_loop", pa.int32(), nullable=False),
        pa.field("n_scan", pa.int32(), nullable=False),
        pa.field("n_rnn", pa.int32(), nullable=False),
        pa.field("n_inplace", pa.int32(), nullable=False),
        pa.field("n_view_writes", pa.int32(), nullable=False),
        pa.field("n_input_sets", pa.int32(), nullable=False),
        pa.field("branch_coverage", pa.float64(), nullable=True),
        pa.field("n_if_both", pa.int32(), nullable=True),
        pa.field("trip_counts", pa.list_(pa.int32()), nullable=False),
        pa.field("ops", pa.list_(pa.string()), nullable=False),
        pa.field("dtypes", pa.list_(pa.string()), nullable=False),
        pa.field("dialect", pa.string(), nullable=False),
        pa.field("backend", pa.string(), nullable=False),
        pa.field("target", pa.string(), nullable=False),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=True),
        pa.field("error_class", pa.string(), nullable=True),
        pa.field("error_sig", pa.string(), nullable=True),
        pa.field("error_msg", pa.string(), nullable=True),
        pa.field("mismatch_output", pa.int32(), nullable=True),
        pa.field("mismatch_input_set", pa.int32(), nullable=True),
        pa.field("max_abs_err", pa.float64(), nullable=True),
        pa.field("max_rel_err", pa.float64(), nullable=True),
        pa.field("gen_ms", pa.float64(), nullable=False),
        pa.field("ref_ms", pa.float64(), nullable=True),
        pa.field("compile_ms", pa.float64(), nullable=True),
        pa.field("run_ms", pa.float64(), nullable=True),
        pa.field("merged", pa.int32(), nullable=True),
        pa.field("n_compiles", pa.int32(), nullable=True),
        pa.field("timeout_confirmed", pa.bool_(), nullable=True),
        pa.field("timeout_limit_s", pa.float64(), nullable=True),
        pa.field("confirm_limit_s", pa.float64(), nullable=True),
        pa.field("confirm_s", pa.float64(), nullable=True),
        pa.field("dyn_dims", pa.list_(pa.string()), nullable=False),
        pa.field("dyn_shapes", pa.list_(pa.string()), nullable=False),
        pa.field("recompile_input_set", pa.int32(), nullable=True),
        pa.field("failed_input_set", pa.int32(), nullable=True),
        pa.field("dyn_finding", pa.string(), nullable=True),
        pa.field("leaked_procs", pa.int32(), nullable=True),
        pa.field("damage", pa.string(), nullable=True),
        pa.field("finding_dir", pa.string(), nullable=True),
        pa.field("host", pa.string(), nullable=False),
        pa.field("worker", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
    ]
)

COLUMNS = tuple(RESULT_SCHEMA.names)


def graphless_row(test_id: str, seed: int) -> dict:
    """The columns of a row for a test whose graph is unknown (the generator failed, or the
    worker died before reporting): identity from the seed, every graph count zero, every
    optional column null. Callers add backend, verdict, error and provenance columns."""
    return {
        "test_id": test_id, "seed": seed, "lineage": json.dumps([{"seed": seed}]),
        "seed_id": "", "parent_id": None, "step_mutators": [], "mutation_discarded": 0,
        "novel": None,
        "mutators": [], "graph_hash": "", "n_insts": 0, "n_inputs": 0, "n_params": 0,
        "max_depth": 0, "n_if": 0, "n_loop": 0, "n_scan": 0, "n_rnn": 0, "n_inplace": 0,
        "n_view_writes": 0, "n_input_sets": 0,
        "branch_coverage": None, "n_if_both": None, "trip_counts": [], "ops": [], "dtypes": [], "dialect": "",
        "stage": None, "error_class": None, "error_sig": None, "error_msg": None,
        "mismatch_output": None, "mismatch_input_set": None, "max_abs_err": None, "max_rel_err": None, "gen_ms": 0.0,
        "ref_ms": None, "compile_ms": None, "run_ms": None, "merged": None, "n_compiles": None,
        "timeout_confirmed": None, "timeout_limit_s": None, "confirm_limit_s": None,
        "confirm_s": None, "dyn_dims": [],
        "dyn_shapes": [], "recompile_input_set": None, "failed_input_set": None,
        "dyn_finding": None, "leaked_procs": None, "damage": None,
    }
