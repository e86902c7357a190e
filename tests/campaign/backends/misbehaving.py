"""Test doubles: backends written to misbehave, loaded by dotted path (`misbehaving:Name`, this
directory being on sys.path under pytest), which also exercises dotted-path loading.

Each fails in one chosen stage in one chosen way; `WrongAnswer` returns the reference's result
except that one op's results are perturbed. None of them is product code.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time

import numpy as np
import torch

from campaign.artifacts import Materialized
from campaign.backends import Backend, BackendResult, KnownUnsupported
from campaign.verdict import Stage

_STAGES = {"import": Stage.IMPORT, "compile": Stage.COMPILE, "run": Stage.RUN}


def reference_outputs(m: Materialized, perturb_op: str | None = None) -> list[np.ndarray]:
    """The graph evaluated like the reference; results of `perturb_op` get +1."""
    env = {k: torch.from_numpy(np.asarray(v)) for k, v in m.tc.values.items()}
    g = m.tc.graph
    with torch.no_grad():
        for inst in g.insts:
            res = inst.op.torch(*(env[a] for a in inst.args))
            res = (res,) if len(inst.results) == 1 else res
            for r, t in zip(inst.results, res, strict=True):
                env[r.name] = t + 1 if inst.op.name == perturb_op else t
    return [env[o].numpy() for o in g.outputs]


class Misbehaving(Backend):
    """Runs `self.act()` in stage `stage`; the other stages do nothing; outputs = reference."""

    def __init__(self, stage: str = "compile"):
        self.name = type(self).__name__
        self.at = _STAGES[stage]

    def act(self) -> None:
        raise NotImplementedError

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        for st in (Stage.IMPORT, Stage.COMPILE, Stage.RUN):
            self.stage(st, self.act if st is self.at else (lambda: None), result,
                       "run_ms" if st is Stage.RUN else "compile_ms")
        return reference_outputs(m)


class Segfault(Misbehaving):
    def act(self) -> None:
        ctypes.string_at(0)  # reads address 0: SIGSEGV


class SegfaultKill(Misbehaving):
    def act(self) -> None:
        os.kill(os.getpid(), signal.SIGSEGV)


class Abort(Misbehaving):
    def act(self) -> None:
        os.abort()


class OomKill(Misbehaving):
    """What the kernel's OOM killer does: SIGKILL."""

    def act(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class Exit(Misbehaving):
    def act(self) -> None:
        os._exit(3)


class Raise(Misbehaving):
    def act(self) -> None:
        raise RuntimeError("backend failed at 0x7ffe1234 on tensor of shape [3, 4]")


class Hang(Misbehaving):
    def __init__(self, stage: str = "compile", seconds: float = 3600.0, child: bool = False):
        super().__init__(stage)
        self.seconds = seconds
        self.child = child  #: hang in a subprocess (like a compiler's C++ build) too

    def act(self) -> None:
        if self.child:
            proc = subprocess.Popen(["sleep", str(self.seconds)])
            pid_dir = os.environ.get("MISBEHAVING_PIDS", "/tmp")
            with open(os.path.join(pid_dir, "grandchild"), "w") as f:
                f.write(str(proc.pid))
            proc.wait()
        time.sleep(self.seconds)


class MemoryHog(Misbehaving):
    """Allocates (and touches) 64 MiB chunks up to `max_mb`: a sandbox memory limit below that
    turns it into MemoryError; without one it stops at `max_mb` (bounded, never the machine)."""

    def __init__(self, stage: str = "run", max_mb: int = 3072):
        super().__init__(stage)
        self.max_mb = max_mb

    def act(self) -> None:
        chunks = []
        for _ in range(self.max_mb // 64):
            chunks.append(np.ones(64 * 2**20 // 8))
        del chunks


def _note_pid(name: str, pid: int) -> None:
    """Where a test finds the processes a backend started (`MISBEHAVING_PIDS`, a dir)."""
    pid_dir = os.environ.get("MISBEHAVING_PIDS", "/tmp")
    with open(os.path.join(pid_dir, f"{name}-{os.getpid()}-{pid}"), "w") as f:
        f.write(str(pid))


class Orphan(Misbehaving):
    """Leaves a `sleep` running in a new session: directly (`how=child`), after a double fork
    whose middle process exits (`how=daemon`: the sleep is an orphan), or and then dies of a
    segfault (`then=segv`: the sandbox process is gone before anyone looks), or hangs
    (`then=hang`)."""

    def __init__(self, stage: str = "compile", how: str = "daemon", then: str = "return"):
        super().__init__(stage)
        self.how, self.then = how, then

    def act(self) -> None:
        if self.how == "child":
            proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
            _note_pid("orphan", proc.pid)
        else:
            pid_dir = os.environ.get("MISBEHAVING_PIDS", "/tmp")
            subprocess.run(["sh", "-c", f"setsid sleep 600 & echo $! > {pid_dir}/orphan-sh-$$"],
                           check=True)
        if self.then == "segv":
            ctypes.string_at(0)
        elif self.then == "hang":
            time.sleep(3600)


class ClosedFds(Misbehaving):
    """Closes fds 1 and 2 of its own process (a library closing the host's stdout/stderr)."""

    def __init__(self, stage: str = "run"):
        super().__init__(stage)

    def act(self) -> None:
        os.close(1)
        os.close(2)


class ChangedCwd(Misbehaving):
    """Changes the working directory to a fresh directory and (`delete=true`) deletes it."""

    def __init__(self, stage: str = "compile", delete: bool = True):
        super().__init__(stage)
        self.delete = delete

    def act(self) -> None:
        import tempfile

        d = tempfile.mkdtemp(prefix="misbehaving-cwd-")
        os.chdir(d)
        if self.delete:
            os.rmdir(d)


class Meddler(Misbehaving):
    """Replaces the process's global state one way (`what`): `signals` (SIGTERM ignored,
    SIGSEGV to a Python handler), `stdout` (sys.stdout to a StringIO), `env` (sets and removes
    variables), `thread` (leaves a thread running)."""

    def __init__(self, stage: str = "compile", what: str = "signals"):
        super().__init__(stage)
        self.what = what

    def act(self) -> None:
        import io
        import sys
        import threading

        if self.what == "signals":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGSEGV, lambda *a: None)
        elif self.what == "stdout":
            sys.stdout = io.StringIO()
        elif self.what == "env":
            os.environ["MEDDLER_WAS_HERE"] = "1"
            os.environ.pop("HOME", None)
        elif self.what == "thread":
            threading.Thread(target=time.sleep, args=(3600,), name="meddler", daemon=True).start()


class IgnoreTermHang(Misbehaving):
    """Ignores SIGTERM (and SIGINT), then hangs: only SIGKILL ends it."""

    def act(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(3600)


class Flood(Misbehaving):
    """Writes `mb` MB to stdout and as much to stderr (at the fd level and through Python)."""

    def __init__(self, stage: str = "compile", mb: int = 20):
        super().__init__(stage)
        self.mb = mb

    def act(self) -> None:
        import sys

        chunk = b"x" * (1 << 20)
        for _ in range(self.mb):
            os.write(1, chunk)
            sys.stderr.write("y" * (1 << 20))
        sys.stderr.flush()


class PoisonHarness(Misbehaving):
    """Damages its process in a way no check looks at: it breaks `pickle.loads` for everyone
    after it, so the *next* test fails in our code (reading its job) in this process."""

    def act(self) -> None:
        import pickle

        def broken(*args, **kwargs):
            raise OSError(9, "Bad file descriptor")

        pickle.loads = broken


class WrongAnswer(Backend):
    """The reference's answer, except that results of op `op` are off by one."""

    def __init__(self, op: str = "add"):
        self.name = "WrongAnswer"
        self.op = op

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        return self.stage(Stage.RUN, lambda: reference_outputs(m, self.op), result, "run_ms")


class KnownGap(Misbehaving):
    """Fails with a message its UNSUPPORTED table lists."""

    UNSUPPORTED = (KnownUnsupported("no such feature here", Stage.IMPORT, r"NotImplementedError",
                                    r"feature X"),)

    def __init__(self):
        super().__init__("import")

    def act(self) -> None:
        raise NotImplementedError("feature X is not implemented")


class NeedsGpu(Misbehaving):
    target = "cuda"

    def __init__(self):
        super().__init__("run")

    def unavailable(self) -> str | None:
        return "NeedsGpu needs a CUDA GPU, and none is visible here"

    def act(self) -> None:
        raise AssertionError("never evaluated without a GPU")


def make_segfault_at_run() -> Backend:
    """A factory function (not a class) for dotted-path loading."""
    return Segfault(stage="run")
