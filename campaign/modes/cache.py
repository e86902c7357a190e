"""The cache mode: the compile caches as an oracle (issue 43). A backend that caches
(`Backend.takes_cache_tests`: Inductor, whose FX graph cache and AOT autograd cache are on by default for
users) compiles the test twice, with both caches on:
  - warm: in a fresh cache directory, after it compiled and ran the test's near-twin there
    (`CacheSpec.twin`), so the twin's entries are on disk when the test looks its own up;
  - cold: in another fresh cache directory, nothing in it.
Both must give eager's outputs on every input set (so they agree with each other too). A
cache key that misses what tells the twin from the test serves the twin's compiled code to the
test: a wrong result (or a crash) of the warm compile only.

The near-twins (`TWINS`), each drawn by seed where the test has what it needs:
  - `self`: the test itself (a pair that must always agree: its property test);
  - `dtype`: the graph with every float made float64 (`campaign.evaluation.widen_graph`);
  - `stride`: the test itself on inputs of the same values in column-major strides;
  - `config`: the test itself compiled with one Inductor option changed (`CONFIG_TWINS`);
  - `schema`: one custom op (`ir.ops.custom`) of the test registered under the same name with
    another schema: a mutating one made pure (`mutates_args` empty, the new contents
    returned), a pure one returning one more result (pytorch#187319's shape: the op's
    definition changed, its name did not). The twin's op is unregistered after its run, and
    the test's registered again under that name.
A backend that does not cache runs the test's forward, judged as an inference test.

Drawn by seed among the inference tests (`GenConfig.p_cache`, its own RNG stream), before the
repeat mode; no dynamic shapes.
"""
from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from campaign.modes.base import output_labels
from campaign.modes.infer import InferMode

if TYPE_CHECKING:
    from campaign.artifacts import Materialized
    from campaign.backends.base import Backend
    from campaign.evaluation import ReferenceResult
    from campaign.oracle import Truths
    from campaign.testcase import TestCase
    from ir.core.graph import Graph
    from ir.gen.builder import GenConfig

#: a finding folder's files of the near-twin (`CacheSpec.files`)
CACHE_TWIN_FILE, TWIN_GRAPH_FILE, TWIN_VALUES_FILE = (
    "cache_twin.json", "twin.gir", "twin_inputs.npz")
#: the near-twin kinds, in drawing order
TWINS = ("self", "dtype", "stride", "config", "schema")
#: the Inductor options a `config` twin changes (one each), `torch._inductor.config` keys:
#: each changes the generated code, so each must be in the cache key
CONFIG_TWINS: tuple[tuple[str, Any], ...] = (
    ("max_fusion_size", 1), ("inplace_buffers", False), ("split_reductions", False),
    ("cpp.simdlen", 0), ("reorder_for_locality", False), ("epilogue_fusion", False),
    ("cpp.enable_loop_tail_vec", False), ("aggressive_fusion", True))


@dataclass(frozen=True)
class CacheSpec:
    """The near-twin compiled first into the warm cache: its kind (`TWINS`), its graph and
    values (None: the test's own graph, and its set 0), whether its inputs are passed in
    column-major strides, and the Inductor options it is compiled with besides the backend's
    (`torch._inductor.config` keys)."""

    twin: str = "self"
    graph: Graph | None = None
    values: dict[str, np.ndarray] | None = None
    strided: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    #: a `schema` twin: its custom op's own name -> the test's op's, which it is registered as
    rename: dict[str, str] = field(default_factory=dict)

    def twin_graph(self, tc: TestCase) -> Graph:
        return self.graph if self.graph is not None else tc.graph

    def twin_values(self, tc: TestCase) -> dict[str, np.ndarray]:
        return self.values if self.values is not None else tc.values

    def files(self) -> dict[str, bytes]:
        """Everything the twin is, as a finding folder holds it (`from_files` reads it back):
        `cache_twin.json` (its kind, `describe`, strides, options and a `schema` twin's
        `rename`), `twin.gir` (its own graph, if any), `twin_inputs.npz` (its own values)."""
        from ir.core.npz import npz_bytes
        from ir.core.text import print_graph

        out = {CACHE_TWIN_FILE: json.dumps(
            {"twin": self.twin, "describe": self.describe(), "strided": self.strided,
             "config": self.config, "rename": self.rename}, indent=1).encode()}
        if self.graph is not None:
            out[TWIN_GRAPH_FILE] = print_graph(self.graph).encode()
        if self.values is not None:
            out[TWIN_VALUES_FILE] = npz_bytes(self.values)
        return out

    @staticmethod
    def from_files(files: Mapping[str, bytes], test_graph: Graph) -> CacheSpec:
        """The twin `files` (`CacheSpec.files`) hold, drawn for `test_graph`. A `schema`
        twin's `rename` missing (cache_twin.json before it was written there) is derived: the
        one custom op of the twin's graph the test's lacks, under the name of the one custom
        op of the test's graph the twin's lacks; ValueError when there is not one of each."""
        import io

        from ir.core.text import parse

        meta = json.loads(files[CACHE_TWIN_FILE])
        twin = str(meta["twin"])
        if twin not in TWINS:
            raise ValueError(f"{CACHE_TWIN_FILE}: unknown twin {twin!r}")
        graph = (parse(files[TWIN_GRAPH_FILE].decode(), TWIN_GRAPH_FILE)
                 if TWIN_GRAPH_FILE in files else None)
        values = None
        if TWIN_VALUES_FILE in files:
            with np.load(io.BytesIO(files[TWIN_VALUES_FILE]), allow_pickle=False) as z:
                values = {k: z[k] for k in z.files}
        rename = meta.get("rename")
        if rename is None:
            rename = derived_rename(test_graph, graph) if twin == "schema" else {}
        return CacheSpec(twin, graph, values, bool(meta.get("strided", False)),
                         dict(meta.get("config") or {}), dict(rename))

    def describe(self) -> str:
        """One line: what the twin is."""
        return {"self": "the test itself",
                "dtype": "the test in float64",
                "stride": "the test on column-major inputs",
                "config": "the test with " + ", ".join(f"{k}={v!r}" for k, v in self.config.items()),
                "schema": "the test with the custom op " + ", ".join(self.rename.values())
                          + " registered with another schema",
                }[self.twin]


def custom_names(g: Graph) -> set[str]:
    """The qualified names of the custom ops of `g` (`Custom.qualname`), nested ones too."""
    from ir.ops.custom import Custom

    return {inst.op.qualname(inst.blocks[0]) for inst, _ in g.walk()
            if isinstance(inst.op, Custom)}


def derived_rename(test_graph: Graph, twin_graph: Graph | None) -> dict[str, str]:
    """A `schema` twin's `rename` from the two graphs: its one custom op the test lacks ->
    the test's one custom op it lacks (`schema_twin` changes exactly one)."""
    if twin_graph is None:
        raise ValueError("a schema twin without its graph (twin.gir)")
    theirs, ours = custom_names(twin_graph), custom_names(test_graph)
    new, old = sorted(theirs - ours), sorted(ours - theirs)
    if len(new) != 1 or len(old) != 1:
        raise ValueError(f"a schema twin's renamed op is not one: {new} for {old}")
    return {new[0]: old[0]}


def draw_twin(tc: TestCase, seed: int) -> CacheSpec | None:
    """A near-twin for `tc`, by seed among the kinds it fits (None: none fits)."""
    from campaign.evaluation import widen_graph
    from ir.core.dtypes import DType
    from ir.ops.custom import holds_custom

    rng = random.Random(f"cache-twin/{seed}")
    g = tc.graph
    kinds = ["self", "config"]
    if any(v.type.dtype is DType.float32 for v in g.all_values()):
        kinds.append("dtype")
    if any(v.type.rank >= 2 for v in g.inputs):
        kinds.append("stride")
    if holds_custom(g):
        kinds.append("schema")
    kind = rng.choice(sorted(kinds, key=TWINS.index))
    if kind == "dtype":
        values = {k: v.astype(np.float64) if v.dtype == np.float32 else v
                  for k, v in tc.values.items()}
        return CacheSpec("dtype", widen_graph(g), values)
    if kind == "stride":
        return CacheSpec("stride", strided=True)
    if kind == "schema":
        return schema_twin(g, rng)
    if kind == "config":
        key, value = rng.choice(CONFIG_TWINS)
        return CacheSpec("config", config={key: value})
    return CacheSpec("self")


def schema_twin(g: Graph, rng: random.Random) -> CacheSpec:
    """The `schema` twin of `g` (which holds a custom op): one custom op, drawn, with another
    schema under the same name (the module doc)."""
    from dataclasses import replace

    from ir.core.graph import Inst, Value
    from ir.core.names import Names
    from ir.core.paths import scopes
    from ir.ops.custom import Custom

    sites = [(path, i) for path, scope in scopes(g) for i, inst in enumerate(scope.insts)
             if isinstance(inst.op, Custom)]
    path, i = rng.choice(sites)
    scope = path.at(g)
    inst = scope.insts[i]
    op = inst.op
    assert isinstance(op, Custom)
    (body,) = inst.blocks
    names = Names.of(g)
    if op.mutates:  # the new contents returned instead of written
        types = scope.types()
        new = tuple(Value(names.suffixed(inst.args[k]), types[inst.args[k]]) for k in op.mutates)
        twin_op, twin_body, results = op.pure_form(), body, (*new, *inst.results)
    else:  # one more result: the first again
        twin_op = op
        twin_body = replace(body, outputs=(*body.outputs, body.outputs[0]))
        extra = Value(names.suffixed(body.outputs[0]), body.output_types()[0])
        results = (*inst.results, extra)
    insts = list(scope.insts)
    insts[i] = Inst(twin_op, inst.args, results, (twin_body,))
    twin = path.replace_at(g, replace(scope, insts=tuple(insts)))
    return CacheSpec("schema", twin, rename={twin_op.qualname(twin_body): op.qualname(body)})


class CacheMode(InferMode):
    """Owns `TestCase.cache` (`CacheSpec`): per input set, the warm compile's outputs, then
    the cold one's, each judged against the reference's outputs of that set."""

    name = "cache"
    spec_field = "cache"
    combines_with_dynshape = False
    mergeable = False
    warms_cache = True
    #: its near-twin was drawn for the test's graph (a `schema` twin's op is one of the
    #: graph's with another schema, a `dtype` twin the graph widened): a reduced candidate
    #: would be compiled after the twin of another graph, no longer its near-twin, and a
    #: miss of the key no longer the bug; so the triage confirms it as it is (its repro.py
    #: runs that twin: campaign/triage/pipeline/cache_repro.py)
    unreduced = "a cache test: confirmed, not reduced (its near-twin was drawn for its graph)"

    @staticmethod
    def wanted(seed: int, gen: GenConfig) -> bool:
        """Whether the (inference) test of `seed` is a cache test, at `gen.p_cache`."""
        return gen.p_cache > 0 and random.Random(f"cache/{seed}").random() < gen.p_cache

    def make(self, tc: TestCase, seed: int, gen: GenConfig) -> TestCase:
        if tc.shapes.dynamic:
            return tc
        tc.cache = draw_twin(tc, seed)
        return tc

    def refit(self, tc: TestCase, spec: Any, drawn_for: Graph, seed: int,
              keep_leaves: bool = False) -> str | None:
        """The near-twin `spec` kept for a re-run (the triage's, `BackendRunner.run`): a twin
        of the test itself (`self`, `stride`, `config`) follows any graph, one with a graph
        of its own (`dtype`, `schema`) only the graph it was drawn for."""
        if spec.graph is not None and tc.graph != drawn_for:
            return f"a {spec.twin} twin drawn for another graph"
        if tc.shapes.dynamic:
            return "a cache test has no dynamic shapes"
        tc.cache = spec
        return None

    # ---- what its reference computes: each set's outputs twice ----------------------------------
    def n_results(self, tc: TestCase) -> int:
        return 2 * len(tc.graph.outputs)

    def labels(self, tc: TestCase) -> list[str]:
        outs = output_labels(tc.graph)
        return [f"warm {o}" for o in outs] + [f"cold {o}" for o in outs]

    def reference(self, m: Materialized, t0: float) -> ReferenceResult:
        ref = super().reference(m, t0)
        if ref.outputs is None:
            return ref
        ref.outputs = twice(ref.outputs, len(m.tc.graph.outputs))
        return ref

    def shadow(self, m: Materialized, samples: int | None = None) -> Truths:
        from campaign.oracle import Truths

        truths = super().shadow(m, samples)
        n = len(m.tc.graph.outputs)
        return Truths(twice(list(truths), n), twice(truths.spread, n))

    def tolerances(self, tc: TestCase) -> tuple[list, list]:
        tol, prec = super().tolerances(tc)
        return tol + tol, prec + prec

    def dialects(self, tc: TestCase) -> tuple[str, ...] | None:
        # torch 2.13 bypasses both caches for a graph holding a higher-order op (torch.cond,
        # while_loop, scan): in the python dialect Dynamo's frames hold none (a backend that
        # adapts compiles it so, without fullgraph)
        return ("python",)

    def trains_on(self, backend: Backend) -> bool:
        return backend.takes_cache_tests()

    def forward(self, prep: Any) -> Any:
        from campaign.oracle import Truths

        n = len(prep.tc.graph.outputs)
        outs = once(list(prep.ref.outputs), n)
        tol, prec = prep.tolerances[:n], prep.precisions[:n]

        def truth() -> Truths:
            t = prep.truth()
            return Truths(once(list(t), n), once(t.spread, n))
        return outs, n, tol, prec, truth

    def files(self, tc: TestCase) -> dict[str, bytes]:
        """The twin (`CacheSpec.files`, rename included): the triage rebuilds it from them
        (`load_finding`), so that a re-run is a cache test again."""
        spec: CacheSpec = tc.cache
        return spec.files()


def twice(per_set: list, n: int) -> list:
    """Each set's `n` arrays, then the same again: the warm and the cold compile's layout."""
    out: list = []
    for k in range(0, len(per_set), n):
        out += per_set[k:k + n] * 2
    return out


def once(per_set: list, n: int) -> list:
    """The warm compile's arrays of each set (`twice`'s inverse)."""
    out: list = []
    for k in range(0, len(per_set), 2 * n):
        out += per_set[k:k + n]
    return out


CACHE = CacheMode()
