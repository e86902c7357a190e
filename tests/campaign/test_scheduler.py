"""The core scheduler (campaign/scheduler.py) on a simulated clock: stages with known costs per
call share the cores as their shares say, never more calls run than there are cores, and an
idle stage banks no credit."""
from __future__ import annotations

import heapq

import pytest

from campaign.scheduler import CoreScheduler


def simulate(sched: CoreScheduler, cost: dict[str, float], until: float,
             ready_at: dict[str, float] | None = None) -> tuple[dict[str, float], int]:
    """Run `sched` on a discrete-event clock: every stage always has work (from `ready_at`
    on), each call of stage s takes cost[s] seconds. Returns core-seconds per stage in
    [0, until) and the most calls seen running at once."""
    ready_at = ready_at or {}
    now = 0.0
    running: list[tuple[float, int, str]] = []  # (end, seq, stage)
    seq = 0
    used = {s: 0.0 for s in cost}
    most = 0
    while now < until:
        ready = [s for s in cost if ready_at.get(s, 0.0) <= now]
        sched.ready(ready)
        while True:
            s = sched.pick(ready)
            if s is None:
                break
            sched.start(s, cost[s])
            heapq.heappush(running, (now + cost[s], seq, s))
            seq += 1
        most = max(most, len(running))
        nxt = min([running[0][0]] if running else [until]
                  + [t for t in ready_at.values() if t > now])
        if running and running[0][0] <= nxt:
            end, _, s = heapq.heappop(running)
            used[s] += min(end, until) - max(end - cost[s], 0.0)
            sched.finish(s, cost[s], cost[s])
            now = end
        else:
            now = nxt
    return used, most


def test_core_seconds_follow_the_shares_whatever_the_cost_per_call():
    shares = {"generate": 0.2, "ort": 0.1, "tvm": 0.3, "inductor": 0.4}
    cost = {"generate": 0.05, "ort": 0.01, "tvm": 0.5, "inductor": 4.0}
    sched = CoreScheduler(2, shares)
    used, most = simulate(sched, cost, until=2000.0)
    total = sum(used.values())
    assert total == pytest.approx(2 * 2000.0, rel=0.01)  # work-conserving: both cores busy
    for s, share in shares.items():
        assert used[s] / total == pytest.approx(share, abs=0.01), s
    assert most == 2


def test_an_idle_stage_banks_no_credit():
    """A stage that joins late gets its share from then on, not the cores it missed."""
    shares = {"a": 1.0, "b": 1.0}
    sched = CoreScheduler(1, shares)
    used, _ = simulate(sched, {"a": 0.1, "b": 0.1}, until=200.0, ready_at={"b": 100.0})
    # a alone for 100 s, then half each: b gets ~50 s, not the 100 s a long-idle debt would
    assert used["b"] == pytest.approx(50.0, abs=1.0)
    assert used["a"] == pytest.approx(150.0, abs=1.0)


def test_an_idle_stages_share_goes_to_the_others():
    sched = CoreScheduler(2, {"a": 0.5, "b": 0.25, "c": 0.25})
    used, _ = simulate(sched, {"a": 0.2, "b": 0.3}, until=500.0)  # c never has work
    assert sum(used.values()) == pytest.approx(1000.0, rel=0.01)
    assert used["a"] / used["b"] == pytest.approx(2.0, rel=0.05)


def test_no_more_calls_than_cores_and_no_limit_at_zero():
    sched = CoreScheduler(2, {"a": 1.0, "b": 1.0})
    sched.ready(["a", "b"])
    sched.start(sched.pick(["a", "b"]), 1.0)
    sched.start(sched.pick(["a", "b"]), 1.0)
    assert sched.running == 2 and sched.pick(["a", "b"]) is None
    sched.finish("a", 1.0, 0.5)
    assert sched.pick(["a", "b"]) is not None
    assert sched.stages["a"].core_s == 0.5

    unlimited = CoreScheduler(0, {"a": 1.0})
    for _ in range(50):
        unlimited.start(unlimited.pick(["a"]), 1.0)
    assert unlimited.running == 50


def test_the_charge_at_start_keeps_one_stage_from_taking_both_cores():
    sched = CoreScheduler(2, {"slow": 1.0, "fast": 1.0})
    sched.ready(["slow", "fast"])
    first = sched.pick(["slow", "fast"])
    sched.start(first, 5.0)
    assert sched.pick(["slow", "fast"]) != first


def test_report_and_a_bad_share():
    sched = CoreScheduler(2, {"generate": 1.0, "ort": 3.0})
    sched.start("ort", 1.0)
    sched.finish("ort", 1.0, 2.0)
    assert sched.report() == {
        "generate": {"share": 0.25, "core_s": 0.0, "core_frac": 0.0, "calls": 0},
        "ort": {"share": 0.75, "core_s": 2.0, "core_frac": 1.0, "calls": 1}}
    with pytest.raises(ValueError, match=r"^share of 'ort' must be > 0, got 0$"):
        CoreScheduler(2, {"ort": 0})


def test_a_slow_stage_holds_no_more_than_its_share_of_the_cores_while_others_wait():
    """Two 30 s compiles would hold both cores for 30 s: a stage with 45% of 2 cores holds one
    while another stage has work, both when it alone has."""
    sched = CoreScheduler(2, {"inductor": 0.45, "generate": 0.2, "ort": 0.35})
    sched.ready(["inductor", "generate"])  # ort idle: inductor's share is still 45%
    assert sched.fair_cores("inductor") == 1 and sched.fair_cores("generate") == 1
    sched.start("inductor", 30.0)
    sched.finish("inductor", 30.0, 30.0)  # its calls take 30 s: slow
    sched.start("inductor", 30.0)
    sched.stages["generate"].vtime = 1e4  # far behind in virtual time: inductor would win
    assert sched.pick(["inductor", "generate"]) == "generate"
    assert sched.pick(["inductor"]) == "inductor"  # alone with work: both cores
    sched.stages["generate"].call_s = 0.05  # a fast stage is not held to its share of cores
    sched.start("generate", 0.05)
    sched.stages["inductor"].vtime = 1e6
    assert sched.pick(["inductor", "generate"]) is None  # both cores held
