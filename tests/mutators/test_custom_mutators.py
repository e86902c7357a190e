"""wrap_custom and unwrap_custom (`mutators.custom`): candidates verify and round-trip, the
pure form and unwrapping keep the program's results, and custom bodies are mutated only by
mutators that keep them straight-line and pure."""
from __future__ import annotations

import random

import numpy as np
import torch
from mutator_graphs import graphs

from ir import GenConfig, generate, parse, print_graph, verify
from ir.materialize.to_torch import run_graph_torch
from ir.ops.custom import Custom, holds_custom
from mutators import MUTATORS
from mutators.scope import scopes


def _run(g) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    env = {}
    for v in (*g.inputs, *g.params):
        shape = [int(d) for d in v.type.shape]
        a = rng.uniform(0.5, 1.5, shape) if v.type.dtype.is_float else rng.integers(0, 3, shape)
        env[v.name] = torch.from_numpy(np.asarray(a).astype(v.type.dtype.numpy))
    return [t.numpy() for t in run_graph_torch(g, env)]


def test_wrap_custom_candidates_verify_round_trip_and_apply():
    m = MUTATORS["wrap_custom"]()
    gs = graphs()
    forms = set()
    applied = 0
    for i in range(60):
        mu = m.propose(gs[i % len(gs)], random.Random(i), GenConfig())
        if mu is None:
            continue
        applied += 1
        verify(mu.graph)
        assert parse(print_graph(mu.graph)) == mu.graph
        assert holds_custom(mu.graph)
        forms.add(mu.params["form"])
    assert applied >= 0.6 * 60, applied
    assert forms == {"pure", "in_place", "behind_clone", "through_view"}, forms


def test_the_pure_form_keeps_the_results():
    m = MUTATORS["wrap_custom"]()
    gen = GenConfig(p_custom_mutates=0.0)
    checked = 0
    for i, g in enumerate(graphs()[:12]):
        mu = m.propose(g, random.Random(i), gen)
        if mu is None:
            continue
        want, got = _run(g), _run(mu.graph)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(want, got, strict=True))
        checked += 1
    assert checked >= 6


def test_unwrap_custom_keeps_the_results_mutating_ops_included():
    m = MUTATORS["unwrap_custom"]()
    gen = GenConfig(nodes=10, p_if=0.2, p_loop=0.1, p_custom=1.0, p_custom_mutates=0.7)
    checked = mutating = 0
    for seed in range(40):
        g = generate(seed, gen)
        mu = m.propose(g, random.Random(seed), gen)
        if mu is None:
            continue
        verify(mu.graph)
        n = lambda h: sum(isinstance(i.op, Custom) for i, _ in h.walk())  # noqa: E731
        assert n(mu.graph) == n(g) - 1
        want, got = _run(g), _run(mu.graph)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(want, got, strict=True))
        checked += 1
        mutating += bool(mu.params["mutates"])
    assert checked >= 30 and mutating >= 5, (checked, mutating)


def test_control_flow_and_writes_stay_out_of_custom_bodies():
    gen = GenConfig(nodes=10, p_if=0.2, p_loop=0.1, p_custom=1.0)
    names = ["wrap_branch", "wrap_loop", "to_inplace", "insert_rnn", "splice", "wrap_custom"]
    for seed in range(20):
        g = generate(seed, gen)
        if not any(s.kernel for s in scopes(g)):
            continue
        for name in names:
            m = MUTATORS[name]()
            for k in range(5):
                site = m.pick_site(g, random.Random(k))
                assert site is None or not site.kernel, (name, site.path)
