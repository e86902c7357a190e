"""A backend whose rows show an environment fault is held back by the campaign
(campaign.driver.campaign.Campaign.watch/hold_back), without Ray: the campaign's state is built
(its actors are never started) and its result handlers are called as the loop would."""
from __future__ import annotations

import json
from pathlib import Path

from campaign.budget_plan import BudgetPlan
from campaign.config import BackendOptions, Budget, CampaignConfig, Config
from campaign.driver.campaign import Campaign
from campaign.driver.stages import Stages
from campaign.driver.summary import summarize
from campaign.driver.work import Item, PipelineTest
from campaign.env_fault import read_faults
from campaign.row import ResultRow

FORK = ("RuntimeError: Unable to handle autograd's threading in combination with fork-based "
        "multiprocessing")


class Report:
    def __init__(self, rows: list[dict]):
        self.rows, self.findings, self.coverage = rows, [], []


class Made:
    """What generation returns for a valid test."""

    def __init__(self, tid: str):
        self.case, self.report, self.known = b"case", None, {}
        self.base = ResultRow.graphless(tid, 0, ops=[])


def row(tid: str, backend: str, verdict: str = "pass", sig: str | None = None) -> ResultRow:
    base = ResultRow.graphless(tid, 0, graph_hash="h", n_insts=1, n_inputs=1, dialect="eager",
                               gen_ms=0.1, host="h", worker="gen")
    return base.for_backend(backend, "cpu", verdict=verdict,
                            stage="compile" if sig else "compare", error_sig=sig,
                            error_class="RuntimeError" if sig else None)


def campaign(tmp_path: Path, resume: bool = False) -> Campaign:
    # `wait`: a full queue does not skip a backend (the tests here are never dispatched)
    cfg = Config(campaign=CampaignConfig(
        name="t", budget="1000", workers=1, backends=["ort", "inductor"], resume=resume,
        backend_options={b: BackendOptions(wait=True) for b in ("ort", "inductor")}))
    needs = {"generate": (1, {"CPU": 1.0}), "ort": (1, {"CPU": 1.0}),
             "inductor": (1, {"CPU": 1.0})}
    return Campaign(cfg, BudgetPlan.of(Budget(tests=1000), "0", False), tmp_path, Stages(object, object, None), needs,
                    {"ort": "cpu", "inductor": "cpu"})


def made_test(camp: Campaign) -> PipelineTest:
    """A test for both backends, generated: it is queued on every backend that takes it."""
    i = camp.next_index
    camp.next_index += 1
    test = PipelineTest(i, f"t{i}", i, ["ort", "inductor"])
    camp.on_generated(Item(test), Made(test.test_id))
    return test


def evaluate(camp: Campaign, test, backend: str, verdict: str = "pass",
             sig: str | None = None) -> None:
    pool = camp.evals[backend]
    pool.queue.remove(next(it for it in pool.queue if it.test is test))
    camp.on_evaluated(pool, Item(test), Report([row(test.test_id, backend, verdict, sig)]))


def test_a_backend_failing_one_way_is_held_back_and_the_others_go_on(tmp_path, caplog):
    camp = campaign(tmp_path)
    tests = [made_test(camp) for _ in range(12)]
    assert all(t.pending == {"ort", "inductor"} for t in tests)
    for t in tests[:10]:  # inductor's 10 tests: the first passes, 9 fail at compile alike
        evaluate(camp, t, "ort")
        evaluate(camp, t, "inductor", *(("pass",) if t is tests[0] else ("crash", FORK)))
    line = ("environment fault: inductor held back (no more tests): 9 of its 10 tests in 0 s "
            f"failed with crash during compile: {FORK}")
    assert [r.getMessage() for r in caplog.records] == [line]
    # its queued tests were dropped (no row), the other backend still has them
    assert not camp.evals["inductor"].queue and len(camp.evals["ort"].queue) == 2
    assert all(t.pending == {"ort"} for t in tests[10:])
    # it gets no more tests; ort does
    later = made_test(camp)
    assert later.pending == {"ort"}
    assert camp.router.held_env == {"inductor": 3}
    # a test fed now is not made for it at all, and counted so
    camp.feed()
    fed = [it.test for it in camp.gen.queue]
    assert fed and all(t.backends == ["ort"] for t in fed)
    assert camp.router.held_env == {"inductor": 3 + len(fed)}
    camp.gen.queue.clear()
    assert read_faults(tmp_path)[0].line() == line
    assert json.loads((tmp_path / "env_faults.json").read_text())[0]["count"] == 9

    summary = summarize(camp, False, lambda: [])
    assert summary.env_faults == {"inductor": line}
    assert summary.backends["inductor"]["held_env"] == 3 + len(fed)
    text = summary.text()
    assert line in text.splitlines()
    assert f"held back: environment fault (no row): inductor {3 + len(fed)}" in text
    assert "every backend was held back" not in text
    camp.sink.close()


def test_every_backend_held_back_stops_feeding(tmp_path):
    camp = campaign(tmp_path)
    for backend in ("ort", "inductor"):
        for i in range(10):
            camp.watch([row(f"x{i}", backend, "crash", FORK)])
    assert camp.router.env_held == {"ort", "inductor"}
    camp.feed()
    assert not camp.gen.queue  # nothing more is made: the loop ends when the work in flight does
    assert camp.router.held_env == {}  # none fed: _room finds no backend to make tests for
    assert "every backend was held back for an environment fault: testing stopped early" in (
        summarize(camp, False, lambda: []).text())
    camp.sink.close()


def test_a_resumed_run_keeps_the_earlier_runs_faults(tmp_path):
    first = campaign(tmp_path)
    for i in range(10):
        first.watch([row(f"x{i}", "inductor", "crash", FORK)])
    first.sink.close()
    again = campaign(tmp_path, resume=True)
    for i in range(10):
        again.watch([row(f"y{i}", "ort", "signal", "SIGSEGV")])
    again.sink.close()
    assert [(f.backend, f.signature) for f in read_faults(tmp_path)] == [
        ("inductor", f"crash during compile: {FORK}"), ("ort", "signal during compile: SIGSEGV")]
