"""`MutationEngine`: applies a chain of weighted mutators to a graph, verifying every step.

Each step draws a mutator by weight and asks it for a candidate; a candidate that is declined
(the mutator found nothing to do at the place it looked), fails `ir.core.verify`, grows past
`max_insts`, nests past `max_depth` or has more ifs whose branches `ir.numerics.flow_coverage.cover` cannot
steer than its parent (`ir.numerics.flow_coverage.unsteerable_ifs`) is discarded and counted, and the step is
retried (a new draw, so another mutator or the same one with other choices) up to `retries`
times. Accepted steps are recorded for the lineage as `{"mutator": name, ...its parameters}`.
"""
from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ir.core.graph import Graph
from ir.core.verify import VerifyError, verify
from ir.gen.builder import GenConfig
from ir.numerics.flow_coverage import unsteerable_ifs
from ir.ops.control import holds_choice
from mutators.base import MUTATORS, Mutator

log = logging.getLogger(__name__)

#: every mutator with its default weight (the graph-structure ones a little heavier)
DEFAULT_WEIGHTS = {
    "insert_op": 1.0, "replace_op": 1.0, "mutate_attrs": 1.0, "mutate_shape": 0.5,
    "duplicate_region": 1.0, "splice": 1.0, "wrap_branch": 1.5, "wrap_loop": 1.5,
    "insert_rnn": 1.0, "to_inplace": 1.0,
}


@dataclass
class MutationConfig:
    """The `mutation` group of the campaign config (docs/mutation.md).

    `rate`: share of tests made by mutating an entry of the seed pool (the rest are generated
    from scratch; 0: generation only); `max_steps`: each such test applies 1..max_steps
    mutators; `retries`: attempts per step; `weights`: mutator name -> relative weight (0 or
    absent: off); `seeds`: an entry or a list of entries for the pool (`mutators.model_seeds`):
    a directory of `.gir` files or one `.gir` file (relative paths: to the working directory,
    else to the dynsmith checkout), an `.onnx` file, `torchvision:resnet18`-style model names
    (`timm:`, `transformers:`), or a factory `pkg.mod:fn`, models being cut into windows
    (`windows` per model, of `window_min`..`window_max` instructions); null or "": none;
    `model_weights`: `real` (a window's params start from the model's values: its `.npz`, or
    the imported weights) or `fresh` (drawn, as for any seed); `generated_seeds`:
    graphs generated into the pool at start; `pool_size`: most entries kept (seeds are never
    evicted); `max_insts`: mutants with more instructions (nested counted) are discarded;
    `max_depth`: deepest body nesting a mutant may reach; `skip_bad_seeds`: a seed file that
    does not parse or verify is left out with a warning (false: it is a config error at
    start-up, naming the file and line)."""

    rate: float = 0.8
    max_steps: int = 3
    retries: int = 4
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    #: a string or a list of strings (Any: the schema takes both)
    seeds: Any = "seeds"
    generated_seeds: int = 8
    pool_size: int = 256
    max_insts: int = 80
    max_depth: int = 3
    skip_bad_seeds: bool = False
    windows: int = 8
    window_min: int = 5
    window_max: int = 30
    model_weights: str = "real"


@dataclass
class MutationOutcome:
    graph: Graph
    steps: list[dict[str, Any]]
    #: candidates discarded: declined, failing `verify`, or too big / too deep
    discarded: int = 0
    #: mutator name -> candidates of it discarded in this chain
    discarded_by: Counter = field(default_factory=Counter)


class MutationEngine:
    def __init__(self, cfg: MutationConfig, gen: GenConfig,
                 donors: Callable[[random.Random], tuple[str, Graph] | None] | None = None):
        unknown = sorted(set(cfg.weights) - set(MUTATORS))
        if unknown:
            raise ValueError(f"mutation.weights: unknown mutator {unknown[0]!r} (known: {', '.join(sorted(MUTATORS))})")
        self.cfg = cfg
        self.gen = gen
        self.mutators: list[Mutator] = [MUTATORS[n]() for n, w in cfg.weights.items()
                                        if w > 0 and MUTATORS[n].available()]
        self.weights = [cfg.weights[m.name] for m in self.mutators]
        for m in self.mutators:
            m.donors = donors
            m.max_depth = cfg.max_depth
        #: per mutator: proposed, declined, invalid (failed verify), too_big, unsteerable, error,
        #: applied
        self.stats: dict[str, Counter] = {m.name: Counter() for m in self.mutators}
        self._unsteerable_of: Graph | None = None
        self._unsteerable_n = 0

    def mutate(self, g: Graph, rng: random.Random, steps: int | None = None) -> MutationOutcome:
        """A chain of 1..max_steps accepted mutations of `g` (fewer when every retry of a step
        fails; `steps` fixes the chain length)."""
        out = MutationOutcome(g, [])
        if not self.mutators:
            return out
        for _ in range(steps if steps is not None else rng.randint(1, self.cfg.max_steps)):
            for _ in range(self.cfg.retries):
                mutator = rng.choices(self.mutators, self.weights)[0]
                params = self.step(mutator, out, rng)
                if params is not None:
                    out.steps.append({"mutator": mutator.name, **params})
                    break
                out.discarded += 1
                out.discarded_by[mutator.name] += 1
        return out

    def _unsteerable(self, parent: Graph) -> int:
        """How many ifs of `parent` `cover` cannot steer; computed once per parent, not once per
        candidate (a step retries on the same parent)."""
        if self._unsteerable_of is not parent:
            self._unsteerable_of, self._unsteerable_n = parent, len(unsteerable_ifs(parent))
        return self._unsteerable_n

    def step(self, mutator: Mutator, out: MutationOutcome, rng: random.Random) -> dict | None:
        """One candidate of `mutator` on `out.graph`; on success `out.graph` becomes it and its
        parameters are returned."""
        stats = self.stats[mutator.name]
        stats["proposed"] += 1
        try:
            mutant = mutator.propose(out.graph, rng, self.gen)
        except Exception:  # a mutator bug: counted (tests require zero), never fatal
            log.exception("mutator %s raised", mutator.name)
            stats["error"] += 1
            return None
        if mutant is None:
            stats["declined"] += 1
            return None
        g = mutant.graph
        if g.num_insts() > self.cfg.max_insts or g.max_depth() > self.cfg.max_depth:
            stats["too_big"] += 1
            return None
        try:
            verify(g)
        except VerifyError as e:
            stats["invalid"] += 1
            log.debug("mutator %s made an ill-formed graph: %s", mutator.name, e.summary)
            return None
        if holds_choice(g) and len(unsteerable_ifs(g)) > self._unsteerable(out.graph):
            # an if whose predicate is no longer a comparison with a graph-input threshold
            # (e.g. `gt` replaced by `eq`, an op inserted on the threshold or on the predicate,
            # the comparison wrapped into a body): `ir.numerics.flow_coverage.cover` could not take both
            # of its branches
            stats["unsteerable"] += 1
            return None
        stats["applied"] += 1
        out.graph = g
        return mutant.params
