"""An actor's start (campaign.driver.starts), without Ray: a placed actor is waited for however
long it takes and said so, one not placed is given up on (at once when no node could hold it,
else after `ray.start_timeout_s`, or when testing ends), and the reason names its request and
what the nodes have and have free."""
from __future__ import annotations

from campaign.driver.actor_pool import Pool, PoolLimits
from campaign.driver.starts import (
    FINAL_MIN_S,
    PROBE_S,
    ActorStart,
    Phase,
    Placement,
    placement_reason,
)

NODES = {"head": {"CPU": 1.0, "ort_box": 1.0, "memory": 1e9}, "w1": {"CPU": 4.0}, "w2": {"CPU": 4.0}}
REQUEST = {"CPU": 1.0, "ort_box": 1.0}


def test_a_request_only_one_busy_node_could_hold_names_that_node_and_what_it_has_free():
    fits_nowhere, why = placement_reason(REQUEST, NODES, {"head": {"ort_box": 1.0},
                                                          "w1": {"CPU": 3.0}})
    assert not fits_nowhere
    assert why == ("needs {CPU: 1, ort_box: 1}; the only node that could hold it: head has "
                   "{CPU: 1, ort_box: 1}, free {CPU: 0, ort_box: 1}")


def test_a_request_no_node_could_hold_lists_every_node():
    fits_nowhere, why = placement_reason({"CPU": 1.0, "nope": 1.0}, NODES, {})
    assert fits_nowhere
    assert why == ("needs {CPU: 1, nope: 1}; no live node has that much (head has {CPU: 1, "
                   "nope: 0}; w1 has {CPU: 4, nope: 0}; w2 has {CPU: 4, nope: 0})")
    assert placement_reason({"CPU": 1.0}, {}, {}) == (
        True, "needs {CPU: 1}; no live node has that much (none)")


def test_several_nodes_that_could_hold_it_are_each_shown():
    _, why = placement_reason({"CPU": 2.0}, NODES, {"w1": {"CPU": 1.0}, "w2": {"CPU": 0.5}})
    assert why == ("needs {CPU: 2}; the nodes that could hold it: w1 has {CPU: 4}, free "
                   "{CPU: 1}; w2 has {CPU: 4}, free {CPU: 0.5}")


def test_the_cluster_is_asked_only_after_probe_s_and_then_at_most_every_probe_s():
    s = ActorStart("ort#0", since=100.0)
    assert not s.due_probe(100.0 + PROBE_S - 0.1)
    assert s.due_probe(100.0 + PROBE_S)
    s.observe(100.0 + PROBE_S, Placement(placed=True), timeout_s=180.0)
    assert not s.due_probe(100.0 + 2 * PROBE_S - 0.1)
    assert s.due_probe(100.0 + 2 * PROBE_S)
    s.ready(120.0)
    assert not s.due_probe(200.0)


def test_a_placed_actor_is_waited_for_however_long_and_said_so_once_per_timeout():
    s = ActorStart("inductor#0", since=0.0)
    placed = Placement(placed=True, node="10.0.0.2/1a2b3c4d")
    assert s.observe(179.0, placed, timeout_s=180.0) is None
    assert s.observe(181.0, placed, timeout_s=180.0) == (
        "actor inductor#0 still starting after 181 s, waiting (on 10.0.0.2/1a2b3c4d: imports "
        "under load?)")
    assert s.observe(200.0, placed, timeout_s=180.0) is None  # said once per timeout
    assert s.observe(365.0, Placement(placed=True), timeout_s=180.0) == (
        "actor inductor#0 still starting after 365 s, waiting (imports under load?)")
    assert s.observe(10_000.0, placed, timeout_s=180.0, final=True) is not None
    assert s.phase is Phase.STARTING and not s.given_up  # never given up on while placed
    assert s.describe(10_100.0) == "still starting after 10100 s on 10.0.0.2/1a2b3c4d"
    s.ready(10_200.0)
    assert s.phase is Phase.READY and s.start_s == 10_200.0
    assert s.describe(10_300.0) == "ready in 10200.0 s"


def test_an_actor_not_placed_is_given_up_on_after_the_timeout():
    s = ActorStart("ort#0", since=0.0)
    busy = Placement(placed=False, why="needs {CPU: 1, ort_box: 1}; ...")
    assert s.observe(179.0, busy, timeout_s=180.0) is None and s.starting
    assert s.observe(180.0, busy, timeout_s=180.0) == (
        "actor ort#0 could not be placed in 180 s: needs {CPU: 1, ort_box: 1}; ...")
    assert s.given_up and s.phase is Phase.NOT_PLACED
    assert s.describe(300.0) == "could not be placed in 180 s: needs {CPU: 1, ort_box: 1}; ..."
    assert s.observe(400.0, Placement(placed=True), timeout_s=180.0) is None
    assert s.given_up  # a decision is final


def test_an_actor_no_node_could_hold_is_given_up_on_at_once():
    s = ActorStart("ort#0.1", since=0.0, first=False)
    line = s.observe(PROBE_S, Placement(placed=False, fits_nowhere=True, why="needs {nope: 1}; "
                                        "no live node has that much (w1 has {nope: 0})"),
                     timeout_s=180.0)
    assert line == ("actor ort#0.1 could not be placed in 5 s: needs {nope: 1}; no live node "
                    "has that much (w1 has {nope: 0})")
    assert s.given_up


def test_when_testing_ends_an_actor_long_unplaced_is_given_up_on_but_not_one_just_made():
    busy = Placement(placed=False, why="needs {CPU: 1}; ...")
    fresh = ActorStart("ort#1", since=0.0)
    assert fresh.observe(FINAL_MIN_S - 1, busy, timeout_s=180.0, final=True) is None
    assert fresh.starting  # maybe a worker process still starting: not called unplaceable
    old = ActorStart("ort#0", since=0.0)
    assert old.observe(90.0, busy, timeout_s=180.0, final=True) == (
        "actor ort#0 could not be placed in 90 s: needs {CPU: 1}; ...")


def test_a_failed_start_keeps_its_reason():
    s = ActorStart("ort#0", since=0.0)
    s.failed("ValueError: no such backend: nope")
    assert s.phase is Phase.FAILED and not s.starting and not s.given_up
    assert s.describe(1.0) == "failed to start: ValueError: no such backend: nope"


def backend_pool(n: int) -> Pool:
    """A backend's pool of `n` actors (never started), each with a fresh start."""
    limits = PoolLimits(in_flight_per_worker=2, max_batch=64, queue_s=10.0, test_timeout_s=300.0,
                        sandbox_timeout_s=60.0)
    pool = Pool("ort", n, {"CPU": 1.0}, lambda name: None, "evaluate", limits, by_ref={},
                upstream_backlog=lambda: 0)
    for slot in pool.slots:
        slot.start = ActorStart(f"ort#{slot.number}", since=0.0)
    return pool


def test_a_backend_awaits_placement_while_each_actor_is_unplaced_or_given_up_and_none_is_up():
    pool = backend_pool(2)
    a, b = (slot.start for slot in pool.slots)
    assert a is not None and b is not None
    assert not pool.awaiting_placement and not pool.out  # not looked at yet: starting
    unplaced = Placement(placed=False, why="needs {CPU: 1}; ...")
    a.observe(PROBE_S, unplaced, timeout_s=180.0)
    assert not pool.awaiting_placement  # b may be placed
    b.observe(PROBE_S, unplaced, timeout_s=180.0)
    assert pool.awaiting_placement and not pool.out
    a.observe(200.0, unplaced, timeout_s=180.0)
    assert a.given_up and pool.awaiting_placement and not pool.out
    assert not pool.slots[1].given_up and pool.slots[0].given_up
    b.observe(210.0, Placement(placed=True), timeout_s=180.0)  # placed at last: importing
    assert not pool.awaiting_placement and not pool.out
    b.observe(400.0, unplaced, timeout_s=180.0)
    assert pool.out


def test_a_backend_with_an_actor_up_never_awaits_placement():
    pool = backend_pool(2)
    a, b = (slot.start for slot in pool.slots)
    assert a is not None and b is not None
    a.ready(3.0)
    b.observe(200.0, Placement(placed=False, why="..."), timeout_s=180.0)
    assert b.given_up and not pool.awaiting_placement and not pool.out


def test_the_summary_gives_start_up_times_names_actors_not_up_and_counts_not_placed_tests():
    from campaign.driver.summary import Summary

    why = ("could not be placed in 87 s: needs {CPU: 1, ort_box: 1}; the only node that could "
           "hold it: 10.0.0.1/cc2ad2f0 (head) has {CPU: 1, ort_box: 1}, free {CPU: 0, ort_box: 1}")
    actors = [
        {"name": "gen#0", "stage": "generate", "start": "ready", "start_s": 2.04, "start_text": ""},
        {"name": "gen#1", "stage": "generate", "start": "ready", "start_s": 3.51, "start_text": ""},
        {"name": "ort_noopt#0", "stage": "ort_noopt", "start": "ready", "start_s": 4.0,
         "start_text": "ready in 4.0 s"},
        {"name": "ort#0", "stage": "ort", "start": "not placed", "start_s": None,
         "start_text": why},
        {"name": "inductor#0", "stage": "inductor", "start": "starting", "start_s": None,
         "start_text": "still starting after 90 s on 10.0.0.2/1a2b3c4d"},
    ]
    backends = {"ort": {"skipped_busy": 0, "skipped_starting": 0, "not_placed": 134},
                "inductor": {"skipped_busy": 0, "skipped_starting": 12, "not_placed": 0},
                "ort_noopt": {"skipped_busy": 3, "skipped_starting": 0, "not_placed": 0}}
    lines = Summary("c", "r", "90 s", "o", "o/results", "o/findings", actors=actors,
                    backends=backends).text().splitlines()
    assert lines[2:7] == [
        "skipped while busy (no row): ort_noopt 3",
        "skipped while its actors started (no row): inductor 12",
        "not placed (no row; its actors could not be placed): ort 134",
        "actors up in: gen 2.0-3.5 s, ort_noopt 4.0 s",
        f"actor ort#0 {why}",
    ]
    assert lines[7] == "actor inductor#0 still starting after 90 s on 10.0.0.2/1a2b3c4d"
