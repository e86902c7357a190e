"""Synthetic campaign results for testing and timing the report: rows shaped like a real
campaign's (written through `campaign.storage.ResultSink` with the real schema), with verdicts,
Zipf-distributed error signatures per backend (so new buckets keep appearing, more slowly over
time), finding folders for the first members of each signature, and optionally a triage `bugs`
table, extra columns (e.g. `n_inplace`) the schema does not have yet, and compiler coverage
(`cov_new` in the rows, `coverage/union.parquet` and `growth.parquet` written by the driver's
own `CampaignCoverage`).

    python -m campaign.report.synthetic /tmp/synth --tests 5000 --runs 2
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from campaign.compiler_coverage_log import CampaignCoverage
from campaign.schema import RESULT_SCHEMA
from campaign.storage import RESULTS_DIR, ResultSink

OPS = ("add", "mul", "sub", "div", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "matmul",
       "conv2d", "maxpool2d", "avgpool2d", "batch_norm", "layer_norm", "softmax", "reduce_sum",
       "reduce_mean", "argmax", "reshape", "transpose", "concat", "slice", "gather", "where",
       "cast", "pad", "resize", "cumsum", "topk", "clamp", "abs", "neg", "if", "loop", "scan",
       "lstm", "gru", "add_", "copy_", "index_put_")


def _ops_pool() -> tuple[str, ...]:
    """The registered op names when the IR imports (so op coverage looks like a real campaign's),
    else the fixed list above."""
    try:
        import ir  # noqa: F401  (registers the op library)
        from ir.core.op import OP_REGISTRY
        names = tuple(sorted(OP_REGISTRY))
        return names if len(names) >= 10 else OPS
    except Exception:
        return OPS


MUTATORS = ("insert_op", "wrap_if", "wrap_loop", "swap_dtype")
VERDICT_P = (("mismatch", 0.010), ("crash", 0.010), ("signal", 0.003), ("timeout", 0.002),
             ("invalid", 0.020), ("unsupported", 0.030))
STAGES = {"mismatch": "compare", "crash": "compile", "signal": "run", "timeout": "compile",
          "invalid": "reference", "unsupported": "import"}
#: backends whose compiler coverage is not measured (no Python packages: docs/coverage.md)
UNMEASURED = ("ort", "ort_noopt", "eager")
#: seconds between a synthetic campaign's start and its first result (actors starting)
COVERAGE_WARMUP_S = 3.0
ERROR_CLASS = {"mismatch": "Mismatch", "crash": "RuntimeError", "signal": "SIGSEGV",
               "timeout": "Timeout", "invalid": "InvalidReference", "unsupported": "Fail"}


def _default(f: pa.Field, ts: dt.datetime) -> Any:
    """A value for a schema column the generator does not set (future columns included)."""
    t = f.type
    if f.nullable:
        return None
    if pa.types.is_list(t):
        return []
    if pa.types.is_integer(t):
        return 0
    if pa.types.is_floating(t):
        return 0.0
    if pa.types.is_timestamp(t):
        return ts
    if pa.types.is_boolean(t):
        return False
    return ""


def write_run(
    out_dir: Path,
    *,
    campaign: str = "synthetic",
    n_tests: int = 1000,
    backends: Sequence[str] = ("ort", "tvm"),
    seed: int = 0,
    start: dt.datetime | None = None,
    duration_s: float = 600.0,
    n_signatures: int = 40,
    max_findings_per_sig: int = 2,
    extra_columns: dict[str, pa.DataType] | None = None,
    bugs_table: bool = False,
    repro_scripts: bool = True,
    op_names: Sequence[str] | None = None,
    coverage_rate: float = 0.0,
    models: Sequence[str] = (),
) -> int:
    """Write one synthetic run under `out_dir` (results/, findings/, maybe bugs.parquet); return
    the number of rows. `op_names`: the op names to draw from (default: the IR's registry).
    `extra_columns` (name -> int type) adds count columns the schema lacks,
    written straight with pyarrow since ResultSink rejects unknown columns. `coverage_rate` > 0:
    that fraction of the tests of every backend but UNMEASURED's is measured (`cov_new`; a
    signal or timeout loses its lines, as in a campaign), and `coverage/` is written.
    `models`: every other test's root seed is a window of one of these models in turn
    (`seed_model`, docs/mutation.md "Seeds from models")."""
    rng = random.Random(seed)
    out_dir = Path(out_dir)
    start = start or dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    run_id = f"{start:%Y%m%d-%H%M%S}-{seed:04x}"
    extra_columns = dict(extra_columns or {})
    rows: list[dict] = []
    sig_seen: dict[str, int] = {}
    cov = CampaignCoverage()
    sig_weights = [1.0 / (k + 1) ** 1.3 for k in range(n_signatures)]
    pool = _ops_pool() if op_names is None else tuple(op_names)
    op_weights = [1.0 / (1 + (j * 7919) % 13) for j in range(len(pool))]
    for i in range(n_tests):
        # throughput ramps up during the first tenth of the run, then holds with some noise
        frac = (i + 0.5) / n_tests
        el = duration_s * (frac ** 0.8)
        ts = start + dt.timedelta(seconds=el + rng.uniform(0, 0.5))
        n_ops = rng.randint(3, 12)
        ops = sorted(set(rng.choices(pool, weights=op_weights, k=n_ops)))
        mut = [] if rng.random() < 0.6 else rng.sample(MUTATORS, rng.choice((1, 1, 2)))
        step = mut[-1 - i % 2:]  # this test's own step: the chain's end (one or two mutators)
        n_if, n_loop = ops.count("if") * rng.randint(1, 2), ops.count("loop")
        n_scan = ops.count("scan")
        n_rnn = ops.count("lstm") + ops.count("gru") + ops.count("rnn")
        n_inplace = sum(op.endswith("_") for op in ops) or int(rng.random() < 0.1)
        dyn = n_if + n_loop + n_scan + n_rnn + n_inplace
        test_id = f"{run_id}-{i:06d}"
        for b in backends:
            r = rng.random() / (1.0 + 0.5 * dyn)  # dynamic graphs find more
            verdict, acc = "pass", 0.0
            for v, p in VERDICT_P:
                acc += p
                if r < acc:
                    verdict = v
                    break
            row: dict[str, Any] = {
                "test_id": test_id, "seed": seed * 1_000_000 + i,
                "lineage": json.dumps([{"seed": i}] + [{"mutator": m} for m in mut]),
                "mutators": mut, "step_mutators": step,
                "graph_hash": f"{rng.getrandbits(64):016x}",
                "n_insts": n_ops + dyn, "n_inputs": rng.randint(1, 3),
                "n_params": rng.randint(0, 3),
                "max_depth": 1 if (n_if or n_loop or n_scan) else 0, "n_if": n_if,
                "n_loop": n_loop, "n_scan": n_scan, "n_rnn": n_rnn, "n_input_sets": 1,
                "branch_coverage": 1.0 if n_if else None, "n_if_both": n_if or None,
                "trip_counts": [], "ops": ops,
                # every 7th test has a dynamic batch dim (docs/dynshape.md)
                "dyn_dims": ["x0[0]=B"] if i % 7 == 3 else [],
                "dyn_shapes": ["B=2", "B=5"] if i % 7 == 3 else [],
                # every 5th test is a gradient test (docs/training.md)
                "mode": "grad" if i % 5 == 1 else "infer", "grad_leaves": 2 if i % 5 == 1 else 0,
                "transform": "vmap" if i % 10 == 1 else "",
                "dtypes": ["f32"], "dialect": "python" if dyn else "eager", "backend": b,
                "target": "cpu", "verdict": verdict, "gen_ms": rng.uniform(5, 50),
                "ref_ms": rng.uniform(1, 10), "compile_ms": rng.uniform(10, 300),
                "run_ms": rng.uniform(0.1, 5), "host": "synth", "worker": f"w{i % 4}",
                "ts": ts,
            }
            if models and i % 2 == 0:
                row["seed_model"] = models[(i // 2) % len(models)]
            if verdict != "pass":
                k = rng.choices(range(n_signatures), weights=sig_weights)[0]
                sig = f"{ERROR_CLASS[verdict]}: synthetic {verdict} #{k} in {b}"
                row.update(stage=STAGES[verdict], error_class=ERROR_CLASS[verdict],
                           error_sig=sig, error_msg=sig + " (synthetic)")
                if verdict == "mismatch":
                    row.update(mismatch_output=0, max_abs_err=0.5, max_rel_err=0.1)
                key = f"{b}/{verdict}/{sig}"
                if verdict != "unsupported" and sig_seen.get(key, 0) < max_findings_per_sig:
                    sig_seen[key] = sig_seen.get(key, 0) + 1
                    fdir = Path("findings") / b / verdict / test_id
                    _write_finding(out_dir / fdir, row, repro_scripts)
                    row["finding_dir"] = fdir.as_posix()
            if (coverage_rate > 0 and b not in UNMEASURED and rng.random() < coverage_rate
                    and verdict not in ("signal", "timeout")):
                row["cov_new"] = cov.add(b, test_id, _covered(rng, b, ops, step),
                                         COVERAGE_WARMUP_S + el)
            for name in extra_columns:
                row[name] = n_inplace if name == "n_inplace" else n_inplace // 2
            full = {f.name: row[f.name] if f.name in row else _default(f, ts)
                    for f in RESULT_SCHEMA if f.name not in ("campaign", "run_id")}
            full.update({k: row[k] for k in extra_columns})
            rows.append(full)
    if extra_columns:
        schema = RESULT_SCHEMA
        for name, typ in extra_columns.items():
            if name not in schema.names:
                schema = schema.append(pa.field(name, typ, nullable=False))
        res = out_dir / RESULTS_DIR
        res.mkdir(parents=True, exist_ok=True)
        for k in range(0, len(rows), 5000):
            batch = [{**r, "campaign": campaign, "run_id": run_id,
                      "finding_dir": r.get("finding_dir")} for r in rows[k:k + 5000]]
            pq.write_table(pa.Table.from_pylist(batch, schema=schema),
                           res / f"part-{run_id}-{k // 5000:06d}.parquet")
    else:
        with ResultSink(out_dir, run_id, campaign, flush_rows=5000) as sink:
            sink.add_many(rows)
    if bugs_table:
        _write_bugs(out_dir, rows)
    if coverage_rate > 0:
        cov.write(out_dir / "coverage")
    return len(rows)


def _covered(rng: random.Random, backend: str, ops: Sequence[str],
             step: Sequence[str]) -> dict[str, frozenset[int]]:
    """Compiler lines a synthetic test runs: the backend's core, a random prefix of each op's
    lowering (so new lines keep trickling in) and of each mutator's pass."""
    lines = {f"{backend}/core.py": frozenset(range(1, 101))}
    for name in list(ops) + [f"pass_{m}" for m in step]:
        lines[f"{backend}/{name}.py"] = frozenset(range(1, 1 + rng.randint(5, 40)))
    return lines


def _write_finding(d: Path, row: dict, repro: bool) -> None:
    d.mkdir(parents=True, exist_ok=True)
    info = {k: row.get(k) for k in ("test_id", "backend", "verdict", "stage", "error_sig")}
    (d / "info.json").write_text(json.dumps(info, indent=1))
    (d / "graph.gir").write_text("graph main() {\n  return\n}\n")
    if repro:
        (d / "repro.py").write_text(f"print({row['error_sig']!r})\n")


def _write_bugs(out_dir: Path, rows: list[dict]) -> None:
    """A `bugs` table as triage writes it: one row per bucket of the findings."""
    by: dict[tuple, dict] = {}
    for r in rows:
        if r["verdict"] in ("pass", "unsupported", "skipped"):
            continue
        key = (r["backend"], r["target"], r["verdict"], r["stage"], r["error_sig"])
        b = by.setdefault(key, {"bucket": "|".join(str(k) for k in key), "backend": key[0],
                                "target": key[1], "verdict": key[2], "stage": key[3],
                                "error_sig": key[4], "first_seen": r["ts"], "count": 0,
                                "example_test_ids": [], "artifact_path": None})
        b["count"] += 1
        if len(b["example_test_ids"]) < 3:
            b["example_test_ids"].append(r["test_id"])
        if b["artifact_path"] is None and r.get("finding_dir"):
            b["artifact_path"] = r["finding_dir"]
    table = pa.Table.from_pylist(list(by.values()), schema=pa.schema([
        ("bucket", pa.string()), ("backend", pa.string()), ("target", pa.string()),
        ("verdict", pa.string()), ("stage", pa.string()), ("error_sig", pa.string()),
        ("first_seen", pa.timestamp("ms", tz="UTC")), ("count", pa.int64()),
        ("example_test_ids", pa.list_(pa.string())), ("artifact_path", pa.string())]))
    pq.write_table(table, Path(out_dir) / "bugs.parquet")


def write_campaign(root: Path, *, n_runs: int = 2, n_tests: int = 1000, campaign: str = "synthetic",
                   **kw: Any) -> list[Path]:
    """`n_runs` repeated runs of one campaign under `root/<campaign>/<time>/`."""
    dirs = []
    for k in range(n_runs):
        start = dt.datetime(2026, 1, 1, 12, k, tzinfo=dt.timezone.utc)
        d = Path(root) / campaign / f"{start:%Y%m%d-%H%M%S}"
        write_run(d, campaign=campaign, n_tests=n_tests, seed=k, start=start, **kw)
        dirs.append(d)
    return dirs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m campaign.report.synthetic",
                                 description="Write synthetic campaign results.")
    ap.add_argument("root", type=Path)
    ap.add_argument("--tests", type=int, default=2500, help="tests per run")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--backends", default="ort,tvm,inductor")
    ap.add_argument("--campaign", default="synthetic")
    ap.add_argument("--duration", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--inplace", action="store_true", help="add n_inplace/n_view_writes columns")
    ap.add_argument("--bugs", action="store_true", help="write a triage bugs table per run")
    ap.add_argument("--coverage", type=float, default=0.0, metavar="RATE",
                    help="measure compiler coverage of this fraction of the tests")
    a = ap.parse_args(argv)
    extra = {"n_inplace": pa.int32(), "n_view_writes": pa.int32()} if a.inplace else None
    dirs = write_campaign(a.root, n_runs=a.runs, n_tests=a.tests, campaign=a.campaign,
                          backends=a.backends.split(","), duration_s=a.duration,
                          extra_columns=extra, bugs_table=a.bugs, coverage_rate=a.coverage)
    for d in dirs:
        print(d)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
