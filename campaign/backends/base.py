"""The backend interface, the registry of backends by name, and the table type for known
unsupported features.

A *backend* is one compiler configuration under test. `Backend.evaluate(m)` compiles and runs one
materialized test case and reports the outputs, or the stage (import / compile / run) where it
failed. It never raises for the compiler's own failures, so it can run in-process (tests, probes,
benchmarks) or inside a `campaign.sandbox.Sandbox` process, which adds what a process can only
tell from outside: signals, hangs, the stage a crash happened in.

Backends are named in the campaign config by a *spec* (see `make_backend`):

- a registered name: `ort`, `ort_noopt`, `tvm`, `inductor`, `onnx_export`, `eager`, ...;
- a registered name with options, URL-query style: `tvm?opt_level=0&pipeline=default`
  (quote it on the Hydra command line: `'campaign.backends=[ort,"tvm?opt_level=0"]'`);
- a dotted path to a user's own backend class or factory: `mypkg.mod:MyBackend` or
  `mypkg.mod.MyBackend` (options allowed too: `mypkg.mod:MyBackend?x=1`).

Invariant: the `name` of a backend made by `make_backend(spec)` is `spec` itself, so the rows
of a campaign carry exactly the names of its config.
"""
from __future__ import annotations

import abc
import importlib
import inspect
import random
import re
import resource
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from campaign.artifacts import Materialized

if TYPE_CHECKING:
    from campaign.testcase import TestCase
    from ir.core.graph import Graph
from campaign.backends.configs import Option, config_text, draw, parse_spec

# `root_error`: the error a chain of wrapper exceptions (Dynamo's "backend='inductor' raised:",
# the exporter's "Failed to export the model ...") wraps, which a row records: one function with
# the repro scripts, whose prelude it is
from campaign.backends.repro_scripts.prelude import root_error
from campaign.signature import python_frames
from campaign.verdict import Stage, Verdict


@dataclass
class BackendResult:
    """What one evaluation produced.

    Invariants: `outputs` is set iff the backend finished every stage (`stage is None`);
    `verdict` is set only when the outcome is decided without comparing outputs (signal,
    timeout, unsupported, skipped, invalid); None means crash if `failed`, else compare.
    """

    outputs: list[np.ndarray] | None = None
    stage: Stage | None = None  #: the stage that failed, None on success
    error_class: str | None = None
    error_msg: str | None = None
    traceback: str | None = None
    compile_ms: float | None = None  #: import + compile time (ORT: session creation)
    run_ms: float | None = None
    #: CPU time of the evaluation (user + system), of the evaluating process and of the child
    #: processes it waited for (a compiler's g++ runs): set by `Backend.evaluate`. Beside the
    #: wall times it says how much of them was the compiler's own work, and how much waiting
    #: for a core (`cpu_ms` / (`compile_ms` + `run_ms`))
    cpu_ms: float | None = None
    verdict: Verdict | None = None
    #: top frames of the failure (innermost first, `campaign.signature.python_frames`)
    frames: tuple[str, ...] = ()
    #: the control-flow dialect of the torch module this run compiled, when the backend
    #: chose it per test (`Backend.dialect_of`)
    dialect: str | None = None
    #: per input set, the compilations its run caused (set 0: the first compile; a backend
    #: that compiles once by construction reports [1, 0, ...]; docs/dynshape.md)
    compiles: list[int] | None = None
    #: a cache test's warm compile: its hits in the compile caches (`campaign.modes.cache`)
    cache_hits: int | None = None
    #: the input set being run when the run failed (None: not in a run, or set 0 ... unknown)
    input_set: int | None = None
    #: a dynamic-shape test that compiled again for a later set: (signature, detail) of why,
    #: the torch code that added the guard that failed (campaign/backends/inductor/shape_guards.py)
    recompile_cause: tuple[str, str] | None = None
    #: set by a `campaign.sandbox.Sandbox`, never by a backend: the per-test limit (seconds) a
    #: first attempt ran past (None: it did not time out)
    timeout_limit_s: float | None = None
    #: ... the larger limit of the confirming re-run in a fresh process (None: none ran)
    confirm_limit_s: float | None = None
    #: ... and the seconds that re-run took (to its result, or to its kill)
    confirm_s: float | None = None
    #: set by a sandbox: processes the test left running (killed by the sandbox), None when
    #: not sandboxed
    leaked_procs: int | None = None
    #: set by a sandbox: what the test did to its process (`campaign.sandbox` checks it after
    #: every test: cwd, signal handlers, sys.stdout/stderr, environment, threads, fds 1/2)
    damage: list[str] = field(default_factory=list)
    #: ... of which what left the process unusable (a `crash` when the test otherwise passed)
    unusable: list[str] = field(default_factory=list)
    #: our own code failed around the backend (not the compiler): the sandbox re-runs it once
    harness: bool = False
    #: the configuration this run used, when it was drawn for the test (`campaign.backends.
    #: configs`: '' is the backend's own)
    backend_config: str = ""
    #: set by a sandbox: the earlier test (its `Job` bytes) that left the process unusable,
    #: found when this test hit a harness error there and passed a re-run in a fresh process
    blame: Any = None
    #: set by a sandbox (or an in-process worker), never by a backend: the lines of the
    #: backend's packages this evaluation ran (`campaign.compiler_coverage`; None: not measured)
    covered: dict[str, frozenset[int]] | None = None
    #: set by the worker: of those, the lines its union for this backend had not seen
    cov_added: dict[str, frozenset[int]] | None = None

    @property
    def timeout_confirmed(self) -> bool | None:
        """True: timed out twice, the second time in a fresh process with the larger limit;
        False: the first attempt timed out, the confirming re-run finished (this result is the
        re-run's); None: no confirming re-run."""
        if self.confirm_limit_s is None:
            return None
        return self.verdict is Verdict.TIMEOUT

    @property
    def failed(self) -> bool:
        return self.stage is not None


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children it has waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class ExportedInputsMismatch(RuntimeError):
    """The model a compiler made from the test's `torch.export` (the ONNX model of
    torch.onnx.export, TVM's module from `from_exported_program`) takes another number of
    inputs than the graph has: the feeds cannot be matched to it."""


class NotApplicable(Exception):
    """Raised inside `Backend._evaluate` when this backend cannot run this test at all (e.g. a
    transform torch eager runs only in another dialect): verdict `skipped`, never a finding."""


class StageFailed(Exception):
    """Raised inside `Backend.evaluate` to attribute an exception to a stage."""

    def __init__(self, stage: Stage, error: BaseException):
        super().__init__(str(error))
        self.stage = stage
        self.error = error


@dataclass(frozen=True)
class KnownUnsupported:
    """One documented limitation of a backend: a failure at `stage` whose exception class
    matches `error_class` (regex, full match), whose message matches `message` (regex,
    searched) and one of whose frames (`file-stem.function`, `BackendResult.frames`) matches
    `frame` (regex, full match) is verdict `unsupported`, never a bug. `None` fields match
    anything."""

    reason: str
    stage: Stage | None = None
    error_class: str | None = None
    message: str | None = None
    frame: str | None = None

    def matches(self, result: BackendResult) -> bool:
        if not result.failed:
            return False
        if self.stage is not None and result.stage != self.stage:
            return False
        if self.error_class is not None and not re.fullmatch(self.error_class,
                                                             result.error_class or ""):
            return False
        if self.message is not None and not re.search(self.message, result.error_msg or ""):
            return False
        if self.frame is not None and not any(re.fullmatch(self.frame, f)
                                              for f in result.frames):
            return False
        return True


@dataclass(frozen=True)
class ReproBodies:
    """The script parts (modules, by dotted name: the backend's own, in its folder) a
    backend's repro.py runs after the shared parts (campaign/backends/repro_scripts: the
    prelude) and the torch program, by test: `infer` (an inference test's, and a gradient
    test's forward), `dynshape` (a dynamic-shape test's; None: no reproducer of one),
    `training` (a gradient test's on a backend that trains its own way; None: torch autograd's
    `training` part, then `infer`), `transform` (a transform test's; None: it runs none),
    `cache` (a cache test's: its near-twin, then the test warm and cold; None: no reproducer
    of one, `campaign.triage.pipeline.cache_repro`)."""

    infer: tuple[str, ...]
    dynshape: tuple[str, ...] | None = None
    training: tuple[str, ...] | None = None
    transform: tuple[str, ...] | None = None
    cache: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ReproSpec:
    """How a backend's findings are reproduced by a standalone `repro.py`
    (`campaign.triage.pipeline.repro`, docs/triage.md): the script's body and the options it runs with.

    `kind`: the body (`ort`, `tvm`, `tvm_torch`, `inductor`, `onnx_export`: the parts of
    campaign/backends/repro_scripts it copies). `options`: plain data (repr-able), each written
    into the script as the constant of its name in capitals, which the body declares.
    `dialect` and `form`: the torch program the body compiles (None: it takes `model.onnx`).
    `trains`: it runs a gradient test's training step and a transform test's program.
    `adapts_dialect`: the backend's `ADAPTS_DIALECT` (`compiled_dialect`). `bodies`: the
    script parts of each kind of test (`ReproBodies`; None: no standalone reproducer)."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    dialect: str | None = None
    form: Any = None
    trains: bool = False
    adapts_dialect: bool = False
    bodies: ReproBodies | None = None

    @property
    def runs_transforms(self) -> bool:
        """Whether its reproducer compiles a transform test's program."""
        return self.trains and self.bodies is not None and self.bodies.transform is not None


def seeded_dialect(dialect: str | None, seed: int) -> str | None:
    """The dialect a test of this seed is compiled in by a backend of `dialect`: `mixed` picks
    `hop` or `python` by the seed (the same test always gets the same one)."""
    if dialect != "mixed":
        return dialect
    return "python" if random.Random(f"dialect/{seed}").random() < 0.5 else "hop"


def compiled_dialect(dialect: str | None, seed: int, allowed: tuple[str, ...] | None,
                 adapts: bool) -> str | None:
    """The dialect a test of this seed is compiled in by a backend of `dialect`
    (`seeded_dialect`), unless the test's mode runs only in `allowed` (None: any) and the
    backend `adapts`: then the first of those."""
    d = seeded_dialect(dialect, seed)
    if d is None or allowed is None or d in allowed or not adapts:
        return d
    return allowed[0]


def breaks_graph(configured: str | None, dialect: str) -> bool:
    """Whether a test compiled in `dialect` by a backend configured for `configured` runs
    without fullgraph: the python dialect's data-dependent branches break the graph, so a
    backend that was not configured for it (`mixed`, or one that adapts) lets them."""
    return dialect == "python" and configured != "python"


#: called with each stage just before it starts; a sandbox process installs one so that a
#: crash or hang is attributed to the stage it happened in
StageListener = Callable[[Stage], None]
_stage_listener: StageListener | None = None


def set_stage_listener(listener: StageListener | None) -> None:
    global _stage_listener
    _stage_listener = listener


def input_feed_sets(m: Materialized) -> list[dict[str, np.ndarray]]:
    """Per input set (`TestCase.feed_sets`): graph input name -> value, in graph input order
    (= the ONNX model's input order).

    A sandbox job carries these already (`feed_sets`), which spares ONNX-only backends parsing
    the graph text."""
    sets = getattr(m, "feed_sets", None)
    if sets is not None:
        return sets
    return m.tc.feed_sets()


class Backend(abc.ABC):
    """A compiler under test.

    Subclasses implement `_evaluate`, wrapping each stage in `self.stage(...)`: it compiles the
    test once and runs every input set, returning the outputs of set 0, then of set 1, ...
    (one flat list). They may list their known limitations in `UNSUPPORTED`, override
    `unavailable` (e.g. no GPU), `PRELOAD` and `prepare` (the modules a sandbox's fork server
    imports; the warm-ups each sandbox process runs before its first test) and `reset`
    (per-test cleanup).
    `evaluate` never raises for the compiler's failures.
    """

    name: str = "backend"
    target: str = "cpu"  #: `cpu` or `cuda` (the row's `target`)
    #: whether the worker may judge this backend's float mismatches with the float64 shadow
    shadow_judged: ClassVar[bool] = True
    #: whether it runs a gradient test's training step (forward outputs, then each leaf's
    #: gradient: docs/training.md); a backend that does not runs such a test's forward alone
    TRAINS: ClassVar[bool] = False
    #: whether it computes a transform test's torch.func transform (docs/training.md). One
    #: that trains without it refuses a transform test (`TestMode.refusal`), which is judged
    #: against the transform's results; one that does not train runs such a test's forward
    TRANSFORMS: ClassVar[bool] = False
    #: whether it compiles a test in the dialect its mode needs (`TestMode.dialects`) when
    #: its own is not one of them (`dialect_for`): a compiler does (the python dialect
    #: without fullgraph, as `mixed` runs it); torch eager does not, as in another dialect it
    #: would compute what the reference computes
    ADAPTS_DIALECT: ClassVar[bool] = False

    def takes_cache_tests(self) -> bool:
        """Whether it compiles a cache test twice, warm after its near-twin and cold, with its
        compile caches on (`campaign.modes.cache`); one that does not runs its forward."""
        return False
    #: how the torch module it compiles expresses control flow (`hop`, `python`, or `mixed`:
    #: per test, see `dialect_of`); None for backends that take the ONNX model (the row's
    #: `dialect` then stays the test's)
    dialect: str | None = None
    #: what the triage and the reports say of it (`BackendInfo`; None: `info_of`'s default)
    INFO: ClassVar[BackendInfo | None] = None
    #: known-unsupported features of this backend (verdict `unsupported`)
    UNSUPPORTED: ClassVar[tuple[KnownUnsupported, ...]] = ()
    #: GraphIR ops (nested ones included) whose tests this backend cannot even import: a
    #: documented gap of its frontend. Capability routing (`campaign.route`) sends it no test
    #: holding one (no row, counted as not applicable) and, when it would idle, has tests made
    #: without them. A gap outside this set still shows as `unsupported` rows.
    LACKS: ClassVar[frozenset[str]] = frozenset()
    #: GraphIR ops (nested ones included) whose gradient tests this backend cannot train: a
    #: documented gap of its backward (TVM's Gradient pass: no control flow, ops it has no
    #: gradient rule for). Capability routing sends it no gradient test holding one (no row,
    #: not applicable, by that op); its inference tests are routed by `LACKS` alone.
    TRAINING_LACKS: ClassVar[frozenset[str]] = frozenset()
    #: its Python code whose lines compiler coverage measures (`campaign.compiler_coverage`): path
    #: fragments matched anywhere in a file's path (`torch/_dynamo`); () for a compiler with
    #: next to no Python (ORT: a C++ library behind a thin binding), which is not measured;
    #: `campaign.compiler_coverage.packages.<spec>` overrides it
    COVERAGE_PACKAGES: ClassVar[tuple[str, ...]] = ()
    #: the front end another library provides that this backend's import stage runs
    #: (`torch.export`: the exporter and TVM's torch frontend both export, then decompose):
    #: an import failure with one cause signature in two compilers of one front end is one
    #: bug (`campaign.triage.pipeline.grouping`); None: the importer is the compiler's own
    FRONTEND: ClassVar[str | None] = None
    #: the same for its compile stage: what runs before the compiler's own code (torch.compile:
    #: Dynamo, AOT autograd and the higher-order ops, shared by Inductor and `aot_eager`); a
    #: compile failure with one cause signature (its throwing site included) in two compilers
    #: of one such front end is one bug: the one without the rest cannot have failed there
    COMPILE_FRONTEND: ClassVar[str | None] = None
    #: the configurations worth fuzzing (`campaign.backends.configs`): constructor options with
    #: their values; a test draws one by its seed when `sample_configs` > 0
    CONFIG_SPACE: ClassVar[tuple[Option, ...]] = ()
    #: options drawn only for a gradient test on a backend that trains (`TRAINS`): what
    #: shapes the backward
    TRAINING_SPACE: ClassVar[tuple[Option, ...]] = ()
    #: the fraction of tests that get a configuration drawn from `CONFIG_SPACE` (0: every test
    #: runs the spec's own; `campaign.backend_options.<b>.configs`, set by the worker)
    sample_configs: float = 0.0
    #: set by `make_backend`: the factory and the options it was built with (the registered
    #: defaults and the spec's), so that `variant` builds the same backend with other options
    _factory: BackendFactory | None = None
    _options: dict[str, Any] = {}  # never changed in place: make_backend sets its own
    #: the options the spec itself writes (`inductor?cpp_wrapper=true`): never drawn
    _fixed: frozenset[str] = frozenset()

    #: the heavy modules its sandbox processes need: the fork server imports them once, before
    #: it forks any (`campaign.sandbox`, the process model); importing must start no thread,
    #: no device and no autograd
    PRELOAD: ClassVar[tuple[str, ...]] = ()

    # ---- hooks -------------------------------------------------------------------------------

    def lacks(self) -> frozenset[str]:
        """The ops this backend, as configured, cannot import (`LACKS`, and what an option
        adds: Inductor's C++ wrapper has no compile regions)."""
        return self.LACKS
    def prepare(self) -> None:
        """Import heavy modules and warm what a first compile would (a trivial program, never
        a test case) in the current process. A sandbox calls it in each new sandbox process
        before its first test, never in the process that forks: warm-ups may run autograd.
        Idempotent."""

    def child_init(self, work_dir: str) -> None:
        """Per-process setup inside a sandbox process (caches into `work_dir`, thread counts)."""

    def known_unsupported(self) -> tuple[KnownUnsupported, ...]:
        """The known limitations of this backend as configured (default: `UNSUPPORTED`)."""
        return self.UNSUPPORTED

    def unavailable(self) -> str | None:
        """Why this backend cannot run here (e.g. `cuda` target without a GPU), or None.
        Called where the backend runs (inside the sandbox process), at most once per process."""
        return None

    def reset(self) -> None:
        """Drop per-test state (compiled-code caches) after each evaluation."""

    @property
    def version(self) -> str:
        """The compiler's version, for probe caches and reports."""
        return "unknown"

    @property
    def is_gpu(self) -> bool:
        return self.target == "cuda"

    def stage_spec(self, compiler: str) -> str | None:
        """The backend spec that runs this backend's tests through an earlier stage of its
        compiler, `compiler` (torch.compile's `aot_eager`: Dynamo and AOT autograd without
        Inductor), with everything else as here; this backend's own spec when it is that
        stage; None when it has no such stage (the triage's ablations ask it:
        `campaign.triage.pipeline.training_ablation`)."""
        return None

    def repro_spec(self) -> ReproSpec | None:
        """How its findings are reproduced standalone (`ReproSpec`); None: they get no
        `repro.py`."""
        return None

    def dialect_for(self, tc: TestCase) -> str | None:
        """The dialect test `tc` is compiled in (`compiled_dialect`): its seed's, unless its
        mode runs only in others (`TestMode.dialects`) and this backend adapts
        (`ADAPTS_DIALECT`)."""
        return compiled_dialect(self.dialect, tc.seed, tc.mode.dialects(tc), self.ADAPTS_DIALECT)

    def dialect_of(self, seed: int) -> str | None:
        """The dialect a test of this seed is compiled in (`seeded_dialect`)."""
        return seeded_dialect(self.dialect, seed)

    # ---- configurations ----------------------------------------------------------------------
    def config_of(self, seed: int, graph: Graph | None = None,
                  trains: bool = False) -> dict[str, Any]:
        """The configuration a test of this seed (and `graph`, when known: options that do
        not apply to it are not drawn) runs (`campaign.backends.configs.draw`: {} is the
        backend's own; the same test always gets the same one); `trains`: a gradient test,
        which draws from `TRAINING_SPACE` too."""
        space = self.CONFIG_SPACE + (self.TRAINING_SPACE if trains and self.TRAINS else ())
        return draw(space, self._fixed, self.name, seed, self.sample_configs, graph)

    def merge_key(self, seed: int, graph: Graph | None = None) -> tuple[str | None, str]:
        """What tests merged into one module must share: the dialect and the configuration
        they are compiled in."""
        return self.dialect_of(seed), config_text(self.config_of(seed, graph))

    def variant(self, config: dict[str, Any]) -> Backend:
        """This backend with `config`'s options (built once per configuration, then kept)."""
        if not config:
            return self
        text = config_text(config)
        cache = self.__dict__.setdefault("_variants", {})
        if text not in cache:
            if self._factory is None:
                raise ValueError(f"backend {self.name}: not built by make_backend, so it has "
                                 "no configurations")
            v = self._factory(**{**self._options, **config})
            v.name, v._factory, v._fixed = self.name, self._factory, self._fixed
            v._options = {**self._options, **config}
            cache[text] = v
        return cache[text]

    # ---- evaluation --------------------------------------------------------------------------
    def evaluate(self, m: Materialized) -> BackendResult:
        """Evaluate `m` in the configuration its seed draws (`config_of`)."""
        config = (self.config_of(m.tc.seed, m.tc.graph, m.tc.mode.trains_on(self))
                  if self.sample_configs > 0 else {})
        if not config:
            return self._evaluate_as_configured(m)
        result = self.variant(config)._evaluate_as_configured(m)
        result.backend_config = config_text(config)
        return result

    def _evaluate_as_configured(self, m: Materialized) -> BackendResult:
        result = BackendResult()
        cpu0 = cpu_seconds()
        reason = self._unavailable_cached()
        if reason:
            return BackendResult(verdict=Verdict.SKIPPED, error_class="Unavailable",
                                 error_msg=reason)
        refusal = m.tc.mode.refusal(self, m.tc)
        if refusal:
            return BackendResult(verdict=Verdict.UNSUPPORTED, stage=Stage.IMPORT,
                                 error_class=f"{m.tc.mode.name.capitalize()}Unsupported",
                                 error_msg=refusal)
        try:
            result.outputs = [np.asarray(o) for o in self._evaluate(m, result)]
        except NotApplicable as e:
            result.outputs = None
            result.verdict = Verdict.SKIPPED
            result.error_class = "NotApplicable"
            result.error_msg = str(e)
        except StageFailed as f:
            root = root_error(f.error)
            result.outputs = None
            result.stage = f.stage
            result.error_class = type(root).__name__
            result.error_msg = str(root) or repr(root)
            if root is not f.error:
                outer = (str(f.error).strip().splitlines() or [""])[0]
                result.error_msg += f"\n(raised as {type(f.error).__name__}: {outer})"
            result.traceback = "".join(traceback.format_exception(f.error))
            result.frames = tuple(python_frames(
                "".join(traceback.format_exception(type(root), root, root.__traceback__,
                                                   chain=False))))
            for known in self.known_unsupported():
                if known.matches(result):
                    result.verdict = Verdict.UNSUPPORTED
                    result.error_msg = f"{known.reason}: {result.error_msg}"
                    break
        except Exception as e:  # outside every stage: the harness (our code) failed
            result.outputs = None
            result.stage = Stage.UNKNOWN
            result.verdict = Verdict.INVALID
            result.error_class = type(e).__name__
            result.error_msg = f"harness error in backend {self.name}: {e}"
            result.harness = True
            result.traceback = traceback.format_exc()
        finally:
            try:
                self.reset()
            except Exception:  # a failed cleanup must not lose the result
                pass
            result.cpu_ms = 1e3 * (cpu_seconds() - cpu0)
        return result

    def _unavailable_cached(self) -> str | None:
        if not hasattr(self, "_unavailable_reason"):
            self._unavailable_reason = self.unavailable()
        return self._unavailable_reason

    @abc.abstractmethod
    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        """Compile and run; wrap each stage with `stage()` so failures are attributed."""

    def run_sets(self, sets: list, run: Callable[[Any], list], result: BackendResult) -> list:
        """Run every input set (`run(set) -> outputs`) as stage `run`, in order, recording the
        set being run (`result.input_set`); one flat list of outputs. A backend that compiled
        once before (ORT, TVM) and did not count its compiles reports [1, 0, ...]."""
        out: list = []
        for k, s in enumerate(sets):
            result.input_set = k
            out += self.stage(Stage.RUN, partial(run, s), result, "run_ms")
        result.input_set = None
        if result.compiles is None:
            result.compiles = [1] + [0] * (len(sets) - 1)
        return out

    @staticmethod
    def stage(stage: Stage, fn: Callable[[], Any], result: BackendResult | None = None,
              timing: str | None = None) -> Any:
        """Run `fn` as `stage`: announce it (sandbox stage attribution), time it into
        `result.<timing>` (accumulating), and turn its exception into `StageFailed`."""
        if _stage_listener is not None:
            _stage_listener(stage)
        t0 = time.perf_counter()
        try:
            return fn()
        except Exception as e:  # the backend's failure is a finding, not our crash
            raise StageFailed(stage, e) from e
        finally:
            if result is not None and timing:
                spent = (time.perf_counter() - t0) * 1e3
                setattr(result, timing, (getattr(result, timing) or 0.0) + spent)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} target={self.target}>"


# ---- the registry ------------------------------------------------------------------------------

BackendFactory = Callable[..., Backend]


#: the trackers (GitHub repositories) a report can go to (`BackendInfo.tracker`)
PYTORCH, TVM_TRACKER, ORT_TRACKER = "pytorch/pytorch", "apache/tvm", "microsoft/onnxruntime"
#: the stack of a backend that states none (a user's own, a test double): all dynsmith tests
WHOLE_STACK = ("torch", "onnxruntime", "apache-tvm")


@dataclass(frozen=True)
class BackendInfo:
    """What the triage, the bug database and the reports say of a backend, stated beside it
    (`Backend.INFO`, or per registered name: `register(..., info=)`; `info_of(spec)` reads
    it): `display`, the compiler's name in a report's title and summary; `packages`, the
    distributions its stack is made of (the versions a bug's sighting records); `tracker`,
    the repository its bugs are reported to (whose template report.md follows)."""

    display: str
    packages: tuple[str, ...] = WHOLE_STACK
    tracker: str = PYTORCH
    #: how it trains a gradient test, when in its own way, as a report says it (`{leaves}`:
    #: the leaves, in backticks); None: torch autograd's training step
    own_training: str | None = None


@dataclass(frozen=True)
class _Entry:
    """A registered preset: `factory` with default options; calling it makes the backend.
    `info`: what is said of it, when not its class's `INFO`."""

    factory: BackendFactory
    defaults: dict[str, Any]
    info: BackendInfo | None = None

    def __call__(self, **options: Any) -> Backend:
        return self.factory(**{**self.defaults, **options})


class BackendRegistry(dict):
    """Registered backend names -> factories. `spec in BACKENDS` is true for any spec that
    `make_backend` accepts (registered names, options, importable dotted paths), so a config
    check (`b not in BACKENDS`) accepts users' own backends; iteration lists registered names."""

    def __contains__(self, spec: object) -> bool:
        if not isinstance(spec, str):
            return False
        if dict.__contains__(self, spec):
            return True
        try:
            _resolve(spec)
        except ValueError:
            return False
        return True

    def __setitem__(self, name: str, factory: BackendFactory) -> None:
        """`BACKENDS[name] = factory` registers like `register(name, factory)`."""
        entry = factory if isinstance(factory, _Entry) else _Entry(factory, {})
        dict.__setitem__(self, name, entry)

    def names(self) -> Iterator[str]:
        return iter(sorted(dict.keys(self)))


BACKENDS: BackendRegistry = BackendRegistry()


def register(name: str, factory: BackendFactory | None = None,
             info: BackendInfo | None = None, **defaults: Any):
    """Register `factory(**defaults, **options)` as backend `name` (`info`: what is said of
    it, when not its class's `INFO`); usable as a decorator."""

    def deco(f: BackendFactory) -> BackendFactory:
        BACKENDS[name] = _Entry(f, dict(defaults), info)
        return f

    return deco(factory) if factory is not None else deco


def info_of(spec: str) -> BackendInfo:
    """What is said of backend `spec` (`BackendInfo`): its registered name's, else its
    class's `INFO`, else (a user's own backend, or a spec that does not resolve) its name and
    the whole stack, reported to PyTorch."""
    name = spec.partition("?")[0]
    entry = dict.get(BACKENDS, name)
    if entry is not None and entry.info is not None:
        return entry.info
    try:
        factory, _ = _resolve(spec)
    except ValueError:
        return BackendInfo(name)
    info = getattr(factory, "INFO", None)
    return info if isinstance(info, BackendInfo) else BackendInfo(name)


def frontend_of(spec: str, stage: str | None = "import") -> str | None:
    """The shared front end a backend spec runs in `stage` (`Backend.FRONTEND` for import,
    `Backend.COMPILE_FRONTEND` for compile); None if it has none there or the spec does not
    resolve."""
    attr = {"import": "FRONTEND", "compile": "COMPILE_FRONTEND"}.get(stage or "")
    if attr is None:
        return None
    try:
        factory, _ = _resolve(spec)
    except ValueError:
        return None
    return getattr(factory, attr, None)


def _import_dotted(path: str) -> BackendFactory:
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ValueError(f"unknown backend {path!r} (known: {', '.join(BACKENDS.names())}; "
                         "or a dotted path like mypkg.mod:MyBackend)")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"backend {path!r}: cannot import module {module!r}: {e}") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"backend {path!r}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"backend {path!r}: {attr!r} is not a class or factory")
    return obj


def _resolve(spec: str) -> tuple[BackendFactory, dict[str, Any]]:
    base, options = parse_spec(spec)
    entry = dict.get(BACKENDS, base)
    if entry is not None:
        return entry.factory, {**entry.defaults, **options}
    if "." not in base and ":" not in base:
        raise ValueError(f"unknown backend {base!r} (known: {', '.join(BACKENDS.names())}; "
                         "or a dotted path like mypkg.mod:MyBackend)")
    return _import_dotted(base), options


def _unknown_options(factory: BackendFactory, options: dict[str, Any]) -> str:
    """"unknown option 'x' (known: a, b)" when `factory` takes no option of that name."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return ""
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return ""
    known = [n for n, p in params.items()
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    bad = [k for k in options if k not in known]
    if not bad:
        return ""
    return f"unknown option {bad[0]!r} (known: {', '.join(known) or 'none'})"


def make_backend(spec: str) -> Backend:
    """Build the backend a config names (see the module doc for the forms of `spec`).
    Raises ValueError with a one-line message for an unknown name, a bad option or an
    unimportable path."""
    factory, options = _resolve(spec)
    unknown = _unknown_options(factory, options)
    if unknown:
        raise ValueError(unknown if unknown.startswith("backend") else f"backend {spec!r}: {unknown}")
    try:
        backend = factory(**options)
    except (TypeError, ValueError) as e:  # a bad value (the factory checks its options)
        raise ValueError(f"backend {spec!r}: {e}") from None
    if not isinstance(backend, Backend):
        raise ValueError(f"backend {spec!r}: the factory returned {type(backend).__name__}, "
                         "not a campaign.backends.Backend")
    backend.name = spec
    backend._factory, backend._options = factory, dict(options)
    backend._fixed = frozenset(parse_spec(spec)[1])
    if backend.CONFIG_SPACE or backend.TRAINING_SPACE:
        from campaign.backends.configs import check_space

        check_space(backend.CONFIG_SPACE + backend.TRAINING_SPACE,
                    list(inspect.signature(factory).parameters), spec)
    return backend
