"""The campaign's loop: feed generation, send the calls that are due (every actor its
`in_flight_per_worker` calls, or under the core scheduler each free core to the stage it
picks), take results in completion order with `ray.wait`, check for hangs, flush rows and send
the seed pools their feedback, until the budget is spent and the work in flight is done; or
until the deadline of a wall-clock budget, which stops the work in flight; or, while results
cannot be written, hold (`hold_for_disk`)."""
from __future__ import annotations

import time

import ray

from campaign.driver.actor_pool import Pool
from campaign.driver.actors import kill_actor
from campaign.driver.campaign import Campaign
from campaign.driver.errors import DiskFull
from campaign.driver.stages import GEN
from campaign.storage import describe_error

#: how long one `ray.wait` blocks, so hang checks and timed flushes still happen when idle
POLL_S = 0.5
#: backend verdicts go to the generation actors' seed pools at most this often
FEEDBACK_S = 0.5


class Loop:
    """Runs a campaign's testing phase (`run`) until its budget or deadline."""

    def __init__(self, camp: Campaign) -> None:
        self.camp = camp
        self.feedback_sent = 0.0  #: when feedback last went to the seed pools

    def run(self) -> None:
        camp = self.camp
        last_postfix = 0.0
        while True:
            if camp.deadline is not None and time.monotonic() >= camp.deadline:
                camp.settle_starts()
                self.stop_at_deadline()
                return
            if camp.sink.blocked:
                self.hold_for_disk()
                continue  # the deadline may have come meanwhile
            camp.feed()
            self.dispatch()
            if not camp.by_ref:
                if any(p.backlog() for p in camp.pools):
                    self._wait_for_starts()
                    continue
                else:
                    last = self.send_feedback(force=True)  # the rest, before the actors stop
                    if last:
                        ray.wait(last, num_returns=len(last), timeout=2.0)
                    camp.settle_starts()
                    return
            refs = list(camp.by_ref) + camp.starting_refs()
            # wake for a batch coming due only where an actor can take it: a due batch with
            # every actor busy would make this a 1 ms spin (a backend slower than generation)
            wake = min([POLL_S] + [p.due() for p in camp.evals.values()
                                   if p.queue and self._can_send(p)])
            if camp.deadline is not None:
                wake = min(wake, camp.deadline - time.monotonic())
            ready, rest = ray.wait(refs, num_returns=1, timeout=max(wake, 0.001))
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                camp.complete(ref)
            camp.check_hangs()
            camp.sink.maybe_flush()
            self.send_feedback()
            now = time.monotonic()
            bar = camp.recorder.bar
            if bar is not None and now - last_postfix >= 0.5:
                last_postfix = now
                rate = camp.tally.tests_done / max(now - camp.t_start, 1e-9)
                bar.set_postfix({"tests/s": f"{rate:.1f}",
                                 "findings": camp.recorder.findings.total}, refresh=False)

    def hold_for_disk(self) -> None:
        """Results cannot be written (`ResultSink.blocked`): generation pauses (no new test is
        fed) while the tests already fed run to the end and their rows come back into memory,
        and writing is retried until it works again (return) or `campaign.disk_wait_s` passed
        (DiskFull)."""
        camp, sink = self.camp, self.camp.sink
        wait_s = camp.c.disk_wait_s
        while sink.blocked:
            waited = time.monotonic() - (sink.blocked_since or time.monotonic())
            if waited >= wait_s:
                assert sink.error is not None  # set with blocked_since
                raise DiskFull(
                    f"results could not be written to {sink.dir} for "
                    f"campaign.disk_wait_s={wait_s:g} s ({describe_error(sink.error)}); "
                    f"free at least "
                    f"{sink.bytes_needed() / 2**20:.1f} MB there and continue with "
                    "campaign.resume=true")
            if camp.deadline is not None and time.monotonic() >= camp.deadline:
                return  # the loop stops at the deadline; the sink keeps what it could not write
            self.dispatch()  # what was fed before still runs (no feeding): no test left half-done
            refs = list(camp.by_ref)
            if refs:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=POLL_S)
                for ref in ready:
                    camp.complete(ref)
                camp.check_hangs()
            else:
                time.sleep(min(POLL_S, max(wait_s - waited, 0.01)))
            sink.maybe_flush()

    def _wait_for_starts(self) -> bool:
        """Nothing is in flight but work is queued: wait (briefly) for actors still starting,
        or for a batch to come due, or for the deadline (work that would not fit before it
        waits for it); always True (the caller goes round again)."""
        camp = self.camp
        starting = camp.starting_refs()
        if starting:
            ray.wait(starting, num_returns=1, timeout=POLL_S)
            camp.check_hangs()
            return True
        wait = min([POLL_S] + [p.due() for p in camp.evals.values() if p.due() > 0])
        if camp.deadline is not None:
            wait = min(wait, camp.deadline - time.monotonic())
        time.sleep(max(wait, 0.001))
        return True

    def _can_send(self, pool: Pool) -> bool:
        return pool.idle_slot() is not None if self.camp.scheduler is not None else pool.can_send()

    def dispatch(self) -> None:
        """Send the calls that are due. Without a scheduler every actor gets up to
        `in_flight_per_worker` calls; with one, each free core goes to the stage with work
        ready and the smallest virtual time (campaign/scheduler.py), one call per actor."""
        camp = self.camp
        sched = camp.scheduler
        if sched is None:
            for pool in camp.pools:
                pool.submit()
            return
        ready = {p.stage: p for p in camp.pools if p.has_work() and p.idle_slot() is not None
                 and self._fits_before_deadline(p)}
        sched.ready(ready)
        while ready and sched.free() > 0:
            stage = sched.pick(ready)
            if stage is None:
                break
            pool = ready[stage]
            slot = pool.idle_slot()
            assert slot is not None
            call = pool.send_next(slot)
            if call is not None:
                call.expected_s = pool.expected_s(call)
                sched.start(stage, call.expected_s)
            if call is None or not pool.has_work() or pool.idle_slot() is None:
                del ready[stage]
            if stage == GEN:  # room for more tests to be made
                camp.feed()
                if camp.gen.has_work() and camp.gen.idle_slot() is not None:
                    ready[GEN] = camp.gen

    def _fits_before_deadline(self, pool: Pool) -> bool:
        """Whether a call of `pool` is expected to come back before the testing deadline: one
        that would be cut off anyway is not sent, and its core goes to a stage whose work
        fits (a compile of seconds in the last seconds of a budget is wasted)."""
        deadline = self.camp.deadline
        if deadline is None or pool.per_item_s is None:
            return True
        return time.monotonic() + pool.per_item_s * pool.batch() <= deadline

    def stop_at_deadline(self) -> None:
        """The testing phase's time is up: work in flight is stopped, not waited for. Actors
        running a call are killed (their tests get no row and are not counted; a test another
        backend already reported keeps those rows), queued tests are dropped."""
        cut = self.camp.recorder.cut
        for pool in self.camp.pools:
            for slot in pool.slots:
                if not slot.calls:
                    continue
                kill_actor(slot.actor)
                for call in list(slot.calls):
                    pool.pop(call, timed=False)
                    for it in call.items:
                        cut(pool.stage, it.test)
            for q in (pool.queue, pool.retry, pool.suspects):
                for it in q:
                    cut(pool.stage, it.test)
                q.clear()

    def send_feedback(self, force: bool = False) -> list:
        """Backend verdicts to every generation actor's seed pool, fire and forget (a stage
        class without `feedback` gets none); each actor keeps those of its own tests. Sent at
        most every FEEDBACK_S seconds, so that it costs a Ray call per actor per interval, not
        per completed batch."""
        now = time.monotonic()
        if not force and now - self.feedback_sent < FEEDBACK_S:
            return []
        self.feedback_sent = now
        outcomes, cov_outcomes = self.camp.recorder.take_feedback()
        generator_cls, slots = self.camp.stages.generator_cls, self.camp.gen.slots
        refs = []
        if outcomes and hasattr(generator_cls, "feedback"):
            refs = [slot.actor.feedback.remote(outcomes) for slot in slots]
        if cov_outcomes and hasattr(generator_cls, "coverage_feedback"):
            refs += [slot.actor.coverage_feedback.remote(cov_outcomes) for slot in slots]
        return refs
