"""The signals that stop a running campaign as a finished budget would: flushed rows, the
summary, summary.json, then exit 128 + the signal's number.

- SIGINT (Ctrl-C, to the terminal's foreground job): Python's KeyboardInterrupt, exit 130.
- SIGTERM to the driver (`kill PID`): `Terminated`, a KeyboardInterrupt, so the one handler for
  Ctrl-C serves both (`Received` tells them apart); exit 143. Outside `sigterm_stops_campaign`
  SIGTERM keeps its default (the process ends at once; flushed rows are kept and
  `campaign.resume=true` goes on). SIGTERM to the local Ray cluster's processes too ends the
  cluster under the driver, which flushes its rows and then cannot stop cleanly; Ctrl-C spares
  them (Ray blocks SIGINT there).

A process started with SIGINT ignored (`cmd &` in a script, or any shell without job control)
keeps ignoring it, as the shell asked; `warn_if_ctrl_c_ignored` says so and names SIGTERM."""
from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while the campaign ran."""


@dataclass
class Received:
    """The stop signal that arrived inside `sigterm_stops_campaign`: the KeyboardInterrupt that
    reaches the driver may not be the one raised (Ray's waits raise their own on a signal)."""
    name: str | None = None

    def stop_signal(self) -> str:
        """The signal behind a KeyboardInterrupt caught inside: SIGTERM if it came, else SIGINT."""
        return self.name or "SIGINT"


@contextmanager
def sigterm_stops_campaign() -> Iterator[Received]:
    """While inside, SIGTERM raises `Terminated` in the main thread and is recorded in the
    `Received` yielded; the handler before is put back after. It replaces Ray's (`ray.init`
    sets one that calls `sys.exit`, which would skip the summary). SIGTERM ignored (SIG_IGN,
    inherited from the parent) stays ignored."""
    received = Received()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_sigterm(signum: int, frame: object) -> None:
        received.name = "SIGTERM"
        raise Terminated()

    previous = signal.getsignal(signal.SIGTERM)
    ours = previous != signal.SIG_IGN
    if ours:
        signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield received
    finally:
        if ours:
            signal.signal(signal.SIGTERM, previous)


def exit_status(name: str) -> int:
    """A process's exit status after stopping on signal `name` (the shell's 128 + number)."""
    return 128 + int(signal.Signals[name])


def warn_if_ctrl_c_ignored(log: logging.Logger) -> bool:
    """Log a warning (and return True) when SIGINT is ignored in this process."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        return False
    log.warning("Ctrl-C (SIGINT) is ignored in this process, as its parent started it (in the "
                "background, by a script); stop the campaign with SIGTERM (kill PID)")
    return True
