"""Process trees of sandbox processes: finding and killing every process a compiler started,
including those that left our process group or session (`setsid`, double forks).

Owns two mechanisms (Linux, `/proc`):

- **the subreaper**: a sandbox process calls `become_subreaper()` (prctl
  PR_SET_CHILD_SUBREAPER), so an orphaned descendant is re-parented to it instead of to init,
  and stays in its tree (`descendants`) whatever session or process group it moved to;
- **the mark**: a sandbox process puts `MARK=<run>:<owner pid>:<its pid>` in its environment,
  which every descendant inherits. What escapes the tree (the sandbox process itself died, so
  its orphans went to init) is still found by its mark: `marked()`, `sweep()`.

`kill_tree` stops the root (so it forks nothing more, and keeps the orphans it adopts), kills
every living descendant until none is left, then the processes carrying the root's mark, and
returns how many it killed; the caller then kills and reaps the root. A descendant that clears
its environment *and* outlives its subreaper is the one case neither mechanism finds.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time

#: the environment variable marking every process a sandbox process started
MARK = "DYNSMITH_SANDBOX"
#: the driver sets this in its actors' environment: marks then name the campaign's run
RUN_ENV = "DYNSMITH_RUN"
_PR_SET_CHILD_SUBREAPER = 36
#: how a sandbox process may start (`campaign.sandbox`'s process model): `forkserver`, forked
#: by a fresh process that never ran autograd, the default; `fork`, by its caller
START_METHODS = ("forkserver", "fork")


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def mark_value(owner: int, pid: int | None = None) -> str:
    """The mark of a sandbox process `pid` (default: this one) owned by process `owner`."""
    return f"{os.environ.get(RUN_ENV, '-')}:{owner}:{pid if pid is not None else os.getpid()}"


def children(pid: int) -> list[int]:
    """Direct children of `pid` (every thread's list), [] when it is gone."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        data = _proc(pid, f"task/{tid}/children")
        out += [int(x) for x in data.split()] if data else []
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, parents before children."""
    out, todo = [], children(pid)
    while todo:
        p = todo.pop(0)
        if p in out:
            continue
        out.append(p)
        todo += children(p)
    return out


def _proc(pid: int, name: str) -> bytes | None:
    """The bytes of /proc/<pid>/<name>, None when the process (or the file) is gone."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return None


def state(pid: int) -> str | None:
    """The process's state letter (`R`, `S`, `Z`, ...), None when it does not exist."""
    data = _proc(pid, "stat")
    if data is None:
        return None
    tail = data.rpartition(b")")[2].split()
    return tail[0].decode() if tail else None


def alive(pid: int) -> bool:
    """Exists and is not a zombie (a killed process is a zombie until its parent reaps it)."""
    return state(pid) not in (None, "Z", "X")


def marked(prefix: str) -> list[int]:
    """Living processes (other than this one) whose mark starts with `prefix`."""
    want = f"{MARK}={prefix}".encode()
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        env = _proc(int(name), "environ")
        if env is None:  # gone, or not ours
            continue
        if any(v.startswith(want) for v in env.split(b"\0")) and alive(int(name)):
            out.append(int(name))
    return out


def _kill(pid: int, sig: int = signal.SIGKILL) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_descendants(root: int, rounds: int = 200) -> set[int]:
    """SIGKILL every living descendant of `root` (a subreaper: orphans of the killed come back
    to it) until none is left; returns the pids killed."""
    killed: set[int] = set()
    for _ in range(rounds):
        victims = [p for p in descendants(root) if alive(p)]
        if not victims:
            break
        for p in victims:
            if _kill(p):
                killed.add(p)
        time.sleep(0.002)
    return killed


def kill_tree(root: int, mark: str | None = None) -> set[int]:
    """Stop `root`, kill its descendants and the processes carrying `mark` (none: `root`'s own
    mark is not known), and return the pids killed. `root` itself is left stopped: the caller
    kills and reaps it (its zombie children go to init with it). A pid is returned once
    though it may be found again, by the mark or by a later call: a killed process looks
    alive until it is reaped, which under load takes a while."""
    _kill(root, signal.SIGSTOP)
    killed = kill_descendants(root)
    if mark:
        for _ in range(20):
            victims = [p for p in marked(mark) if p != root]
            if not victims:
                break
            killed |= {p for p in victims if _kill(p)}
            time.sleep(0.005)
    return killed


def sweep(prefix: str = "", owner_dead_only: bool = True) -> int:
    """Kill marked processes: those whose owner process is gone (`owner_dead_only`), or every
    one whose mark starts with `prefix`. Returns how many were killed."""
    n = 0
    for p in marked(prefix):
        if owner_dead_only:
            owner = _owner_of(p)
            if owner is None or alive(owner):
                continue
        n += _kill(p)
    return n


def _owner_of(pid: int) -> int | None:
    env = _proc(pid, "environ")
    if env is None:
        return None
    want = f"{MARK}=".encode()
    for v in env.split(b"\0"):
        if v.startswith(want):
            parts = v[len(want):].decode(errors="replace").split(":")
            if len(parts) == 3 and parts[1].isdigit():
                return int(parts[1])
    return None
