"""The environment-fault detector (campaign/env_fault.py): one signature on most of a backend's
tests in a short window trips it; several signatures, or scattered failures, do not."""
from __future__ import annotations

from campaign.env_fault import (
    EnvFault,
    EnvFaultConfig,
    EnvFaultDetector,
    read_faults,
    row_signature,
    write_faults,
)

FORK = ("RuntimeError: Unable to handle autograd's threading in combination with fork-based "
        "multiprocessing")
PASS = {"verdict": "pass", "stage": "compare", "error_sig": None}


def crash(sig: str = FORK, stage: str = "compile") -> dict:
    return {"verdict": "crash", "stage": stage, "error_sig": sig, "error_class": "RuntimeError"}


def feed(det: EnvFaultDetector, backend: str, rows: list[dict], t0: float = 0.0,
         step: float = 1.0) -> list[EnvFault]:
    """Rows `step` seconds apart; the faults they tripped."""
    out = []
    for i, row in enumerate(rows):
        fault = det.observe(backend, row, t0 + i * step)
        if fault is not None:
            out.append(fault)
    return out


def test_nine_of_ten_tests_failing_with_one_signature_trip_the_backend():
    det = EnvFaultDetector(EnvFaultConfig())
    (fault,) = feed(det, "inductor", [PASS] + [crash()] * 9)
    assert fault == EnvFault("inductor", f"crash during compile: {FORK}", 9, 10, 9.0)
    assert fault.line() == (
        "environment fault: inductor held back (no more tests): 9 of its 10 tests in 9 s "
        f"failed with crash during compile: {FORK}")
    assert det.faults == {"inductor": fault}
    # tripped once: its later rows change nothing
    assert feed(det, "inductor", [crash()] * 20, t0=10.0) == []
    assert fault.holds("inductor", crash()) and not fault.holds("ort", crash())
    assert not fault.holds("inductor", crash("RuntimeError: other"))


def test_three_distinct_signatures_do_not_trip():
    det = EnvFaultDetector(EnvFaultConfig())
    rows = [crash("RuntimeError: a"), crash("RuntimeError: b"), crash("RuntimeError: c")] * 10
    assert feed(det, "tvm", rows) == []
    assert det.faults == {}


def test_a_fast_backend_with_scattered_failures_does_not_trip():
    det = EnvFaultDetector(EnvFaultConfig())
    # 2000 tests in 20 s (ms each), one in ten failing the same way
    rows = [crash() if i % 10 == 0 else PASS for i in range(2000)]
    assert feed(det, "ort", rows, step=0.01) == []


def test_the_window_forgets_old_rows_and_backends_are_apart():
    det = EnvFaultDetector(EnvFaultConfig(min_tests=10, share=0.8, window_s=5.0))
    # one failure a minute for ten minutes: never ten tests within the window
    assert feed(det, "inductor", [crash()] * 10, step=60.0) == []
    # another backend's passes do not dilute this one's failures
    det2 = EnvFaultDetector(EnvFaultConfig())
    for i in range(10):
        assert det2.observe("ort", PASS, float(i)) is None
        fault = det2.observe("inductor", crash(), float(i))
    assert fault is not None and fault.tests == 10 and det2.faults.keys() == {"inductor"}


def test_min_tests_zero_turns_it_off():
    det = EnvFaultDetector(EnvFaultConfig(min_tests=0))
    assert feed(det, "inductor", [crash()] * 50) == []


def test_which_rows_count():
    assert row_signature(PASS) is None
    assert row_signature({"verdict": "mismatch", "stage": "compare"}) is None
    assert row_signature({"verdict": "invalid", "stage": "reference",
                          "error_class": "IllConditioned", "error_sig": "x"}) is None
    assert row_signature({"verdict": "invalid", "stage": "unknown", "error_class": "SandboxError",
                          "error_sig": None}) == "invalid during unknown: SandboxError"
    assert row_signature({"verdict": "timeout", "stage": "compile",
                          "error_sig": "Timeout @ a.py:1 f"}) == "timeout during compile: Timeout"


def test_config_problems_name_the_key():
    bad = EnvFaultConfig(min_tests=-1, share=0.5, window_s=0)
    assert [m for ok, m in bad.problems() if not ok] == [
        "campaign.env_fault.min_tests: must be >= 0 (0: off), got -1",
        "campaign.env_fault.share: must be in (0.5, 1], got 0.5",
        "campaign.env_fault.window_s: must be > 0, got 0"]
    assert all(ok for ok, _ in EnvFaultConfig().problems())


def test_faults_round_trip_through_the_run_dir(tmp_path):
    fault = EnvFault("inductor", f"crash during compile: {FORK}", 9, 10, 9.0)
    assert write_faults(tmp_path, []) is None and read_faults(tmp_path) == []
    write_faults(tmp_path, [fault])
    assert read_faults(tmp_path) == [fault]
    (tmp_path / "env_faults.json").write_text("{not json")
    assert read_faults(tmp_path) == []
