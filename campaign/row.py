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
  - its fields are the schema's columns, same names, same order, with the Python types of the
    Arrow types, `X | None` exactly where the column is nullable (tests/campaign/test_row.py);
  - no other attribute can be set (slots), so a misspelt column fails where it is written;
  - `error_msg` is never longer than `MAX_MSG`: it is cut whenever it is set, in `__init__`
    and by any later assignment, here and nowhere else;
  - `to_dict()` is the row as an actor reports it, plain data for Ray and `campaign.storage`:
    every column but those filled downstream (`DOWNSTREAM`: `campaign` and `run_id` by the
    sink, `finding_dir` by the driver).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
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


@dataclass(kw_only=True, slots=True)
class ResultRow:
    """One result row. A field's default is its value when nothing is known of it (no graph,
    no backend run yet); `backend`, `target` and `verdict` are empty only on a test's shared
    row (`of_test`, `graphless`) until `for_backend` names the backend."""

    campaign: str = ""
    run_id: str = ""
    test_id: str
    seed: int
    lineage: str
    mutators: list[str] = field(default_factory=list)
    seed_id: str = ""
    seed_model: str = ""
    parent_id: str | None = None
    step_mutators: list[str] = field(default_factory=list)
    mutation_discarded: int = 0
    novel: bool | None = None
    graph_hash: str = ""
    n_insts: int = 0
    n_inputs: int = 0
    n_params: int = 0
    max_depth: int = 0
    n_if: int = 0
    n_loop: int = 0
    n_scan: int = 0
    n_rnn: int = 0
    n_inplace: int = 0
    n_view_writes: int = 0
    n_input_sets: int = 0
    branch_coverage: float | None = None
    n_if_both: int | None = None
    trip_counts: list[int] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    dialect: str = ""
    mode: str = "infer"
    grad_leaves: int = 0
    transform: str = ""
    backend: str = ""
    target: str = ""
    verdict: str = ""
    stage: str | None = None
    error_class: str | None = None
    error_sig: str | None = None
    error_msg: str | None = None
    mismatch_output: int | None = None
    mismatch_input_set: int | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    gen_ms: float = 0.0
    ref_ms: float | None = None
    compile_ms: float | None = None
    run_ms: float | None = None
    cpu_ms: float | None = None
    backend_config: str | None = ""
    merged: int | None = None
    n_compiles: int | None = None
    cov_new: int | None = None
    timeout_confirmed: bool | None = None
    timeout_limit_s: float | None = None
    confirm_limit_s: float | None = None
    confirm_s: float | None = None
    dyn_dims: list[str] = field(default_factory=list)
    dyn_shapes: list[str] = field(default_factory=list)
    recompile_input_set: int | None = None
    failed_input_set: int | None = None
    dyn_finding: str | None = None
    leaked_procs: int | None = None
    damage: str | None = None
    finding_dir: str | None = None
    host: str = ""
    worker: str = ""
    ts: datetime = field(default_factory=utc_now)

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
        dyn = tc.dynshape
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
            n_inplace=n_inplace, n_view_writes=n_view_writes, n_input_sets=tc.n_sets,
            branch_coverage=coverage.get("branch_coverage"),
            n_if_both=coverage.get("ifs_both_branches") if counts["if"] else None,
            trip_counts=coverage.get("trip_counts", []),
            ops=sorted(counts), dtypes=sorted({v.type.dtype.short for v in g.all_values()}),
            dialect="eager", **tc.mode.row_fields(tc), gen_ms=gen_ms,
            dyn_dims=dyn.input_dims(g) if dyn is not None else [],
            dyn_shapes=dyn.shape_labels() if dyn is not None else [],
            host=host, worker=worker)

    @classmethod
    def graphless(cls, test_id: str, seed: int, **columns: Any) -> ResultRow:
        """The shared row of a test whose graph is unknown: identity and lineage from the
        seed, every graph count zero, every optional column null; `columns` set others."""
        return cls(test_id=test_id, seed=seed, lineage=json.dumps([{"seed": seed}]), **columns)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ResultRow:
        """A row back from its `to_dict()` (or any subset of columns holding the identity)."""
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

    def to_dict(self) -> dict[str, Any]:
        """The row as an actor reports it (see the module doc)."""
        return {name: getattr(self, name) for name in REPORTED}


#: the columns of `ResultRow.to_dict()`, in schema order
REPORTED = tuple(f.name for f in dataclasses.fields(ResultRow) if f.name not in DOWNSTREAM)
