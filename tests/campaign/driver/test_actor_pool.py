"""How a pool takes its queued tests into calls (campaign.driver.actor_pool.Pool), without Ray: a
merging backend that compiles each test in a dialect of its own (`dialect=mixed`) gets calls of
one dialect, so a call of k tests is one merged module."""
from __future__ import annotations

import time

from campaign.backends.configs import config_text
from campaign.driver.actor_pool import Pool, PoolLimits
from campaign.driver.checks import backend_merge_keys
from campaign.driver.work import Item, PipelineTest


def make_pool(merge: int, key=None, generating: bool = True) -> Pool:
    """A backend's pool of one actor (never started); `generating`: generation still holds
    tests, so more may come."""
    limits = PoolLimits(in_flight_per_worker=2, max_batch=64, queue_s=10.0, test_timeout_s=300.0,
                        sandbox_timeout_s=60.0, merge=merge)
    return Pool("b", 1, {}, lambda name: None, "evaluate", limits, by_ref={},
                upstream_backlog=lambda: 1 if generating else 0, merge_key=key)


def enqueue(pool: Pool, seeds: list[int]) -> None:
    for i, s in enumerate(seeds):
        pool.queue.append(Item(PipelineTest(i, f"t{i}", s, ["b"])))


def parity(seed: int) -> int:
    return seed % 2


def test_a_keyed_pool_takes_tests_of_the_oldest_ones_key_and_keeps_the_rest_in_order():
    pool = make_pool(merge=3, key=parity)
    enqueue(pool, [1, 2, 4, 3, 6, 5, 8])
    assert [it.test.seed for it in pool.take(3)] == [1, 3, 5]
    assert [it.test.seed for it in pool.queue] == [2, 4, 6, 8]
    assert [it.test.seed for it in pool.take(3)] == [2, 4, 6]
    assert [it.test.seed for it in pool.queue] == [8]


def test_without_a_key_a_pool_takes_the_oldest_tests_whatever_their_seed():
    pool = make_pool(merge=3)
    enqueue(pool, [1, 2, 4, 3])
    assert [it.test.seed for it in pool.take(3)] == [1, 2, 4]
    assert [it.test.seed for it in pool.queue] == [3]


def test_re_runs_go_first_then_the_call_fills_with_queued_tests_of_one_key():
    pool = make_pool(merge=3, key=parity)
    enqueue(pool, [2, 1, 3])
    pool.retry.append(Item(PipelineTest(9, "r", 8, ["b"])))
    assert [it.test.seed for it in pool.take(3)] == [8, 2]
    assert [it.test.seed for it in pool.queue] == [1, 3]


def test_a_keyed_batch_is_due_when_k_tests_share_the_oldest_ones_key():
    pool = make_pool(merge=3, key=parity)
    enqueue(pool, [1, 2, 4, 3, 6])  # three even tests, but the oldest is odd: one of two
    assert pool.due() > 0
    enqueue(pool, [5])
    assert pool.due() <= 0
    unkeyed = make_pool(merge=3)
    enqueue(unkeyed, [1, 2, 4])
    assert unkeyed.due() <= 0


def test_a_short_keyed_batch_goes_when_it_has_waited_its_time_or_nothing_more_comes():
    pool = make_pool(merge=4, key=parity, generating=False)
    enqueue(pool, [1, 2])
    assert pool.due() <= 0  # generation is done: no fuller batch is coming
    pool = make_pool(merge=4, key=parity)
    enqueue(pool, [1, 2])
    pool.queue[0].queued = time.monotonic() - 60
    assert pool.due() <= 0


def test_only_merging_backends_that_choose_a_dialect_or_configuration_per_test_get_a_key():
    from campaign.config import BackendOptions, Config

    cfg = Config()
    cfg.campaign.backends = ["ort", "inductor?dialect=mixed", "inductor?dialect=hop"]
    cfg.campaign.backend_options = {b: BackendOptions(merge=4) for b in cfg.campaign.backends}
    keys = backend_merge_keys(cfg)
    assert set(keys) == {"inductor?dialect=mixed"}
    from campaign.backends import make_backend

    mixed = make_backend("inductor?dialect=mixed")
    assert [keys["inductor?dialect=mixed"](s) for s in range(20)] == [
        (mixed.dialect_of(s), "") for s in range(20)]
    assert {keys["inductor?dialect=mixed"](s)[0] for s in range(20)} == {"hop", "python"}
    # a drawn configuration is part of the key: merged tests are compiled in one
    cfg.campaign.backend_options["inductor?dialect=hop"] = BackendOptions(merge=4, configs=1.0)
    keys = backend_merge_keys(cfg)
    hop = make_backend("inductor?dialect=hop")
    hop.sample_configs = 1.0
    assert [keys["inductor?dialect=hop"](s) for s in range(20)] == [
        ("hop", config_text(hop.config_of(s))) for s in range(20)]
    assert len({keys["inductor?dialect=hop"](s)[1] for s in range(20)}) > 5
