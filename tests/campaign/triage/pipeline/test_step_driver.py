"""The triage's step driver: needs checked before anything runs, shares of the clock, a
failing step's dependants held back, and the journal a later triage resumes from."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import pytest

from campaign.triage.config import TriageConfig
from campaign.triage.pipeline.clock import TriageClock
from campaign.triage.pipeline.driver import JOURNAL, Pipeline, read_journal
from campaign.triage.pipeline.state import TriageState
from campaign.triage.pipeline.steps import campaign_steps, folder_steps


class _Step:
    """A step that records when it ran and how much of the clock it was given."""

    name: ClassVar[str] = "base"
    needs: ClassVar[tuple[str, ...]] = ()
    gives: ClassVar[tuple[str, ...]] = ()
    share: ClassVar[float] = 0.0

    def __init__(self, ran: list[tuple[str, float]]):
        self.ran = ran

    def run(self, state, clock):
        self.ran.append((self.name, round(clock.time_left())))


class Make(_Step):
    name = "make"
    needs = ("rows",)
    gives = ("things",)
    share = 0.6


class Use(_Step):
    name = "use"
    needs = ("things",)
    gives = ("used",)
    share = 0.4


class Other(_Step):
    name = "other"
    needs = ("rows",)


class Broken(Make):
    def run(self, state, clock):
        raise RuntimeError("a step's own bug")


class Hurried(_Step):
    """Asks for more time than a hard deadline leaves, twice."""

    name = "hurried"
    share = 1.0

    def run(self, state, clock):
        for _ in range(2):
            assert not clock.fits(1e6)


def _state(tmp_path: Path, log: list[str]) -> TriageState:
    return TriageState.open(tmp_path, TriageConfig(db="off", findings=None), log.append)


def test_a_step_whose_need_no_earlier_step_gives_is_refused_before_anything_runs():
    ran: list[tuple[str, float]] = []
    with pytest.raises(ValueError) as e:
        Pipeline([Use(ran), Make(ran)])
    assert str(e.value) == ("triage step 'use' needs things, which no earlier step gives")
    assert ran == []
    Pipeline([Use(ran)], given={"things"})  # a caller that fills it in


def test_each_step_gets_its_share_of_what_is_left_and_unused_time_goes_on(tmp_path):
    ran: list[tuple[str, float]] = []
    clock = TriageClock.of(100.0)
    Pipeline([Make(ran), Other(ran), Use(ran)]).run(_state(tmp_path, []), clock)
    # make: 0.6 of 100 s; it used none, so use (the only later share) gets all of it
    assert ran == [("make", 60), ("other", 0), ("use", 100)]


def test_a_failing_step_holds_back_what_needs_it_and_the_journal_says_so(tmp_path):
    ran: list[tuple[str, float]] = []
    log: list[str] = []
    journal = tmp_path / "bugs" / JOURNAL
    records = Pipeline([Broken(ran), Use(ran), Other(ran)]).run(
        _state(tmp_path, log), TriageClock.of(10.0), journal)
    assert [(r.name, r.status, r.error) for r in records] == [
        ("make", "failed", "RuntimeError: a step's own bug"),
        ("use", "not run", "needs things"),
        ("other", "done", None)]
    assert [name for name, _ in ran] == ["other"]
    assert log[0].startswith("triage: step make failed: RuntimeError: a step's own bug\n")
    saved = read_journal(journal)
    assert saved["pipeline"] == ["make", "use", "other"]
    assert [s["status"] for s in saved["steps"]] == ["failed", "not run", "done"]

    log.clear()  # the next triage of this output says what is left, then does it
    Pipeline([Make(ran), Use(ran), Other(ran)]).run(_state(tmp_path, log), TriageClock.of(10.0),
                                                     journal)
    assert log == ["triage: resuming: the last triage of this output left work in make, use"]
    assert [s["status"] for s in read_journal(journal)["steps"]] == ["done"] * 3


def test_work_that_does_not_fit_a_hard_deadline_is_counted_as_skipped(tmp_path):
    clock = TriageClock.of(0.0, deadline=time.monotonic() + 5.0)
    records = Pipeline([Hurried([])]).run(_state(tmp_path, []), clock)
    assert (records[0].status, records[0].skipped, clock.skipped) == ("partial", 2, 2)


def test_the_shipped_pipelines_have_what_each_step_needs():
    campaign = Pipeline(campaign_steps())
    assert campaign.names == ["recognize", "reduce", "bucket", "confirm", "name", "write",
                              "ablate", "check", "localize", "group", "table", "record"]
    assert Pipeline(folder_steps(), given={"buckets", "best"}).names[0] == "name"
    with pytest.raises(ValueError, match="^triage step 'name' needs buckets, best, "):
        Pipeline(folder_steps())


def test_the_journal_is_json_a_reader_can_use(tmp_path):
    journal = tmp_path / JOURNAL
    Pipeline([Other([])]).run(_state(tmp_path, []), TriageClock.of(1.0), journal)
    assert json.loads(journal.read_text())["steps"][0]["name"] == "other"
    assert read_journal(tmp_path / "missing.json") == {}
