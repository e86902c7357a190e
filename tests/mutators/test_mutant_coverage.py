"""Mutants keep the ifs `ir.numerics.flow_coverage.cover` can steer: a wrap_branch mutant of a shipped seed
gets input sets taking both branches of its ifs (each set valid); an if whose predicate is
passed unchanged into a body is steered through the comparison outside; the engine discards a
candidate whose if no longer has a graph-input threshold."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from ir import GenConfig, parse, verify
from ir.numerics.domain import evaluate_checked
from ir.numerics.flow_coverage import cover, unsteerable_ifs
from ir.numerics.input_search import make_valid
from mutators import MUTATORS, MutationConfig
from mutators.engine import MutationEngine, MutationOutcome
from mutators.source import load_seeds

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


def _valid(g, values) -> bool:
    env = {k: torch.from_numpy(np.asarray(v)) for k, v in values.items()}
    return evaluate_checked(g, env)[1] is None


def test_wrap_branch_mutants_of_the_seeds_take_both_branches():
    m = MUTATORS["wrap_branch"]()
    ifs = both = mutants = 0
    for sid, seed in load_seeds(SEEDS):
        for i in range(3):
            mu = m.propose(seed, random.Random(i), GenConfig())
            if mu is None:
                continue
            mutants += 1
            assert not unsteerable_ifs(mu.graph), sid
            valid = make_valid(mu.graph, i)
            assert valid is not None, sid
            extra, cov, _ = cover(valid.graph, valid.search.values, i)
            for inputs in extra:  # every set counted is valid by set 0's check
                assert _valid(valid.graph, {**valid.search.values, **inputs})
            ifs += len(cov.if_sites)
            both += sum(len(cov.branches.get(s, ())) == 2 for s in cov.if_sites)
    assert mutants >= 12 and ifs >= mutants
    assert both == ifs, f"{both}/{ifs} ifs took both branches"


#: an if (6/0/0) in the then-branch of another, its predicate %v5 passed in as an operand
NESTED = """graph main(%x0: f32[2,3], %x8: f32[], %x9: f32[], %w1: param f32[3,4]) {
  %v2 = matmul(%x0, %w1) : f32[2,4]
  %v3 = reduce_sum[axis=0, keepdim=false](%v2) : f32[4]
  %v4 = reduce_sum[axis=0, keepdim=false](%v3) : f32[]
  %v5 = gt(%v4, %x8) : b8[]
  %v10 = reduce_sum[axis=0, keepdim=false](%v3) : f32[]
  %v11 = lt(%v10, %x9) : b8[]
  %v6 = if(%v11, %v5, %v2) : f32[2,4] {
    graph then(%p0: b8[], %t0: f32[2,4]) {
      %t1 = if(%p0, %t0) : f32[2,4] {
        graph then(%q0: f32[2,4]) {
          %q1 = tanh(%q0) : f32[2,4]
          return %q1
        }
        graph else(%r0: f32[2,4]) {
          %r1 = neg(%r0) : f32[2,4]
          return %r1
        }
      }
      return %t1
    }
    graph else(%p1: b8[], %e0: f32[2,4]) {
      %e1 = neg(%e0) : f32[2,4]
      return %e1
    }
  }
  return %v6
}"""


def test_an_if_whose_predicate_is_passed_into_a_body_takes_both_branches():
    g = verify(parse(NESTED))
    assert unsteerable_ifs(g) == []
    valid = make_valid(g, 5)
    extra, cov, _ = cover(valid.graph, valid.search.values, 5)
    assert "6/0/0" in cov.steerable
    assert cov.branches["6"] == {0, 1} and cov.branches["6/0/0"] == {0, 1}
    for inputs in extra:
        assert _valid(valid.graph, {**valid.search.values, **inputs})


def test_unsteerable_ifs_names_predicates_cover_cannot_move():
    eq = NESTED.replace("%v5 = gt(%v4, %x8)", "%v5 = eq(%v4, %x8)")
    assert unsteerable_ifs(verify(parse(eq))) == ["6/0/0"]
    # the threshold read as data too: moving it would move %v2's consumer
    shared = NESTED.replace("%v3 = reduce_sum[axis=0, keepdim=false](%v2) : f32[4]",
                            "%v12 = mul(%v2, %x8) : f32[2,4]\n"
                            "  %v3 = reduce_sum[axis=0, keepdim=false](%v12) : f32[4]")
    assert unsteerable_ifs(verify(parse(shared))) == ["7/0/0"]  # (one instruction more)


def test_the_engine_discards_a_candidate_with_an_if_cover_cannot_steer():
    from mutators.base import Mutant

    class ToEq:  # a stand-in (no Mutator subclass: those register themselves by name)
        name = "replace_op"

        def propose(self, g, rng, gen):
            return Mutant(verify(parse(NESTED.replace("gt(%v4", "eq(%v4"))), {})

    engine = MutationEngine(MutationConfig(weights={"replace_op": 1.0}), GenConfig())
    engine.mutators = [ToEq()]
    out = MutationOutcome(verify(parse(NESTED)), [])
    assert engine.step(engine.mutators[0], out, random.Random(0)) is None
    assert engine.stats["replace_op"]["unsteerable"] == 1 and out.graph == verify(parse(NESTED))
