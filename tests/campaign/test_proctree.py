"""Killing a sandbox process's tree (`campaign.proctree`): every process it started is killed and
counted once, though a killed process still looks alive until it is reaped."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from campaign import proctree

#: a root that starts a marked `sleep` and never reaps it (as a stopped sandbox process)
ROOT = """
import os, subprocess, sys, time
p = subprocess.Popen(["sleep", "60"], env={**os.environ, "DYNSMITH_SANDBOX": sys.argv[1]})
print(p.pid, flush=True)
time.sleep(60)
"""


def test_a_process_killed_twice_before_it_is_reaped_is_counted_once(monkeypatch):
    mark = f"test-proctree:{os.getpid()}:1"
    root = subprocess.Popen([sys.executable, "-c", ROOT, mark], stdout=subprocess.PIPE, text=True)
    try:
        child = int(root.stdout.readline())
        assert proctree.marked(mark) == [child]
        # under load a SIGKILLed process takes a while to die: it is found again, by the mark
        # and by a second call (a death kills the group before reaping and while reaping)
        real_alive = proctree.alive
        monkeypatch.setattr(proctree, "alive", lambda pid: pid == child or real_alive(pid))
        first = proctree.kill_tree(root.pid, mark)
        second = proctree.kill_tree(root.pid, mark)
        assert first == second == {child}
        assert len(first | second) == 1
        monkeypatch.undo()
        for _ in range(200):
            if not proctree.alive(child):
                break
            time.sleep(0.01)
        assert not proctree.alive(child)
    finally:
        root.send_signal(signal.SIGKILL)
        root.wait()
