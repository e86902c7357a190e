"""Running a reproducer in a fresh process, time-limited, under a given interpreter: what the
bug database's re-check (`campaign.triage.bugdb.recheck`), the triage's repro check
(`campaign.triage.pipeline.repro.check_repro`) and the version matrix
(`campaign.triage.bugdb.matrix`) share.

A run is one process in a session of its own (`start_new_session`), so that on timeout the
whole group, and whatever the script started, is killed (`campaign.sandbox.kill_group`).
Output goes to temporary files, not pipes: a subprocess left behind cannot keep the caller
reading. `PYTHONPATH` is dropped from the environment, so a repro sees the interpreter's own
packages only. Runs share nothing but the interpreter, so several may run at once (threads,
`parallel`).

`probe(python)` reads the compiler versions an interpreter has: `torch.__version__`,
`onnxruntime.__version__`, `tvm.__version__`, each imported in that interpreter; a package
that does not import is recorded with the reason, not an error.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from campaign.sandbox import kill_group, signal_name

#: the packages whose versions an interpreter is read for (import name -> distribution)
PACKAGES: dict[str, str] = {"torch": "torch", "onnxruntime": "onnxruntime", "tvm": "apache-tvm"}
#: seconds the version probe may take (importing torch and tvm takes a few)
PROBE_S = 180.0
_PROBE = r'''
import importlib, json, platform, sys
out = {"python": platform.python_version()}
for name in sys.argv[1:]:
    try:
        out[name] = str(importlib.import_module(name).__version__)
    except BaseException as e:
        out[name] = None
        out[name + ":error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
print("VERSIONS " + json.dumps(out))
'''


@dataclass(frozen=True)
class Run:
    """One finished (or killed) process: its exit code (negative: killed by that signal), its
    output, whether it ran past its limit (then it was killed), and how long it took."""

    code: int
    stdout: str
    stderr: str
    expired: bool
    seconds: float

    def text(self) -> str:
        """stdout, stderr and, when a signal killed it, a `[killed by SIGxxx]` line: the text a
        judge reads."""
        died = f"\n[killed by {signal_name(-self.code)}]" if self.code < 0 and not self.expired \
            else ""
        return f"{self.stdout}\n{self.stderr}{died}"


def run_process(argv: list[str], cwd: Path | str, timeout_s: float,
                env: dict[str, str] | None = None) -> Run:
    """Run `argv` in `cwd` in a session of its own; past `timeout_s` it is killed with its
    process group and descendants (`expired`). The environment is ours (or `env`) without
    `PYTHONPATH`."""
    base = dict(os.environ if env is None else env)
    base.pop("PYTHONPATH", None)
    start = time.monotonic()
    with tempfile.TemporaryFile() as fout, tempfile.TemporaryFile() as ferr:
        proc = subprocess.Popen(argv, cwd=cwd, env=base, stdout=fout, stderr=ferr,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
            expired = False
        except subprocess.TimeoutExpired:
            expired = True
        finally:
            kill_group(proc.pid)
            proc.wait()
        fout.seek(0)
        ferr.seek(0)
        return Run(proc.returncode, fout.read().decode("utf-8", "replace"),
                   ferr.read().decode("utf-8", "replace"), expired, time.monotonic() - start)


def run_script(python: str, script: Path, args: Iterable[str] = (), cwd: Path | None = None,
               timeout_s: float = 300.0) -> Run:
    """`python script args` (`run_process`); `cwd` None: a fresh temporary directory, removed
    after (a script that writes files cannot meet another run's)."""
    argv = [python, str(Path(script).resolve()), *args]
    if cwd is not None:
        return run_process(argv, cwd, timeout_s)
    with tempfile.TemporaryDirectory(prefix="dynsmith-repro-") as tmp:
        return run_process(argv, tmp, timeout_s)


def tail(text: str, lines: int = 12) -> str:
    """The last `lines` non-blank-trimmed lines of `text`."""
    return "\n".join(text.strip().splitlines()[-lines:])


def last_error(text: str) -> str:
    """The last line of a Python traceback in `text` (`ModuleNotFoundError: No module named
    'tvm'`), else its last non-empty line ('' for none)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            after = [ln for ln in lines[i + 1:] if not ln.startswith(("File ", "^", "~"))]
            return after[-1] if after else lines[-1]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter and the compiler versions it has (`probe`): `versions` maps
    `python` and each of `PACKAGES` to its `__version__`, None when it does not import (the
    reason in `errors`)."""

    python: str
    versions: dict[str, str | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The column name: `torch <version>` (the version every finding depends on most), or
        the interpreter's path when torch does not import."""
        torch = self.versions.get("torch")
        return f"torch {torch}" if torch else f"{self.python} (no torch)"

    def stack(self) -> list[str]:
        """`name==version` of each package that imports (sorted), as the bug database records
        versions."""
        return sorted(f"{PACKAGES.get(k, k)}=={v}" for k, v in self.versions.items()
                      if v and k in PACKAGES)


def probe(python: str, timeout_s: float = PROBE_S,
          packages: tuple[str, ...] = tuple(PACKAGES)) -> Interpreter:
    """The versions of `packages` (import names) interpreter `python` has; an interpreter
    that cannot run at all gives an `Interpreter` with no versions and the reason under
    `errors["python"]`."""
    try:
        run = run_process([python, "-c", _PROBE, *packages], tempfile.gettempdir(), timeout_s)
    except OSError as e:
        return Interpreter(python, {}, {"python": f"{type(e).__name__}: {e}"})
    for line in run.stdout.splitlines():
        if line.startswith("VERSIONS "):
            data = json.loads(line.removeprefix("VERSIONS "))
            errors = {k.removesuffix(":error"): v for k, v in data.items() if k.endswith(":error")}
            versions = {k: v for k, v in data.items() if not k.endswith(":error")}
            return Interpreter(python, versions, errors)
    why = (f"timed out after {timeout_s:g} s" if run.expired
           else last_error(run.text()) or f"exit {run.code}")
    return Interpreter(python, {}, {"python": why})


def this_interpreter() -> str:
    """The interpreter running dynsmith."""
    return sys.executable


T = TypeVar("T")
R = TypeVar("R")


def parallel(fn: Callable[[T], R], items: list[T], jobs: int = 1) -> list[R]:
    """`fn` over `items`, `jobs` at a time (threads: each call waits on its own process),
    results in `items`' order."""
    if jobs <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(fn, items))
