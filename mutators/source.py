"""`MutationSource`: where the campaign's generation stage gets each test's graph.

Per test (deterministic given the seed and the pool's history):
  - with probability `mutation.rate`, a parent drawn from the seed pool (`mutators.seed_pool`: the
    corpus in `mutation.seeds`, `mutation.generated_seeds` generated graphs, and novel tests)
    is mutated by a chain of 1..`max_steps` mutators (`MutationEngine`);
  - otherwise (or when no mutation applied) a graph is generated from the seed, as with
    mutation off (`mutation.rate=0`: generation only).
After the reference has run, `observe` tells the pool what the test showed; the campaign driver
later feeds the backends' verdicts back (`feedback`) and the new compiler code the test reached
(`coverage_feedback`). Lineage (one JSON list per test, stored in
every row): a header `{"seed": test seed, "seed_id": root seed, "parent": pool entry,
"discarded": candidates discarded}` (generated tests: `{"seed": s, "seed_id": "gen/<s>"}`),
then every mutation step from the root seed on, oldest first, each tagged with the test that
applied it (`{"mutator": name, ...parameters, "test": test id}`), then repairs.
"""
from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ir.core.graph import Graph
from ir.core.paths import scopes
from ir.gen.builder import GenConfig, GenerationError, signature_key
from ir.gen.generate import generate
from mutators.engine import MutationConfig, MutationEngine
from mutators.seed_files import ROOT, SeedError, check_seed
from mutators.seed_pool import Outcome, SeedPool

log = logging.getLogger(__name__)


def seeds_dir(path: str | None) -> Path | None:
    """The seed directory `mutation.seeds` names: absolute, relative to the working directory,
    else relative to the checkout (so actors on any node of a cluster find the shipped corpus).
    None for no directory; ValueError when it does not exist."""
    if not path:
        return None
    p = Path(path)
    for cand in ([p] if p.is_absolute() else [p, ROOT / p]):
        if cand.is_dir():
            return cand
    raise ValueError(f"mutation.seeds: no directory {path!r} (relative paths are looked up in "
                     f"the working directory and in {ROOT})")


def check_seeds(path: str | Path) -> list[tuple[Path, SeedError]]:
    """The bad files of a seed directory, in name order, with their errors."""
    bad = []
    for f in sorted(Path(path).glob("*.gir")):
        try:
            check_seed(f)
        except SeedError as e:
            bad.append((f, e))
    return bad


def load_seeds(path: str | Path, skip_bad: bool = False) -> list[tuple[str, Graph]]:
    """Every `<dir>/*.gir` as (`corpus/<name>`, verified graph), in name order. A bad file
    raises SeedError (`check_seed`), or is left out with `skip_bad`."""
    out = []
    for f in sorted(Path(path).glob("*.gir")):
        try:
            out.append((f"corpus/{f.stem}", check_seed(f)))
        except SeedError as e:
            if not skip_bad:
                raise
            log.info("seed left out: %s", e)
    return out


def usable(g: Graph, gen: GenConfig) -> bool:
    """A seed the generator config allows: enabled dtypes and ops, no denied signature."""
    dtypes = set(gen.enabled_dtypes())
    if any(v.type.dtype not in dtypes for v in g.all_values()):
        return False
    enabled = {c.name for c in gen.enabled_ops()}
    deny = set(gen.deny)
    for inst, _ in g.walk():
        if not inst.blocks and inst.op.name not in enabled:
            return False
    if deny:
        for _, scope in scopes(g):
            types = scope.types()
            for inst in scope.insts:
                key = signature_key(inst.op.name, [types[a].dtype for a in inst.args],
                                    [r.type.dtype for r in inst.results])
                if key in deny:
                    return False
    return True


class MutationSource:
    def __init__(self, cfg: MutationConfig, gen: GenConfig):
        self.cfg = cfg
        self.gen = gen
        self.pool = SeedPool(cfg.pool_size)
        self.engine = MutationEngine(cfg, gen, donors=self.pool.donor)
        self.active = bool(self.engine.mutators) and cfg.rate > 0
        self._seeded = False
        #: root seed id -> the values its params came with (`mutation.model_weights: real`)
        self.weights: dict[str, dict[str, np.ndarray]] = {}

    def seed_pool(self) -> None:
        """Fill the pool with the seeds (on first use: a config error surfaces as the first
        test's generator failure, as the generator's own do)."""
        if self._seeded:
            return
        self._seeded = True
        cfg, gen = self.cfg, self.gen
        from mutators.model_seeds import load_all, options_of

        for s in load_all(cfg.seeds, options_of(cfg), skip_bad=cfg.skip_bad_seeds):
            if usable(s.graph, gen):
                self.pool.add_seed(s.seed_id, s.graph, s.model)
                if s.weights and cfg.model_weights == "real":
                    self.weights[s.seed_id] = s.weights
            else:
                log.info("seed %s left out: ops, dtypes or signatures the config excludes",
                         s.seed_id)
        for i in range(cfg.generated_seeds):
            try:
                self.pool.add_seed(f"genseed/{i}", generate(i, gen))
            except GenerationError:
                pass

    # ---- making a graph --------------------------------------------------------------------
    def make(self, test_id: str, seed: int,
             gen: GenConfig | None = None) -> tuple[Graph, list[dict[str, Any]]]:
        """The graph of test `test_id` and its lineage (see the module doc); `gen`: the
        generator's config for a graph generated here (default: the source's own)."""
        gen = gen or self.gen
        rng = random.Random(seed ^ 0x5EED)
        discarded = 0
        if self.active:
            self.seed_pool()
        if self.active and rng.random() < self.cfg.rate:
            parent = self.pool.choose(rng)
            if parent is not None:
                out = self.engine.mutate(parent.graph, rng)
                discarded = out.discarded
                if out.steps:
                    head = {"seed": seed, "seed_id": parent.seed_id, "parent": parent.id,
                            "discarded": out.discarded}
                    if parent.model:
                        head["model"] = parent.model
                    steps = [{**s, "test": test_id} for s in out.steps]
                    return out.graph, [head, *parent.lineage[1:], *steps]
            else:  # an empty pool (no seeds configured): mutate a generated graph
                g = generate(seed, gen)
                out = self.engine.mutate(g, rng)
                head = {"seed": seed, "seed_id": f"gen/{seed}", "discarded": out.discarded}
                return out.graph, [head, *({**s, "test": test_id} for s in out.steps)]
        gen_head: dict[str, Any] = {"seed": seed, "seed_id": f"gen/{seed}"}
        if discarded:
            gen_head["discarded"] = discarded
        return generate(seed, gen), [gen_head]

    def start_values(self, g: Graph, lineage: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        """The values `g`'s params start from: its root seed's (a window of a model with
        `mutation.model_weights: real`), for each param a mutant kept with its name and type;
        empty when there are none (every value is drawn)."""
        real = self.weights.get(lineage[0].get("seed_id", "")) if lineage else None
        if not real:
            return {}
        out = {}
        for p in g.params:
            a = real.get(p.name)
            if a is not None and tuple(a.shape) == tuple(p.type.shape) \
                    and a.dtype == p.type.dtype.numpy:
                out[p.name] = a
        return out

    # ---- feedback --------------------------------------------------------------------------
    def novel(self, graph: Graph) -> bool | None:
        """Whether `graph` has an op/feature pattern the pool has not seen (ask before
        `observe`ing its test); None with mutation off."""
        return bool(self.pool.novelty(graph)) if self.active else None

    def observe(self, test_id: str, graph: Graph, lineage: list[dict[str, Any]], valid: bool,
                error_class: str | None = None) -> None:
        """A test's outcome on the reference (called once its reference has run)."""
        if not self.active:
            return
        sig = "reference:valid" if valid else f"reference:invalid:{error_class or ''}"
        parent = lineage[0].get("parent") if lineage else None
        self.pool.add(graph, Outcome(test_id, lineage, valid, (sig,), parent))

    def feedback(self, outcomes: Iterable[tuple[str, str]]) -> int:
        """(test id, verdict signature) pairs from the backends; returns how many were new."""
        if not self.active:
            return 0
        by_test: dict[str, list[str]] = {}
        for test_id, sig in outcomes:
            by_test.setdefault(test_id, []).append(sig)
        return sum(self.pool.feedback(t, sigs) for t, sigs in by_test.items())

    def coverage_feedback(self, outcomes: Iterable[tuple[str, str, int]]) -> int:
        """(test id, backend, new lines) from the backends' compiler coverage (docs/
        coverage.md): a test that reached new code of any backend is novel; returns how many
        tests that made novel."""
        if not self.active:
            return 0
        by_test: dict[str, int] = {}
        for test_id, _backend, n in outcomes:
            by_test[test_id] = by_test.get(test_id, 0) + n
        return sum(self.pool.coverage_feedback(t, n) for t, n in by_test.items())
