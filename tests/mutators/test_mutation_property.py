"""Property: random mutation chains (length 1..5, every mutator, weights as configured) over the
shipped seeds always verify and are (almost always) valid on the reference: the input search
finds values (`make_valid`, repairs allowed) that pass `ir.numerics.domain`'s check of every value."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from mutator_graphs import donor, seeds

from ir import GenConfig, parse, print_graph, verify
from ir.numerics.domain import evaluate_checked
from ir.numerics.input_search import make_valid
from mutators import MutationConfig, MutationEngine


def chains(n: int, start: int = 0):
    engine = MutationEngine(MutationConfig(max_steps=5), GenConfig(), donors=donor)
    for i in range(start, start + n):
        rng = random.Random(i)
        sid, g = seeds()[i % len(seeds())]
        yield i, engine.mutate(g, rng, steps=rng.randint(1, 5))
    assert all(s["error"] == 0 for s in engine.stats.values()), engine.stats


def check(n: int, start: int = 0) -> dict:
    torch.set_num_threads(1)
    out = {"chains": 0, "steps": 0, "valid": 0, "repaired": 0}
    for i, mutated in chains(n, start):
        g = mutated.graph
        verify(g)
        if i % 10 == 0:  # the text form round-trips (slow-ish: sampled)
            assert parse(print_graph(g)) == g
        out["chains"] += 1
        out["steps"] += len(mutated.steps)
        valid = make_valid(g, i)
        if valid is None:
            continue
        env = {k: torch.from_numpy(np.array(v)) for k, v in valid.search.values.items()}
        if evaluate_checked(valid.graph, env)[1] is None:
            out["valid"] += 1
            out["repaired"] += bool(valid.dropped)
    return out


def test_200_chains_verify_and_99_percent_are_valid():
    got = check(200)
    assert got["steps"] >= 2 * got["chains"], got
    assert got["valid"] >= 0.99 * got["chains"], got


@pytest.mark.slow
def test_1000_chains_verify_and_99_percent_are_valid():
    got = check(1000, start=10_000)
    print(got)
    assert got["valid"] >= 0.99 * got["chains"], got
