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
            for r, t in zip(inst.results, res):
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
