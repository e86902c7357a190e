"""Input sets that exercise control flow (`ir.coverage`): both branches of every `if`, several
trip counts (zero included) of every loop, each set valid, params shared."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ir import GenConfig, generate, parse, verify
from ir.coverage import Coverage, cover, run_traced, sites
from ir.domain import evaluate_checked
from ir.input_search import make_valid

IF_LOOP = (Path(__file__).parents[1] / "data" / "if_loop.gir").read_text()


def test_sites_name_every_control_flow_instruction_by_path():
    g = verify(parse(IF_LOOP))
    assert {s: i.op.name for s, i in sites(g).items()} == {"4": "if", "5": "loop"}


def test_trace_records_the_branch_and_the_trip_count():
    g = verify(parse(IF_LOOP))
    values = {"x0": np.ones((2, 3), np.float32), "x8": np.float32(-100.0), "x9": np.int64(3),
              "w1": np.full((3, 4), 0.5, np.float32)}
    cov, env = run_traced(g, values)
    assert env is not None
    assert cov.branches == {"4": {0}} and cov.trips == {"5": {3}}
    assert cov.summary() == {"n_sets": 1, "n_ifs": 1, "ifs_both_branches": 0,
                             "branch_coverage": 0.5, "trip_counts": [3]}


def test_cover_takes_both_branches_and_zero_trips_with_valid_sets_and_shared_params():
    g = verify(parse(IF_LOOP))
    valid = make_valid(g, 3)
    assert valid is not None and valid.graph == g
    extra, cov = cover(g, valid.search.values, 3)
    assert cov.branches["4"] == {0, 1}
    assert 0 in cov.trips["5"] and len(cov.trips["5"]) >= 2
    assert cov.n_sets == 1 + len(extra) <= 4
    for inputs in extra:
        assert set(inputs) == {"x0", "x8", "x9"}  # params are never part of an extra set
        env = {k: torch.from_numpy(np.asarray(v)) for k, v in {**valid.search.values, **inputs}.items()}
        assert evaluate_checked(g, env)[1] is None


def test_search_makes_the_branch_not_taken_valid_too():
    """log(then) needs positive operands even when set 0 takes else: explore mode checks it."""
    g = verify(parse(IF_LOOP))
    values = make_valid(g, 11).search.values
    env = {k: torch.from_numpy(np.asarray(v)) for k, v in values.items()}
    assert evaluate_checked(g, env, explore=True)[1] is None


def test_coverage_merges_and_reports_gain():
    a, b = Coverage({"0": "if", "1": "loop"}), Coverage({"0": "if", "1": "loop"})
    a.record("0", [0]), a.record("1", [0, 0])
    b.record("0", [0]), b.record("1", [0, 0])
    assert not a.gain(b)
    b.record("1", [])
    assert a.gain(b)
    a.merge(b)
    assert a.trips["1"] == {0, 2} and a.missing_branches() == [("0", 1)]


def test_generated_ifs_mostly_see_both_branches():
    """The figure the issue asks for, on a small sample (the campaign reports it per row)."""
    ifs = both = 0
    for seed in range(40):
        g = generate(seed, GenConfig(nodes=8, p_if=0.3))
        valid = make_valid(g, seed)
        if valid is None:
            continue
        _, cov = cover(valid.graph, valid.search.values, seed)
        summary = cov.summary()
        ifs += summary["n_ifs"]
        both += summary["ifs_both_branches"]
    assert ifs >= 10
    assert both / ifs >= 0.9, (both, ifs)
