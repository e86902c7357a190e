"""The backend interface: evaluate one materialized test case, report outputs or where it failed."""
from __future__ import annotations

import abc
import time
import traceback
from dataclasses import dataclass
from typing import Callable

import numpy as np

from campaign.artifacts import Materialized
from campaign.verdict import Stage


@dataclass
class BackendResult:
    outputs: list[np.ndarray] | None = None
    stage: Stage | None = None  #: the stage that failed, None on success
    error_class: str | None = None
    error_msg: str | None = None
    traceback: str | None = None
    compile_ms: float | None = None
    run_ms: float | None = None

    @property
    def failed(self) -> bool:
        return self.stage is not None


class StageFailed(Exception):
    """Raised inside `Backend.evaluate` to attribute an exception to a stage."""

    def __init__(self, stage: Stage, error: BaseException):
        super().__init__(str(error))
        self.stage = stage
        self.error = error


class Backend(abc.ABC):
    """A compiler under test. `evaluate` never raises for the backend's own failures: it returns
    a BackendResult naming the stage, the exception type and message."""

    name: str
    target: str = "cpu"

    def evaluate(self, m: Materialized) -> BackendResult:
        result = BackendResult()
        try:
            result.outputs = self._evaluate(m, result)
        except StageFailed as f:
            result.stage = f.stage
            result.error_class = type(f.error).__name__
            result.error_msg = str(f.error)
            result.traceback = "".join(traceback.format_exception(f.error))
        return result

    @abc.abstractmethod
    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        """Compile and run; wrap each stage with `stage()` so failures are attributed."""

    @staticmethod
    def stage(stage: Stage, fn: Callable, result: BackendResult | None = None, timing: str | None = None):
        t0 = time.perf_counter()
        try:
            return fn()
        except Exception as e:  # the backend's failure is a finding, not our crash
            raise StageFailed(stage, e) from e
        finally:
            if result is not None and timing:
                setattr(result, timing, (time.perf_counter() - t0) * 1e3)


BACKENDS: dict[str, Callable[[], Backend]] = {}


def register(name: str):
    def deco(factory):
        BACKENDS[name] = factory
        return factory

    return deco


def make_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]()
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise ValueError(f"unknown backend {name!r} (known: {known})") from None
