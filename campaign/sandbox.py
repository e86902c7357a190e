"""`Sandbox`: one backend evaluating in a long-lived worker process, which a crash or a hang
kills instead of the caller.

Design (one sandbox per backend per FuzzWorker):

- The process model (`SandboxConfig.start_method`): sandbox processes are forked by
  `multiprocessing`'s fork server, a process exec'd fresh that imports the backends' heavy
  modules once (`Backend.PRELOAD`) and has never run a test, a compile or autograd. The caller
  may have: torch builds from 2.14 on refuse autograd in a child forked after AOT autograd
  traced a training graph in its parent ("Unable to handle autograd's threading in combination
  with fork-based multiprocessing"), and a pytest process, the triage and the float64 shadow
  all do that. So no autograd, CUDA or thread state crosses a fork that a build refuses. Each
  new process then runs `backend.prepare()` (warm-ups) and `backend.child_init()` before it
  says it is ready. `start_method="fork"` is the old model (the caller prepares, then forks
  itself), kept for `bench/sandbox_start.py`'s comparison: sound only in a caller that never
  ran autograd. Parent and child talk over a `Pipe` we own (not a ProcessPoolExecutor: that
  cannot kill a hung task).
- Per test the parent sends a `Job` (the graph, whose ops travel as registry name +
  attributes, input values, ONNX bytes; packed once per test for all sandboxes) and waits on
  the pipe *and* the process sentinel with the per-test timeout. The child evaluates with
  `Backend.evaluate` (which never raises for the compiler's own failures) and sends the
  `BackendResult` back.
- Before each stage the child writes the stage into a shared `RawValue`, so a segfault during
  compile is recorded as stage `compile` without any message surviving the crash.
- Death: the child's exit signal (SIGSEGV, SIGABRT, SIGKILL from the kernel's OOM killer, ...)
  becomes verdict `signal` (a non-zero exit without a signal: `crash`, `ProcessExit`), with the
  stage and a signature built from the child's stderr (faulthandler's Python stack, a C++
  `what():` or check-failure line). Timeout: SIGUSR1 first (faulthandler dumps every thread's
  stack: where it hangs), then the whole process group is SIGKILLed (compiler subprocesses
  such as Inductor's C++ compiler die too), verdict `timeout`. Either way the
  process is replaced on the next test; the test is not lost.
- A timeout is only a finding once confirmed: a test that runs past `timeout_s` is re-run
  at once, alone, in a fresh process (the hung one and its process group are dead and reaped
  first, so the re-run never competes with its own first attempt) with the limit
  `timeout_s * confirm_timeout_factor`. If it finishes, its result is the test's (a slow
  compile under load is no hang: `timeout_confirmed` False, `confirm_s` how long it took); if
  it runs out too, the timeout is confirmed. The result records both limits.
- Child setup: own process group (a terminal's Ctrl-C reaches only the parent, which decides),
  default signal handlers, faulthandler into its stderr file (never the console), stdout/stderr
  into a per-process file (tail kept for crash reports, truncated per test), no core dumps,
  `PR_SET_PDEATHSIG` (dies with the parent), optional address-space limit (`RLIMIT_AS`, cpu
  targets only: CUDA reserves huge virtual ranges), one torch thread.
- The child owns every process its compiler starts (`campaign.proctree`: subreaper + an
  environment mark): after each test it kills what was left running (`leaked_procs`), and a
  replaced child is killed with its whole tree and every marked escapee.
- After each test the child checks itself (`_Health`: cwd, signal handlers, sys streams,
  environment, threads, fds 1/2), repairs what it can and asks to be replaced otherwise; a
  harness error (our code failing in the child) replaces it and re-runs the test once in a
  fresh one, blaming the test that ran before (`BackendResult.blame`).
- A child is recycled after `max_tests_per_process` tests, bounding leaks in the compilers.
  Scratch dirs live under `WORK_ROOT/<parent pid>-...`; those of dead parents (a Ray actor
  killed with SIGKILL cannot clean up) are swept by the next sandbox to start.

- Compiler coverage (`coverage`, a `campaign.compiler_coverage.CoverageSpec`): on the tests its rate
  chooses, the child runs the evaluation under coverage.py's tracer restricted to the
  backend's packages and sends the lines back in `BackendResult.covered`; the union of what
  was seen is kept by the caller (`FuzzWorker`), in the parent, so a replaced process loses
  none of it. A test whose process dies or hangs sends nothing: its own lines are lost.

Invariant: `evaluate` always returns a `BackendResult` and leaves the sandbox usable.
"""
from __future__ import annotations

import ctypes
import faulthandler
import functools
import io
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import onnx

from campaign import proctree
from campaign.artifacts import Materialized
from campaign.backends.base import Backend, BackendResult, set_stage_listener
from campaign.compiler_coverage import CoverageSpec, run_measured
from campaign.proctree import START_METHODS
from campaign.signature import python_frames
from campaign.testcase import TestCase
from campaign.verdict import Stage, Verdict
from ir.core.graph import Graph
from ir.core.op import OP_REGISTRY, Op

#: modules the fork server imports before it forks its first process: `__main__` (as
#: multiprocessing does, so no process re-imports it), this module, and each sandbox's
#: `Backend.PRELOAD`, gathered as sandboxes are made (the server starts with the first
#: process; a module named after that is imported by each process that needs it)
_PRELOAD: list[str] = ["__main__", __name__]


def _preload(modules: tuple[str, ...]) -> None:
    new = [m for m in modules if m not in _PRELOAD]
    if new:
        _PRELOAD.extend(new)
        mp.get_context("forkserver").set_forkserver_preload(list(_PRELOAD))

#: stage codes in the shared value; IDLE: no test running (between tests)
_STAGES = [None, Stage.UNKNOWN, Stage.IMPORT, Stage.COMPILE, Stage.RUN]
_IDLE, _SETUP = 0, 1
_CODE = {s: i for i, s in enumerate(_STAGES) if s is not None}


class SandboxError(RuntimeError):
    """The sandbox itself failed (its process could not start): our problem, not a finding."""


@dataclass
class SandboxConfig:
    """Limits of one sandbox."""

    #: seconds for one test (import + compile + run); the process is killed past it
    timeout_s: float = 60.0
    #: a test that ran past `timeout_s` is re-run once in a fresh process with this many times
    #: the limit; only if that runs out too is it a `timeout` (0: no re-run, the first timeout
    #: stands, unconfirmed)
    confirm_timeout_factor: float = 3.0
    #: seconds for a new process to come up (`backend.child_init`)
    start_timeout_s: float = 120.0
    #: address space (MiB) a cpu-target process may add to what it had at fork; None: no limit
    memory_limit_mb: int | None = 8192
    #: replace the process after this many tests (bounds leaks); None: never
    max_tests_per_process: int | None = 500
    #: how sandbox processes start (`START_METHODS`, the module doc): `forkserver`, from a
    #: process that never ran autograd; `fork`, from the caller (only for comparison)
    start_method: str = "forkserver"

    def __post_init__(self) -> None:
        if self.start_method not in START_METHODS:
            raise ValueError(f"start_method: {self.start_method!r} is not one of "
                             f"{', '.join(START_METHODS)}")
    #: bytes of the process's stdout/stderr kept in a crash or timeout report
    output_tail_bytes: int = 4000


@dataclass
class SandboxStats:
    """Counters of one sandbox (for logs and `bench/eval.py`)."""

    processes: int = 0  #: processes started
    tests: int = 0
    deaths: int = 0
    timeouts: int = 0  #: attempts killed at their limit (confirming re-runs included)
    confirmations: int = 0  #: confirming re-runs after a timeout
    confirmed: int = 0  #: of which ran out too (confirmed timeouts)
    recycled: int = 0
    replaced: int = 0  #: processes replaced because a test damaged them (`_Health`)
    harness_reruns: int = 0  #: tests re-run in a fresh process after a harness error
    start_s: list[float] = field(default_factory=list)  #: seconds each start took


def _make_op(name: str, attrs: dict[str, Any]) -> Op:
    return OP_REGISTRY[name](**attrs)


class _JobPickler(pickle.Pickler):
    """Pickles ops by registry name and attributes (op classes made by factories are not
    importable by qualified name, and a name + attributes is all an op is)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Op):
            return _make_op, (obj.name, obj.attrs())
        return NotImplemented


@dataclass
class Job:
    """One test as plain data for a sandbox process: the graph (ops travel as registry name +
    attributes), input and param values, the ONNX bytes the parent built, the lineage.
    Between our own processes only: `pack` is a pickle, never written to disk."""

    test_id: str
    seed: int
    graph: Graph
    values: dict[str, np.ndarray]
    input_names: list[str]
    onnx_bytes: bytes | None
    lineage: list[dict[str, Any]]
    extra_inputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    #: dynamic shapes (`ir.materialize.dynshape.DynShape`, plain data), None for a static test
    dynshape: Any = None
    #: each test mode's spec the test holds, by the mode's `spec_field` (`campaign.modes`:
    #: a gradient test's `GradSpec` as `grad`, a transform's `TransformSpec`, ...)
    specs: dict[str, Any] = field(default_factory=dict)
    _packed: bytes | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def of(m: Materialized) -> Job:
        tc = m.tc
        try:
            onnx_bytes: bytes | None = m.onnx_bytes
        except Exception:  # backends that need ONNX will fail on it themselves
            onnx_bytes = None
        from campaign.modes import MODES

        specs = {m.spec_field: getattr(tc, m.spec_field) for m in MODES.values()
                 if m.spec_field is not None and getattr(tc, m.spec_field) is not None}
        return Job(tc.test_id, tc.seed, tc.graph, dict(tc.values),
                   [v.name for v in tc.graph.inputs], onnx_bytes, list(tc.lineage),
                   list(tc.extra_inputs), tc.dynshape, specs)

    def pack(self) -> bytes:
        """The job as bytes (computed once: every sandbox of a test gets the same)."""
        if self._packed is None:
            buf = io.BytesIO()
            _JobPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(
                {k: getattr(self, k) for k in ("test_id", "seed", "graph", "values",
                                               "input_names", "onnx_bytes", "lineage",
                                               "extra_inputs", "dynshape", "specs")})
            self._packed = buf.getvalue()
        return self._packed

    @staticmethod
    def unpack(data: bytes) -> Job:
        return Job(**pickle.loads(data))


class JobMaterialized(Materialized):
    """`Materialized` rebuilt from a `Job` in the sandbox process; the ONNX model is the parent's
    bytes, parsed only if a backend asks for the model."""

    def __init__(self, job: Job):
        super().__init__(TestCase(job.test_id, job.seed, job.graph, job.values, job.lineage,
                                  job.extra_inputs, dynshape=job.dynshape, **job.specs))
        self.job = job
        #: per input set, graph input name -> value, in order (`backends.base.input_feed_sets`)
        self.feed_sets = [{n: s[n] for n in job.input_names}
                          for s in [job.values, *job.extra_inputs]]

    @cached_property
    def onnx_bytes(self) -> bytes:
        if self.job.onnx_bytes is not None:
            return self.job.onnx_bytes
        return self.onnx_model.SerializeToString()

    @cached_property
    def onnx_model(self) -> onnx.ModelProto:
        if self.job.onnx_bytes is not None:
            return onnx.load_from_string(self.job.onnx_bytes)
        # attr-defined ignored: mypy takes the class attribute for the property's value, not
        # the cached_property (whose `func` is the parent's builder)
        return Materialized.onnx_model.func(self)  # type: ignore[attr-defined]


# ---- the child ---------------------------------------------------------------------------------

def _vm_size_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _set_pdeathsig() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the parent's finalizer still kills us
        pass


#: signals whose handlers the sandbox process sets (and puts back when a test replaced one)
_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGSEGV",
            "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL", "SIGCHLD")


def _setup_child(out_path: str, memory_limit: int | None, parent: int,
                 environ: dict[str, str] | None = None) -> None:
    """Make this freshly forked process a quiet, killable, bounded sandbox process that owns
    every process its compiler starts (subreaper + mark, `campaign.proctree`), with the
    caller's environment as it was at `Sandbox.start` (`environ`: the fork server has the one
    of its own start)."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    os.setpgid(0, 0)
    _set_pdeathsig()
    proctree.become_subreaper()
    os.environ[proctree.MARK] = proctree.mark_value(parent)
    try:  # a daemonic multiprocessing child may not start children; compilers may want to
        mp.current_process().daemon = False
    except (AssertionError, ValueError):
        pass
    # the death signal is armed for our own parent: the caller (fork) or its fork server, which
    # exits when the caller does; either may have gone before it was armed
    if not proctree.alive(parent) or os.getppid() == 1:
        os._exit(0)
    _default_signal_handlers()
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # fresh Python streams on fds 1/2 (the inherited ones may write elsewhere, e.g. pytest's
    # capture files); faulthandler dumps the Python stack of a fatal signal there too
    sys.stdout = open(1, "w", buffering=1, closefd=False, errors="replace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="replace")
    _arm_faulthandler()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_limit is not None:
        limit = _vm_size_bytes() + memory_limit
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(1)
    try:  # compilers' progress bars (Inductor, the ONNX exporter) would start tqdm's monitor
        import tqdm  # thread, which `_Health` would find left running after the test

        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass


def _default_signal_handlers() -> None:
    for name in _SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass


def _arm_faulthandler() -> None:
    faulthandler.disable()
    faulthandler.enable(file=sys.stderr, all_threads=False)
    if hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1"):
        # a registration faulthandler still holds is only updated, not installed again: after
        # the handler was reset (`_default_signal_handlers`) SIGUSR1 would kill without a dump
        faulthandler.unregister(signal.SIGUSR1)
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def _fd_id(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Health:
    """What a sandbox process is before its first test, checked after every test (the
    compiler runs in this process and may damage it). Owns the three outcomes:

    - repaired in place, and noted: working directory changed (changed back), signal handlers
      replaced (ours put back, faulthandler re-armed), `sys.stdout`/`sys.stderr` replaced
      (ours put back), environment variables set, changed or removed (restored);
    - the process is replaced before the next test, and noted: a Python thread left running
      (it cannot be stopped from outside);
    - the process is unusable (replaced; the test is a `crash` if it otherwise passed): fd 1
      or 2 closed or pointing elsewhere, our `sys.stdout`/`sys.stderr` closed, the working
      directory deleted;
    and kills the processes a test left running (counted in `leaked_procs`)."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.env = dict(os.environ)
        self.stdout, self.stderr = sys.stdout, sys.stderr
        self.fds = {fd: _fd_id(fd) for fd in (1, 2)}
        self.handlers = {}
        for name in _SIGNALS:
            sig = getattr(signal, name, None)
            if sig is not None:
                self.handlers[sig] = signal.getsignal(sig)
        self.threads = {t.ident for t in threading.enumerate()}

    def check(self, result: BackendResult) -> bool:
        """Record (and repair what can be) the damage of the test just run into `result`;
        True: the process must be replaced."""
        damage, unusable = result.damage, result.unusable
        leaked = len(proctree.kill_descendants(os.getpid()))
        _reap_children()
        result.leaked_procs = leaked
        if leaked:
            damage.append(f"left {leaked} process{'es' if leaked > 1 else ''} running "
                          "(killed)")
        for fd, ident in self.fds.items():
            now = _fd_id(fd)
            if now != ident:
                unusable.append(f"fd {fd} {'closed' if now is None else 'redirected'}")
        for name in ("stdout", "stderr"):
            ours = getattr(self, name)
            if getattr(sys, name) is not ours:
                setattr(sys, name, ours)
                damage.append(f"sys.{name} replaced (put back)")
            if ours.closed:
                unusable.append(f"sys.{name} closed")
        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        if cwd != self.cwd:
            try:
                os.chdir(self.cwd)
                how = 'deleted' if cwd is None else 'changed to ' + repr(cwd)
                damage.append(f"working directory {how} (changed back)")
            except OSError:
                unusable.append(f"working directory {self.cwd!r} deleted")
        replaced = []
        for sig, handler in self.handlers.items():
            try:
                if signal.getsignal(sig) is not handler and signal.getsignal(sig) != handler:
                    signal.signal(sig, handler)
                    replaced.append(signal_name(sig))
            except (OSError, ValueError):
                pass
        if replaced:
            _arm_faulthandler()
            damage.append(f"signal handlers of {', '.join(replaced)} replaced (put back)")
        env = dict(os.environ)
        if env != self.env:
            changed = sorted(k for k in set(env) | set(self.env) if env.get(k) != self.env.get(k))
            os.environ.clear()
            os.environ.update(self.env)
            damage.append(f"environment variables {', '.join(changed[:5])}"
                          f"{' ...' if len(changed) > 5 else ''} changed (restored)")
        threads = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive()]
        if threads:
            damage.append(f"left {len(threads)} thread{'s' if len(threads) > 1 else ''} running "
                          f"({', '.join(t.name for t in threads[:3])}; process replaced)")
        if unusable:
            damage.append(f"left its process unusable: {', '.join(unusable)} (process replaced)")
        return bool(threads or unusable)


def _reap_children() -> None:
    """Reap the zombies of this process (a subreaper adopts orphans; nothing waits for them)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except OSError:
            return
        if pid == 0:
            return


def _harness_result(what: str, e: BaseException) -> BackendResult:
    return BackendResult(stage=Stage.UNKNOWN, verdict=Verdict.INVALID,
                         error_class=type(e).__name__, error_msg=f"sandbox {what}: {e}",
                         traceback=traceback.format_exc(), harness=True)


def _truncate_output() -> None:
    """Start a test's output afresh (the file was opened without O_APPEND: seek back too)."""
    for fd in (1, 2):
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            pass


def _child_main(backend: Backend, conn: Any, stage: Any, work_dir: str, out_path: str,
                memory_limit: int | None, parent: int,
                coverage: CoverageSpec | None = None, prepare: bool = True,
                environ: dict[str, str] | None = None) -> None:
    _setup_child(out_path, memory_limit, parent, environ)
    set_stage_listener(lambda s: setattr(stage, "value", _CODE[s]))
    try:
        if prepare:  # forked by the fork server: warm-ups happen here, never in the caller
            backend.prepare()
        backend.child_init(work_dir)
        # what the warm-ups imported may have set handlers of its own (TVM's native backtrace
        # on SIGSEGV, chained after faulthandler's): a crash reads as it did in a fork
        _default_signal_handlers()
        _arm_faulthandler()
    except BaseException as e:
        conn.send(("init_error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    health = _Health()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            kind, payload, *rest = conn.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            return
        measure = bool(rest and rest[0])
        stage.value = _SETUP
        try:
            _truncate_output()
            m = JobMaterialized(Job.unpack(payload))
        except Exception as e:  # our transport failed: a harness error, not the compiler's
            result = _harness_result("could not read the job", e)
        else:
            # compiler coverage: the tracer runs around the evaluation only, and what it saw
            # goes back with the result (the union is the parent's: it survives this process)
            try:  # `evaluate` never raises: what does is the tracer, ours
                result, covered = run_measured(coverage if measure else None,
                                               functools.partial(backend.evaluate, m))
            except Exception as e:
                result = _harness_result("could not measure compiler coverage", e)
            else:
                result.covered = covered
        stage.value = _IDLE
        try:  # our code, in a process the compiler may have damaged
            replace = health.check(result)
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception as e:
            result = _harness_result("could not check its process after the test", e)
            replace = True
        try:
            conn.send(("result", result, replace))
        except Exception as e:  # e.g. an output numpy cannot pickle
            conn.send(("result", _harness_result("could not send the result", e), True))
        if replace:
            return


# ---- crash reports ----------------------------------------------------------------------------

#: stderr lines that say what went wrong when a native library aborts or a check fails
_INFORMATIVE = re.compile(
    r"what\(\):\s*(?P<what>.+)|(?P<line>(Check failed|Assertion|terminate called|InternalError|"
    r"RuntimeError|Error:|ERROR).*)")


def crash_summary(output: str) -> str | None:
    """The most informative line of a dead process's output (a C++ `what():` line first)."""
    best = None
    for line in output.splitlines():
        m = _INFORMATIVE.search(line)
        if m is None:
            continue
        if m.group("what"):
            return m.group("what").strip()
        best = best or m.group("line").strip()
    return best


def _trim_dumps(text: str) -> str:
    """Drop the frames below `_child_main` in faulthandler dumps, and the extension list."""
    out, skipping = [], False
    for line in text.splitlines():
        is_frame = line.startswith('  File "')
        if skipping and is_frame:
            continue
        skipping = False
        if line.startswith("Extension modules:"):
            continue
        out.append(line)
        if is_frame and line.endswith(" in _child_main"):
            skipping = True
    return "\n".join(out)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


# ---- the parent --------------------------------------------------------------------------------

def kill_group(pid: int, mark: str | None = None) -> set[int]:
    """Kill sandbox process `pid` (or a repro script's: `campaign.triage.pipeline.repro.check_repro`) with
    everything it started: its descendants (it is their
    subreaper), what carries its mark (escaped after it died), its process group. Returns the
    other processes killed (their pids)."""
    killed = proctree.kill_tree(pid, mark)
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass
    return killed


class Sandbox:
    """A backend behind a process boundary. Not thread-safe: one test at a time."""

    def __init__(self, backend: Backend, cfg: SandboxConfig | None = None,
                 coverage: CoverageSpec | None = None):
        self.backend = backend
        self.cfg = cfg or SandboxConfig()
        #: compiler coverage measured in the process, on the tests its rate chooses
        self.coverage = coverage
        self.stats = SandboxStats()
        self._ctx: Any = mp.get_context(self.cfg.start_method)
        if self.cfg.start_method == "forkserver":
            _preload((*backend.PRELOAD, type(backend).__module__))
        self._proc: Any = None
        self._conn: Any = None
        self._stage = self._ctx.RawValue("i", _IDLE)
        self._work_dir: str | None = None
        self._served = 0
        self._prepared = False  #: `backend.prepare()` ran here (the `fork` start method only)
        self._finalizer: Any = None
        self._mark: str | None = None
        #: the job the current process ran last (blamed if the next one finds it unusable)
        self._last_job: Job | None = None
        #: processes killed with the current process (`_kill`), for the row of its test: a set,
        #: as a death kills its group twice (before and while reaping) and may find the same
        #: not-yet-reaped process both times
        self._killed_with: set[int] = set()

    # ---- lifecycle ---------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the process now (else the first `evaluate` does). Raises SandboxError."""
        if self.alive:
            return
        self._reap()
        forks_here = self.cfg.start_method == "fork"
        if forks_here and not self._prepared:
            try:
                self.backend.prepare()
            except Exception as e:  # e.g. the compiler's package cannot be imported
                raise SandboxError(f"preparing backend {self.backend.name} failed: "
                                   f"{type(e).__name__}: {e}") from e
            self._prepared = True
        t0 = time.perf_counter()
        self._work_dir = _new_work_dir(self.backend.name)
        out_path = os.path.join(self._work_dir, "output.txt")
        parent_end, child_end = self._ctx.Pipe(duplex=True)
        memory = (self.cfg.memory_limit_mb * 2**20
                  if self.cfg.memory_limit_mb is not None and not self.backend.is_gpu else None)
        self._stage.value = _IDLE
        proc = self._ctx.Process(
            target=_child_main, name=f"sandbox-{self.backend.name}", daemon=True,
            args=(self.backend, child_end, self._stage, self._work_dir, out_path, memory,
                  os.getpid(), self.coverage, not forks_here,
                  None if forks_here else dict(os.environ)))
        proc.start()
        assert proc.pid is not None  # started
        child_end.close()
        self._proc, self._conn, self._served = proc, parent_end, 0
        self._mark = proctree.mark_value(os.getpid(), proc.pid)
        self._last_job = None
        self.stats.processes += 1
        self._finalizer = weakref.finalize(self, kill_group, proc.pid, self._mark)
        ready = mpc.wait([parent_end, proc.sentinel], self.cfg.start_timeout_s)
        msg = None
        if parent_end in ready:
            try:
                msg = parent_end.recv()
            except (EOFError, OSError):
                msg = None
        if msg is None or msg[0] != "ready":
            why = (msg[1] if msg and msg[0] == "init_error" else
                   "no answer within start_timeout_s" if not ready else
                   f"it died (exit code {proc.exitcode})")
            tail = self._output_tail()
            self._kill()
            raise SandboxError(f"sandbox process for {self.backend.name} did not start: {why}"
                               + (f"\n{tail}" if tail else ""))
        self.stats.start_s.append(time.perf_counter() - t0)

    def close(self) -> None:
        """Stop the process (politely, then by force) and remove its scratch dir."""
        if self.alive:
            try:
                self._conn.send(("stop", None))
                self._proc.join(2.0)
            except (OSError, ValueError):
                pass
        self._kill()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _kill(self) -> None:
        self._reap()

    def _reap(self) -> None:
        if self._proc is not None:
            # its descendants, process group and marked escapees may outlive it
            self._killed_with |= kill_group(self._proc.pid, self._mark)
            self._proc.join(5.0)
            self._proc = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None

    def _output_tail(self) -> str:
        """The end of this test's output, faulthandler dumps cut at the sandbox's entry point
        (the frames above it are the parent's, inherited through fork)."""
        if self._work_dir is None:
            return ""
        path = os.path.join(self._work_dir, "output.txt")
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return _trim_dumps(text)[-self.cfg.output_tail_bytes:].strip()

    # ---- evaluation --------------------------------------------------------------------------
    def evaluate(self, m: Materialized, job: Job | None = None,
                 timeout_s: float | None = None, confirm: bool = True) -> BackendResult:
        """Evaluate one test in the sandbox process (started or replaced as needed), within
        `timeout_s` (default: the config's); a timeout is re-run once to confirm it (module
        doc, `SandboxConfig.confirm_timeout_factor`) unless `confirm` is False (a merged test:
        its parts are re-run alone, each confirmed on its own, `campaign.merge`)."""
        job = job if job is not None else Job.of(m)
        limit = self.cfg.timeout_s if timeout_s is None else timeout_s
        previous = self._last_job  # what the current process ran before (None: fresh)
        result, _ = self._attempt(job, limit)
        if result.harness:
            result = self._rerun_after_harness_error(job, limit, result, previous)
        factor = self.cfg.confirm_timeout_factor
        if result.verdict is not Verdict.TIMEOUT or not factor or not confirm:
            return result
        # the hung process's group was killed and reaped by `_timed_out`: the re-run starts a
        # fresh process and is all this sandbox runs until it ends
        confirm_limit = limit * factor
        self.stats.confirmations += 1
        again, took = self._attempt(job, confirm_limit)
        again.timeout_limit_s = limit
        again.confirm_limit_s = confirm_limit
        again.confirm_s = round(took, 3)
        if again.verdict is Verdict.TIMEOUT:
            self.stats.confirmed += 1
            again.error_msg = (f"confirmed: the first attempt ran past {limit:g} s, a re-run in "
                               f"a fresh process past {confirm_limit:g} s; "
                               + (again.error_msg or ""))
        return again

    def _rerun_after_harness_error(self, job: Job, limit: float, first: BackendResult,
                                   previous: Job | None) -> BackendResult:
        """Our code failed in the sandbox process: the process may have been damaged by an
        earlier test. Replace it and run the test once more; a normal result stands (and the
        earlier test, if any, is blamed: `BackendResult.blame`), a second harness error is
        ours (`invalid`)."""
        self.stats.harness_reruns += 1
        self._kill()
        again, _ = self._attempt(job, limit)
        if again.harness:
            return again
        why = (first.error_msg or "").splitlines()[0] if first.error_msg else first.error_class
        if previous is not None and previous.test_id != job.test_id:
            again.blame = (previous.pack(), why)
            again.damage.append(f"test {previous.test_id} left the process unusable ({why}); "
                                "this test was re-run in a fresh process")
        else:
            again.damage.append(f"harness error in the first attempt ({why}); re-run in a "
                                "fresh process")
        return again

    def _attempt(self, job: Job, limit: float) -> tuple[BackendResult, float]:
        """One evaluation within `limit` seconds: (result, seconds from sending the job)."""
        result, took = self._attempt_once(job, limit)
        if result.leaked_procs is None:  # killed with its process (death, timeout)
            result.leaked_procs = len(self._killed_with)
        self._killed_with = set()
        return result, took

    def _attempt_once(self, job: Job, limit: float) -> tuple[BackendResult, float]:
        for attempt in (1, 2):
            try:
                self.start()
            except SandboxError as e:
                return BackendResult(stage=Stage.UNKNOWN, verdict=Verdict.INVALID,
                                     error_class="SandboxError", error_msg=str(e)), 0.0
            try:
                measure = self.coverage is not None and self.coverage.measures(job.seed)
                self._conn.send(("job", job.pack(), measure))
                break
            except (BrokenPipeError, ConnectionResetError, OSError):  # died while idle
                self._kill()
                if attempt == 2:
                    return BackendResult(
                        stage=Stage.UNKNOWN, verdict=Verdict.INVALID,
                        error_class="SandboxError",
                        error_msg="sandbox process died before the test started"), 0.0
        self.stats.tests += 1
        deadline = time.monotonic() + limit
        t0 = time.perf_counter()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._timed_out(limit, time.perf_counter() - t0), time.perf_counter() - t0
            ready = mpc.wait([self._conn, self._proc.sentinel], remaining)
            if self._conn in ready:
                try:
                    kind, result, replace = self._conn.recv()
                except (EOFError, OSError):
                    return self._died(), time.perf_counter() - t0
                if kind == "result":
                    took = time.perf_counter() - t0
                    self._served += 1
                    self._last_job = job
                    cap = self.cfg.max_tests_per_process
                    if replace:  # damaged (`_Health`): the next test gets a fresh process
                        self.stats.replaced += 1
                        self.close()
                    elif cap is not None and self._served >= cap:
                        self.stats.recycled += 1
                        self.close()
                    return result, took
            elif self._proc.sentinel in ready and not self._conn.poll(0):
                return self._died(), time.perf_counter() - t0

    def _current_stage(self) -> Stage:
        return _STAGES[self._stage.value] or Stage.UNKNOWN

    def _died(self) -> BackendResult:
        stage = self._current_stage()
        # before reaping: leftover compiler children die too
        self._killed_with |= kill_group(self._proc.pid, self._mark)
        self._proc.join(5.0)
        code = self._proc.exitcode
        tail = self._output_tail()
        self.stats.deaths += 1
        self._kill()
        summary = crash_summary(tail)
        if code is not None and code < 0:
            name = signal_name(-code)
            head = f"{name} during {stage.value}" + (f": {summary}" if summary else "")
            verdict, error_class = Verdict.SIGNAL, name
        else:
            head = f"sandbox process exited with code {code} during {stage.value}" + (
                f": {summary}" if summary else "")
            verdict, error_class = Verdict.CRASH, "ProcessExit"
        msg = head + (f"\n--- process output (tail) ---\n{tail}" if tail else "")
        return BackendResult(stage=stage, verdict=verdict, error_class=error_class,
                             error_msg=msg, traceback=tail or None,
                             frames=tuple(python_frames(tail, innermost_first=True)))

    def _timed_out(self, limit: float, elapsed: float) -> BackendResult:
        stage = self._current_stage()
        try:  # ask faulthandler for the stacks (where it hangs), then kill
            os.kill(self._proc.pid, signal.SIGUSR1)
            time.sleep(0.1)
        except OSError:
            pass
        tail = self._output_tail()
        self.stats.timeouts += 1
        self._kill()
        msg = (f"no result within {limit:g} s (during {stage.value}); "
               f"sandbox process killed after {elapsed:.1f} s")
        if tail:
            msg += f"\n--- process output (tail) ---\n{tail}"
        return BackendResult(stage=stage, verdict=Verdict.TIMEOUT, error_class="Timeout",
                             error_msg=msg, traceback=tail or None,
                             frames=tuple(python_frames(tail, innermost_first=True)),
                             timeout_limit_s=limit)


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)[:40]


#: scratch dirs of sandbox processes: <root>/<parent pid>-<backend>-<random>
WORK_ROOT = os.path.join(tempfile.gettempdir(), "dynsmith-sandbox")


def sweep_stale_work_dirs(root: str = WORK_ROOT) -> int:
    """Remove scratch dirs whose parent process is gone (a parent killed with SIGKILL, e.g. a
    Ray actor, cannot clean up; its sandbox processes die with it). Returns how many."""
    removed = 0
    try:
        entries = os.listdir(root)
    except OSError:
        return 0
    for name in entries:
        m = re.match(r"(\d+)-", name)
        if m and not proctree.alive(int(m.group(1))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            removed += 1
    return removed


_swept = False


def _new_work_dir(backend: str) -> str:
    global _swept
    os.makedirs(WORK_ROOT, exist_ok=True)
    if not _swept:  # once per process
        sweep_stale_work_dirs()
        proctree.sweep()  # processes sandboxes of dead parents started (escaped their tree)
        _swept = True
    return tempfile.mkdtemp(prefix=f"{os.getpid()}-{_safe(backend)}-", dir=WORK_ROOT)
