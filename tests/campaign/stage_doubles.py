"""Stand-in generation and evaluation stages for driver tests with a real Ray cluster
(`campaign.driver.stages.Stages`): plain classes, pickled by value so Ray's workers need not import
the tests. `Gen` makes test `t` of seed `s` as the string `"t|s"`; an evaluator subclass
reports rows built on `base_row`. Not product code."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

import ray.cloudpickle

from campaign.row import ResultRow

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@dataclass
class Cfg:
    backends: list
    #: where `Gen.record` appends what the driver sent back (a JSON line per call)
    out: str = ""


@dataclass
class Report:
    rows: list
    findings: list = field(default_factory=list)
    coverage: list = field(default_factory=list)


@dataclass
class Made:
    """What a generation stage returns for one test (`campaign.pipeline.Generated`'s fields)."""

    test_id: str
    seed: int
    case: object
    base: object
    report: object
    ms: float = 0.1
    #: backend -> the known bug (bucket id) the test matches (`Generated.known`)
    known: dict = field(default_factory=dict)


def base_row(tid: str, seed: int) -> ResultRow:
    """A graphless test's shared columns."""
    return ResultRow.graphless(tid, seed, graph_hash="h", n_insts=1, n_inputs=1, dialect="eager",
                               gen_ms=0.1, host="h", worker="gen")


class Ev:
    """An evaluation stage double: `report(tid, row)` makes each test's report from its
    backend row (verdict `pass` unless the subclass says otherwise)."""

    def __init__(self, cfg: Cfg, backend: str, name: str):
        self.backend = backend

    def evaluate(self, cases):
        out = []
        for case in cases:
            tid, seed = case.split("|")
            row = base_row(tid, int(seed)).for_backend(self.backend, "cpu", verdict="pass")
            out.append(self.report(tid, row))
        return out

    def report(self, tid: str, row: ResultRow) -> Report:
        return Report([row])


class Gen:
    """Makes the tests it is asked for; subclasses add the feedback method a test listens on
    and call `record` from it."""

    def __init__(self, cfg: Cfg, name: str):
        self.cfg = cfg

    def generate(self, items):
        return [Made(t, s, f"{t}|{s}", base_row(t, s), None) for t, s, *_ in items]

    def record(self, outcomes) -> int:
        with open(self.cfg.out, "a") as f:
            f.write(json.dumps(outcomes) + "\n")
        return 0
