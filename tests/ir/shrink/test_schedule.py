"""The reducer's adaptive schedule (`ir.shrink.schedule`): passes reordered by success, a random
order on a stall (deterministic given the seed), rounds to the fixed point."""
from __future__ import annotations

from ir.shrink.schedule import Outcome, Schedule

NOTHING = Outcome(progress=False, fewer_insts=False, suspended=False)
SHRANK = Outcome(progress=True, fewer_insts=False, suspended=False)
REMOVED = Outcome(progress=True, fewer_insts=True, suspended=False)
SUSPENDED = Outcome(progress=False, fewer_insts=False, suspended=True)


def _scripted(n: int, rounds: list[dict[str, Outcome]]):
    """A `run_pass` for `n` passes answering round by round from `rounds` (others: nothing),
    and the names it was called with, per round."""
    calls: list[list[str]] = []

    def run_pass(name: str, max_failures: int) -> Outcome:
        if not calls or len(calls[-1]) == n:
            calls.append([])
        calls[-1].append(name)
        return rounds[len(calls) - 1].get(name, NOTHING)

    return calls, run_pass


def test_passes_are_reordered_by_success_and_stop_at_the_fixed_point():
    calls, run_pass = _scripted(3, [{"c": REMOVED, "b": SHRANK}, {}])
    sched = Schedule(["a", "b", "c"])
    sched.run(run_pass)
    assert calls == [["a", "b", "c"], ["c", "b", "a"]]
    assert sched.rounds == 2 and sched.stalls == 0


def test_a_stall_shuffles_the_order_the_same_way_for_the_same_seed():
    names = [f"p{k}" for k in range(8)]
    orders = []
    for _ in range(2):
        calls, run_pass = _scripted(8, [{"p3": SUSPENDED}, {}])
        sched = Schedule(names, seed=5)
        sched.run(run_pass)
        assert sched.stalls == 1 and len(calls) == 2
        orders.append(calls[1])
    assert orders[0] == orders[1] and sorted(orders[0]) == names and orders[0] != names


def test_a_suspended_pass_keeps_the_rounds_going():
    calls, run_pass = _scripted(2, [{"a": SUSPENDED}, {"a": SUSPENDED}, {}])
    Schedule(["a", "b"]).run(run_pass)
    assert len(calls) == 3
