"""The blame policy (campaign.driver.blame), without Ray: who is blamed when an actor dies,
hangs, is killed for node memory or raises, what is re-run, and when failures stop a campaign."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from campaign.driver.blame import BlamePolicy, Decision, Failure
from campaign.driver.work import Item, PipelineTest


def items(*indices: int, suspect: bool = False) -> list[Item]:
    return [Item(PipelineTest(i, f"t{i}", i, ["b"]), suspect=suspect) for i in indices]


def policy() -> BlamePolicy:
    return BlamePolicy(max_consecutive_failures=3, max_node_oom=2)


def test_a_death_with_one_test_not_back_blames_it():
    (it,) = items(1)
    assert policy().lost(Failure.DIED, [[it]]) == Decision(Failure.DIED, blamed=it)


def test_a_death_with_several_tests_not_back_re_runs_each_alone():
    batch, queued = items(1, 2), items(3)
    d = policy().lost(Failure.DIED, [batch, queued])
    assert d.blamed is None and d.suspects == (*batch, *queued) and d.retry == ()
    assert d.requeued == 3


def test_a_suspect_that_kills_its_actor_again_alone_is_blamed():
    (it,) = items(1, suspect=True)
    assert policy().lost(Failure.DIED, [[it]]).blamed is it


def test_a_hang_blames_the_running_test_alone_and_re_runs_those_queued_behind_it():
    (running,), queued = items(1), items(2, 3)
    d = policy().lost(Failure.HUNG, [[running], queued])
    assert d == Decision(Failure.HUNG, blamed=running, retry=tuple(queued))
    assert d.requeued == 2


def test_a_hung_batch_becomes_suspects_and_the_calls_behind_it_re_run_unsuspected():
    batch, queued = items(1, 2), items(3)
    d = policy().lost(Failure.HUNG, [batch, queued])
    assert d == Decision(Failure.HUNG, suspects=tuple(batch), retry=tuple(queued))


def test_a_node_memory_kill_blames_no_test_that_had_not_run_alone_before():
    (it,) = items(1)
    assert policy().lost(Failure.NODE_OOM, [[it]]) == Decision(Failure.NODE_OOM, suspects=(it,))
    (again,) = items(1, suspect=True)
    assert policy().lost(Failure.NODE_OOM, [[again]]).blamed is again
    batch = items(1, 2, suspect=True)
    assert policy().lost(Failure.NODE_OOM, [batch]).suspects == tuple(batch)


def test_an_actor_with_nothing_in_flight_leaves_nothing_to_do():
    for failure in (Failure.DIED, Failure.HUNG, Failure.NODE_OOM):
        d = policy().lost(failure, [])
        assert d.blamed is None and d.requeued == 0


def test_a_raising_call_blames_a_test_that_ran_alone_and_re_runs_a_batch_alone():
    (it,) = items(1)
    assert policy().raised([it]) == Decision(Failure.RAISED, blamed=it)
    batch = items(1, 2)
    assert policy().raised(batch) == Decision(Failure.RAISED, suspects=tuple(batch))


def test_the_policy_decides_and_leaves_the_tests_as_they_were():
    batch = items(1, 2)
    policy().lost(Failure.DIED, [batch])
    assert not any(it.suspect for it in batch)  # marking them is the campaign's to do


def test_failures_in_a_row_stop_the_campaign_hangs_aside_and_a_result_resets_them():
    p = policy()
    assert not p.test_failed(hung=False) and not p.test_failed(hung=False)
    assert not p.test_failed(hung=True)  # a slow compiler is not the harness's bug
    p.test_reported()
    assert [p.test_failed(hung=False) for _ in range(3)] == [False, False, True]


def test_node_memory_kills_past_the_limit_stop_the_campaign():
    p = policy()
    assert [p.node_killed() for _ in range(3)] == [False, False, True]
    assert p.node_oom == 3


def test_the_policy_is_plain_python():
    """Importing it imports neither Ray nor torch (the package's public names load lazily)."""
    code = ("import sys, campaign.driver.blame; "
            "print(sorted({'ray', 'torch'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[3])  # the repository root
    assert out.stdout.strip() == "[]"
