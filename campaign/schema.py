"""The Parquet results schema: one row per test x backend, each built as a `campaign.row.ResultRow`
(tests check that its fields are these columns). docs/results-schema.md documents it; tests check
the two agree. Always write with this explicit schema (an all-null column would otherwise be
typed null and break readers)."""
from __future__ import annotations

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
        pa.field("cpu_ms", pa.float64(), nullable=True),
        pa.field("backend_config", pa.string(), nullable=True),
        pa.field("merged", pa.int32(), nullable=True),
        pa.field("n_compiles", pa.int32(), nullable=True),
        pa.field("cov_new", pa.int32(), nullable=True),
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

