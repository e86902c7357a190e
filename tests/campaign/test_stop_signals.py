"""The signals that stop a campaign: SIGTERM raises `Terminated` only inside the context (the
handler before comes back; an ignored SIGTERM stays ignored), and the exit status is the
shell's 128 + number."""
from __future__ import annotations

import logging
import os
import signal
import time

import pytest

from campaign.stop_signals import Terminated, exit_status, sigterm_stops_campaign, warn_if_ctrl_c_ignored


def _wait_for_signal() -> None:
    for _ in range(100):  # the handler runs between bytecodes of the main thread
        time.sleep(0.01)


def test_sigterm_inside_raises_terminated_a_keyboard_interrupt_and_the_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)  # SIG_DFL, or Ray's after a ray.init in this process
    with pytest.raises(Terminated) as caught:
        with sigterm_stops_campaign() as received:
            assert received.stop_signal() == "SIGINT"  # what a KeyboardInterrupt here means
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for_signal()
    assert isinstance(caught.value, KeyboardInterrupt) and received.stop_signal() == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_handler_set_before_is_put_back_after_and_an_ignored_sigterm_stays_ignored():
    seen: list[int] = []

    def before(signum: int, frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, before)
    try:
        with pytest.raises(Terminated):
            with sigterm_stops_campaign():
                os.kill(os.getpid(), signal.SIGTERM)
                _wait_for_signal()
        assert signal.getsignal(signal.SIGTERM) is before and seen == []
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with sigterm_stops_campaign():
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for_signal()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_exit_status_is_128_plus_the_signal_number():
    assert exit_status("SIGINT") == 130 and exit_status("SIGTERM") == 143


def test_an_ignored_ctrl_c_is_reported(caplog):
    log = logging.getLogger("test_stop_signals")
    assert not warn_if_ctrl_c_ignored(log)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with caplog.at_level(logging.WARNING):
            assert warn_if_ctrl_c_ignored(log)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert caplog.messages == ["Ctrl-C (SIGINT) is ignored in this process, as its parent started "
                               "it (in the background, by a script); stop the campaign with SIGTERM "
                               "(kill PID)"]
