"""`ResultRow`: one row of the results dataset, one test on one backend
(`campaign.schema.RESULT_SCHEMA`; docs/results-schema.md says what each column means).

Every row is built here:
  - `ResultRow.of_test`: the columns a test's rows share (graph, inputs, coverage, lineage,
    dynamic shapes, where and when it was made), once per test, before any backend ran;
  - `ResultRow.graphless`: the same for a test whose graph is unknown (the generator failed,
    or its actor was lost before it reported): identity from the seed, every count zero;
  - `for_backend`: a copy of either for one backend, with that backend's result columns;
  - `lost`: the row the driver makes for a backend whose actor died, hung or raised on a test.

Invariants it owns:
  - it is the one statement of the results' columns: each field is a column, with its type
    (`X | None` exactly where the column is nullable) and its meaning (`col`);
    `campaign.schema.RESULT_SCHEMA` and the docs' table are derived from it;
  - no other attribute can be set (slots), so a misspelt column fails where it is written;
  - `error_msg` is never longer than `MAX_MSG`: it is cut whenever it is set, in `__init__`
    and by any later assignment, here and nowhere else;
  - it keeps this one form from the judge to Arrow: an actor reports the object, the driver
    sets what it fills (`finding_dir`, `cov_new`) on it, and the sink (`campaign.storage`)
    writes it to Arrow, filling `campaign` and `run_id` (`DOWNSTREAM`); whoever reads it may
    read it as a mapping of its columns, as a row read back from Parquet is read.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from campaign.verdict import Stage, Verdict

if TYPE_CHECKING:
    from campaign.testcase import TestCase

#: longest `error_msg` kept
MAX_MSG = 2000
#: string columns with a length limit, and the limit
LIMITS = {"error_msg": MAX_MSG}
#: columns filled after the actor reported the row: by the sink, by the driver
DOWNSTREAM = ("campaign", "run_id", "finding_dir")
#: the columns of a backend's measurements (the driver has none for a test it lost)
MEASUREMENTS = ("mismatch_output", "mismatch_input_set", "max_abs_err", "max_rel_err",
                "compile_ms", "run_ms", "cpu_ms")


def utc_now() -> datetime:
    """The rows' timestamp: now, in UTC."""
    return datetime.now(timezone.utc)


def col(doc: str, default: Any = dataclasses.MISSING, *,
        factory: Callable[[], Any] | None = None, arrow: str | None = None) -> Any:
    """One column of the results: its meaning (`doc`, the docs' table,
    `campaign.schema.docs_table`), its value when nothing is known of it (`default`, or a
    `factory` of it) and, where the Python type does not say it, its Arrow type (`arrow`:
    `int64`; an `int` is int32 otherwise). Its name, type and nullability are the field's."""
    metadata = {"doc": doc, "arrow": arrow}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(kw_only=True, slots=True)
class ResultRow(Mapping[str, Any]):
    """One result row. A field's default is its value when nothing is known of it (no graph,
    no backend run yet); `backend`, `target` and `verdict` are empty only on a test's shared
    row (`of_test`, `graphless`) until `for_backend` names the backend."""

    campaign: str = col("campaign name (`campaign.name` of the config)", "")
    run_id: str = col("id of one `run.py` invocation", "")
    test_id: str = col(
        "`<run_id>-<index>`; unique per campaign run, shared by a test's backend rows")
    seed: int = col(
        "the generator seed of the test (same seed + same config ⇒ same graph and inputs)", arrow="int64")
    lineage: str = col(
        "JSON list: a header (`{\"seed\": s, \"seed_id\": root, \"parent\": pool entry, "
        "\"discarded\": n}`; a generated graph: `{\"seed\": s, \"seed_id\": \"gen/<s>\"}`), then "
        "every mutation step from the root seed on, `{\"mutator\": name, ...params, \"test\": the"
        " test that applied it}`, then repairs (`{\"repair\": \"drop\", ...}`); see "
        "[mutation.md](mutation.md)")
    mutators: list[str] = col(
        "mutator names applied from the root seed on, in order (the whole chain; empty for a "
        "generated graph)", factory=list)
    seed_id: str = col(
        "the lineage's root: `corpus/<file>` (a `.gir` of `mutation.seeds`), `genseed/<i>` (a "
        "generated pool seed) or `gen/<seed>` (generated for this test); empty when no graph is "
        "known", "")
    seed_model: str = col(
        "the model the lineage's root seed is a window of (`resnet18`: a seed from "
        "`mutation.seeds` cut from a model, docs/mutation.md \"Seeds from models\"); empty for "
        "other seeds and generated graphs", "")
    parent_id: str | None = col(
        "the seed-pool entry this test mutated (a seed id or the test id of an earlier novel "
        "test); null for a generated graph", None)
    step_mutators: list[str] = col(
        "the mutators this test applied to its parent, in order: the unit of per-mutator yield", factory=list)
    mutation_discarded: int = col(
        "candidate mutants discarded while making this test (declined, failing `verify`, too big)"
        " before the chain was complete", 0)
    novel: bool | None = col(
        "the graph had an op/feature pattern its generation actor's pool had not seen "
        "([mutation.md](mutation.md)); null with mutation off", None)
    graph_hash: str = col(
        "16 hex chars of SHA-1 over the canonical text form (names normalized)", "")
    n_insts: int = col("instructions, nested ones counted", 0)
    n_inputs: int = col("graph inputs (run-time data)", 0)
    n_params: int = col("graph params (weights; ONNX initializers)", 0)
    max_depth: int = col("deepest nesting of sub-graphs (0: straight-line)", 0)
    n_if: int = col("`if` instructions, nested ones counted", 0)
    n_loop: int = col("`loop` instructions, nested ones counted", 0)
    n_scan: int = col("`scan` instructions, nested ones counted", 0)
    n_rnn: int = col("recurrent-cell instructions (`lstm`, `gru`, `rnn`), nested ones counted", 0)
    n_custom: int = col(
        "custom-op instructions (`custom`: `torch.library.custom_op`s, docs/extensions.md), "
        "nested ones counted", 0)
    n_region: int = col(
        "compile-region calls (`region`: calls of `torch.compiler.nested_compile_region` "
        "functions, docs/extensions.md), nested ones counted; drawn per test "
        "(`generator.p_region`, the `mark_regions` mutator)", 0)
    n_inplace: int = col(
        "in-place writes (`add_`, `copy_`, `setitem`, ...; docs/inplace.md), nested ones counted", 0)
    n_view_writes: int = col(
        "those of them whose written memory is a view: the destination is a view, or a `setitem` "
        "region", 0)
    n_input_sets: int = col(
        "input sets the test ran on (set 0 plus those `ir.numerics.flow_coverage` added so that "
        "ifs take both branches and loops other trip counts); every backend compiles once and "
        "runs them all (0: no graph)", 0)
    branch_coverage: float | None = col(
        "fraction of the `if` branches (two per `if`, nested ones counted) taken across the input"
        " sets; null when the graph has no `if`", None)
    n_if_both: int | None = col(
        "`if` instructions (nested ones counted) that took both branches across the input sets "
        "(input sets all valid: each passed the same check as set 0); null when the graph has no "
        "`if` (and in files written before the column existed)", None)
    trip_counts: list[int] = col(
        "distinct trip counts the loops and scans ran across the input sets", factory=list)
    ops: list[str] = col("distinct op names in the graph", factory=list)
    dtypes: list[str] = col("distinct dtypes of all values (`f32`, `i64`, ...)", factory=list)
    dialect: str = col(
        "how the torch model expresses control flow (`eager`: straight-line interpreter), then, "
        "for a torch backend that ran a non-default program form (`ir/materialize/form.py`, "
        "docs/configs.md), each changed field, sorted: `hop+params=parameter`, "
        "`python+inplace=functional+scalars=number` (`ir.materialize.form.parse_label` reads it "
        "back)", "")
    mode: str = col(
        "`infer`, `transform` for a transform test (below), or `grad` for a gradient test on a "
        "backend that trains (`Backend.TRAINS`): the row compares the forward outputs and then "
        "the gradient of every leaf (docs/training.md); a gradient test on a backend that does "
        "not train runs its forward alone, as `infer`; `repeat` for an inference test that runs "
        "its first input set again, last (`campaign.modes.repeat`); the shared row before a "
        "backend ran says the test's mode (`campaign.modes`)", "infer")
    grad_leaves: int = col(
        "the gradient test's leaves (float inputs and params that require grad, "
        "`ir.materialize.grad.GradSpec`); 0 for an inference test. A `mismatch_output` at or past"
        " the graph's output count is the gradient of leaf `mismatch_output - outputs` (error_sig"
        " `Mismatch: grad %x`)", 0)
    transform: str = col(
        "a transform test's torch.func transform (`vmap`, `grad`, `vjp`, `jvp`, `jacrev`, "
        "`jacfwd`: `ir.materialize.transforms`, docs/training.md), '' for none; its rows of "
        "`mode` `transform` compare the transform's results (`mismatch_output` indexes them: "
        "`TransformSpec.labels`), a backend that does not train runs the forward", "")
    backend: str = col("backend name (`ort`, `ort_noopt`, ...)", "")
    target: str = col("device target of the backend (`cpu`, `cuda`)", "")
    verdict: str = col("one of the verdicts below", "")
    stage: str | None = col(
        "where a non-pass happened: `generate`, `reference`, `import`, `compile`, `run`, "
        "`compare`, `unknown`", None)
    error_class: str | None = col(
        "exception type (`Fail`, `RuntimeError`, ...), `Mismatch`, `WorkerDied`, "
        "`ProcessDamaged`, `InvalidReference`", None)
    error_sig: str | None = col(
        "normalized signature (numbers, paths, addresses stripped): the bucketing key", None)
    error_msg: str | None = col("the raw message, cut at 2000 characters", None)
    mismatch_output: int | None = col(
        "index of the first output that differs (mismatch only)", None)
    mismatch_input_set: int | None = col(
        "the input set whose outputs differ (mismatch, ill-conditioned)", None)
    max_abs_err: float | None = col("max \\|actual − expected\\| of that output", None)
    max_rel_err: float | None = col(
        "max \\|actual − expected\\| / \\|expected\\| of that output", None)
    gen_ms: float = col("time to generate + mutate the graph and pick inputs", 0.0)
    ref_ms: float | None = col(
        "time of the torch eager reference (near 0 when the input-set search had computed the "
        "outputs already: `TestCase.ref_outputs`, its time then in `gen_ms`)", None)
    compile_ms: float | None = col("backend compile time (ORT: session creation)", None)
    run_ms: float | None = col("backend run time", None)
    cpu_ms: float | None = col(
        "CPU time of the backend's evaluation (user + system, of its process and the processes it"
        " waited for, e.g. g++): `(compile_ms + run_ms) / cpu_ms` above 1 is time spent waiting "
        "for a core; a merged module's, like `compile_ms`", None)
    backend_config: str | None = col(
        "the compiler configuration this row ran, when one was drawn for the test from the "
        "backend's configuration space (`campaign.backend_options.<b>.configs` > 0; "
        "docs/configs.md): its options that differ from the backend spec's own, `key=value` "
        "joined by `&` and sorted, so `backend` + `?`/`&` + `backend_config` is the backend spec "
        "of the very compiler that ran (`campaign.backends.configs.with_config`); '' is the "
        "spec's own configuration. Part of the bucket key, after the triage reduced it to the "
        "options the failure needs (docs/triage.md)", "")
    merged: int | None = col(
        "the number of tests compiled together as one merged module for this row's result "
        "(`campaign.backend_options.<b>.merge` > 1, campaign/merge.py): `compile_ms` and `run_ms`"
        " are then that module's, the verdict this test's own outputs on its own input sets; null"
        " when the test ran alone, also when it was re-run alone because the merged module did "
        "not pass cleanly (a finding is always the alone run's; a merged-only failure the alone "
        "run does not reproduce leaves a note in `error_msg` of its pass row)", None)
    n_compiles: int | None = col(
        "compilations the backend made over all input sets: Inductor counts the FX graphs it "
        "compiled (each graph-broken piece, each recompile); ORT, TVM (`tvm`, `tvm_torch`) and "
        "the exporter compile once by construction (1); null when it failed before running", None)
    cache_hits: int | None = col(
        "a cache test (`mode` `cache`, campaign/modes/cache.py) on a backend that caches: the "
        "hits of its warm compile in the FX graph cache and the AOT autograd cache, after its "
        "near-twin's entries were written (0: nothing served, the pair compared two fresh "
        "compiles; torch 2.13 bypasses both caches for a graph with a higher-order op); null "
        "for other rows", None)
    cov_new: int | None = col(
        "compiler coverage ([coverage.md](coverage.md)): lines of the backend's Python packages "
        "this test ran that the campaign had not seen for that backend before (0: none new); null"
        " when not measured (coverage off, the test not in `campaign.compiler_coverage.rate`, a "
        "backend without packages such as ORT, a test whose sandbox process died or hung, a row "
        "the driver made for a lost test). The union and its growth are in `coverage/` beside "
        "`results/`", None)
    timeout_confirmed: bool | None = col(
        "set when the test ran past the sandbox's per-test limit (`timeout_limit_s`) and was "
        "re-run at once, alone, in a fresh process with the larger `confirm_limit_s`: true, that "
        "ran out too (a confirmed `timeout`); false, it finished in `confirm_s` and the row's "
        "verdict is the re-run's (a compile slow only under the campaign's load is no hang); "
        "null: no timeout, or no re-run (`campaign.confirm_timeout_factor = 0`; the driver's "
        "`WorkerTimeout`)", None)
    timeout_limit_s: float | None = col(
        "the per-test limit the first attempt ran past (null: it did not time out)", None)
    confirm_limit_s: float | None = col(
        "the limit of the confirming re-run (`timeout_limit_s` × "
        "`campaign.confirm_timeout_factor`)", None)
    confirm_s: float | None = col(
        "seconds the confirming re-run took, to its result (or to its kill at `confirm_limit_s`)", None)
    dyn_dims: list[str] = col(
        "dynamic-shape tests ([dynshape.md](dynshape.md)): each symbolic graph-input dim, "
        "`x0[0]=B` (empty for a static test)", factory=list)
    dyn_shapes: list[str] = col(
        "per input set, its assignment of the symbols, `B=3,L=5` (empty for a static test)", factory=list)
    recompile_input_set: int | None = col(
        "the first input set after set 0 for which the backend compiled again although every "
        "symbolic dim of its shape is >= 2 (0/1 sizes are specialized by design)", None)
    failed_input_set: int | None = col(
        "dynamic-shape tests: the input set (> 0) a run crashed on after set 0 ran", None)
    dyn_finding: str | None = col(
        "a dynamic-shape finding's kind: `recompile`, `later_shape_crash` (crash on a later "
        "shape), `shape_mismatch` (wrong outputs on some shapes only)", None)
    leaked_procs: int | None = col(
        "processes the test left running in its sandbox (any session or process group: the "
        "sandbox process is their subreaper), all killed by the sandbox; 0: none; null when not "
        "sandboxed (and in files written before the column existed)", None)
    damage: str | None = col(
        "what the test did to its sandbox process, `; `-separated (checked after every test, "
        "[architecture.md](architecture.md#backends-and-the-sandbox)): repaired in place (working"
        " directory, signal handlers, `sys.stdout`/`sys.stderr`, environment), a thread left "
        "running or processes left running, `left its process unusable: ...` (fd 1/2 closed or "
        "redirected: the process is replaced and a test that otherwise passed is a `crash`, "
        "`ProcessDamaged`), or `test <id> left the process unusable (...)`: this test hit a "
        "harness error in a process an earlier test damaged unnoticed and was re-run in a fresh "
        "one (that earlier test gets a `crash` finding folder, its row having been written "
        "already); null: nothing", None)
    finding_dir: str | None = col(
        "artifact folder of this finding, relative to the output dir (null if none was kept)", None)
    host: str = col(
        "host name of the actor that evaluated it (of the generation actor for an invalid test)", "")
    worker: str = col(
        "that actor's name and pid (`ort#0@1234`; the driver's actor name on a row it made)", "")
    ts: datetime = col(
        "when the actor finished the test (on a row the driver made: when it made it)", factory=utc_now)

    def __setattr__(self, name: str, value: Any) -> None:
        limit = LIMITS.get(name)
        if limit is not None and value is not None:
            value = value[:limit]
        object.__setattr__(self, name, value)

    # ---- constructors ----------------------------------------------------------------------
    @classmethod
    def of_test(cls, tc: TestCase, gen_ms: float, novel: bool | None, host: str,
                worker: str) -> ResultRow:
        """The columns every backend's row of test `tc` shares. `novel`: whether the seed
        pool had not seen the graph's pattern (`MutationSource.novel`, asked before the pool
        observes the test); `host`, `worker`: the actor that made it."""
        # ir is imported here, not with the module: the row type stays light to import for
        # the driver and the stage doubles of its tests, whose actors start and run in seconds
        from ir.analysis.inplace import counts as inplace_counts
        from ir.core.text import graph_hash
        from ir.ops.rnn import RECURRENT

        g = tc.graph
        counts = g.op_counts()
        steps = tc.lineage[1:]
        head = tc.lineage[0] if tc.lineage else {}
        coverage = tc.coverage or {}
        n_inplace, n_view_writes = inplace_counts(g)
        return cls(
            test_id=tc.test_id, seed=tc.seed, lineage=json.dumps(tc.lineage),
            mutators=[s["mutator"] for s in steps if "mutator" in s],
            seed_id=str(head.get("seed_id", "")), seed_model=str(head.get("model", "")),
            parent_id=head.get("parent"),
            step_mutators=[s["mutator"] for s in steps
                           if "mutator" in s and s.get("test") == tc.test_id],
            mutation_discarded=int(head.get("discarded", 0)), novel=novel,
            graph_hash=graph_hash(g), n_insts=g.num_insts(), n_inputs=len(g.inputs),
            n_params=len(g.params), max_depth=g.max_depth(),
            n_if=counts["if"], n_loop=counts["loop"], n_scan=counts["scan"],
            n_rnn=sum(counts[op.name] for op in RECURRENT),
            n_custom=counts["custom"], n_region=counts["region"],
            n_inplace=n_inplace, n_view_writes=n_view_writes, n_input_sets=tc.n_sets,
            branch_coverage=coverage.get("branch_coverage"),
            n_if_both=coverage.get("ifs_both_branches") if counts["if"] else None,
            trip_counts=coverage.get("trip_counts", []),
            ops=sorted(counts), dtypes=sorted({v.type.dtype.short for v in g.all_values()}),
            dialect="eager", **tc.mode.row_fields(tc), gen_ms=gen_ms,
            **tc.shapes.row_fields(tc),
            host=host, worker=worker)

    @classmethod
    def graphless(cls, test_id: str, seed: int, **columns: Any) -> ResultRow:
        """The shared row of a test whose graph is unknown: identity and lineage from the
        seed, every graph count zero, every optional column null; `columns` set others."""
        return cls(test_id=test_id, seed=seed, lineage=json.dumps([{"seed": seed}]), **columns)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ResultRow:
        """A row from a mapping of its columns (a row read back from Parquet, or any subset of
        columns holding the identity)."""
        return cls(**row)

    def for_backend(self, backend: str, target: str, **columns: Any) -> ResultRow:
        """A copy of this row for `backend` (on `target`), with `columns` set."""
        return dataclasses.replace(self, backend=backend, target=target, **columns)

    def lost(self, backend: str, target: str, verdict: Verdict, error_class: str, msg: str,
             host: str, worker: str, ts: datetime) -> ResultRow:
        """The driver's row of this test for `backend` when the actor evaluating (or making)
        it died, hung or raised: what the driver knows of the test, the failure (its class is
        also its signature), no measurements; `host`, `worker`, `ts`: the lost actor, now."""
        return self.for_backend(backend, target, verdict=verdict.value,
                                stage=Stage.UNKNOWN.value, error_class=error_class,
                                error_sig=error_class, error_msg=msg, host=host, worker=worker,
                                ts=ts, **dict.fromkeys(MEASUREMENTS))

    # ---- changing and reading ----------------------------------------------------------------
    def update(self, **columns: Any) -> None:
        """Set `columns` (an unknown name raises AttributeError)."""
        for name, value in columns.items():
            setattr(self, name, value)

    def add_note(self, note: str) -> None:
        """Append `note` to `error_msg`, `; `-separated (a pass row's message is only notes)."""
        self.error_msg = "; ".join(x for x in (self.error_msg, note) if x)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # a row crosses processes (Ray) thousands of times a second in the driver's tests:
        # its values as one tuple, set back without re-cutting what was cut when set
        return _row_of_values, (tuple(getattr(self, name) for name in COLUMNS),)

    # the row read as a mapping of its columns: what the driver, the feedback and the sink
    # read, the same way they read a row of the results read back from Parquet
    def __getitem__(self, name: str) -> Any:
        if name not in COLUMNS:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(COLUMNS)

    def __len__(self) -> int:
        return len(COLUMNS)


#: every column, in schema order
COLUMNS = tuple(f.name for f in dataclasses.fields(ResultRow))


def _row_of_values(values: tuple[Any, ...]) -> ResultRow:
    """A row from its columns' values in `COLUMNS` order (`ResultRow.__reduce__`)."""
    row = object.__new__(ResultRow)
    for name, value in zip(COLUMNS, values, strict=True):
        object.__setattr__(row, name, value)
    return row
