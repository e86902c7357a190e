"""Apache TVM Relax: ONNX import (`relax.frontend.onnx.from_onnx`), compile, run on the Relax VM.

Stages: import = `from_onnx` (ONNX initializers become constants of the module, the importer's
default `keep_params_in_input=False`, so the compiler sees real weights to fold; only the graph
inputs are fed at run time, positionally in ONNX input order); compile = `tvm.compile` with a
Relax pipeline under `PassContext(opt_level)`; run = build the VM, copy the inputs, call `main`.

`RelaxBackend` is the compile and run every TVM backend shares: `tvm` here imports the ONNX
model, `tvm_torch` (`campaign.backends.tvm_torch`) the `torch.export` of the torch module.

Registered: `tvm` (llvm), `tvm_cuda`. Options: `target` (`llvm` | `cuda`), `opt_level` (0-3,
default 3), `pipeline`: `fused` (default: `relax.get_default_pipeline(target)`, which fuses
operators) or `default` (TVM's `default_build` pipeline: legalize and build, no fusion).
"""
from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import Backend, BackendResult, KnownUnsupported, input_feed_sets, register
from campaign.backends.configs import Option
from campaign.verdict import Stage

#: TVM 0.27's Relax ONNX importer has no converter for these: a gap, not a bug. Any other op
#: in the same message is a new gap and stays a crash, so it is seen.
TVM_MISSING_CONVERTERS = ("Loop", "Scan", "SequenceConstruct", "SequenceAt", "SequenceInsert",
                          "SequenceEmpty", "ConcatFromSequence", "SplitToSequence",
                          "LSTM", "GRU", "RNN")
_MISSING = "|".join(TVM_MISSING_CONVERTERS)

#: an explicit dtype check in TOPI's layer_norm (float64 is refused by design), whatever the
#: frontend
TVM_LAYER_NORM_DTYPES = KnownUnsupported(
    "TVM's layer_norm supports only float32 and float16", Stage.COMPILE, r"InternalError",
    r"layer_norm: only support float32 and float16")

TVM_UNSUPPORTED = (
    KnownUnsupported(
        "TVM's Relax ONNX importer does not support this operator", Stage.IMPORT,
        r"OpNotImplemented",
        rf"operators are not supported for frontend ONNX: (?:(?:{_MISSING})(?:, |$))+\s*$"),
    # the same gap inside an If body (nested control flow): the importer checks only the
    # top-level graph up front and meets the op when it converts the body
    KnownUnsupported(
        "TVM's Relax ONNX importer does not support this operator (inside an If body)",
        Stage.IMPORT, r"NotImplementedError", rf"^Operator (?:{_MISSING}) not implemented\.$"),
    # the importer turns `Shape` into a Relax ShapeExpr and refuses it as an input of any op
    # outside a short list (Reshape, Expand, Slice, Concat, Gather, ...): e.g. a Split whose
    # sizes are computed from a symbolic dim (dynamic-shape tests, docs/dynshape.md)
    KnownUnsupported("TVM's Relax ONNX importer takes a computed shape only in a few ops",
                     Stage.IMPORT, r"ValueError", r"cannot handle ShapeExpr inputs"),
    TVM_LAYER_NORM_DTYPES,
)


#: the GraphIR ops that become the ONNX ops above (`loop` -> Loop, `scan` -> Scan, the
#: recurrent cells -> LSTM/GRU/RNN): their tests are not sent to TVM (capability routing)
TVM_LACKS = frozenset({"loop", "scan", "lstm", "gru", "rnn"})


def _cpu_has(*flags: str) -> bool:
    """Whether this machine's CPU has every flag (/proc/cpuinfo; False where unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            have = set(next((ln for ln in f if ln.startswith("flags")), "").split())
    except OSError:
        return False
    return set(flags) <= have


#: TVM's configuration space on CPU (docs/configs.md)
TVM_SPACE = (
    Option("opt_level", (3, 0, 1, 2), "the PassContext level: which Relax/TIR passes run"),
    Option("pipeline", ("fused", "default"), "TVM's default_build pipeline (legalize and "
           "build, no operator fusion) instead of the fused one"),
    Option("mcpu", (None, "haswell"), "LLVM code for an AVX2 CPU (-mcpu=haswell) instead of "
           "the generic x86-64 target: the vectorized schedules' instruction selection",
           available=lambda: _cpu_has("avx2", "fma")),
)


class RelaxBackend(Backend):
    """TVM Relax on one target (llvm or cuda), whatever the frontend: a subclass imports a test
    into a Relax `IRModule` (`_import`, stage import), and this class compiles it with a Relax
    pipeline under `PassContext(opt_level)` (stage compile) and runs `main` on the Relax VM once
    per input set (stage run). Every TVM backend compiles and runs this one way, so a
    difference between two of them is their frontends'.

    Options (the same for every subclass): `target` (`llvm` | `cuda`), `opt_level` (0-3),
    `pipeline` (`fused`: `relax.get_default_pipeline(target)`; `default`: `default_build`),
    `mcpu` (the llvm target's CPU); the configuration space `TVM_SPACE` draws them per test.
    """

    #: the name option errors start with (`tvm: opt_level must be 0..3, got 9`)
    kind: ClassVar[str] = "tvm"
    CONFIG_SPACE: ClassVar[tuple[Option, ...]] = TVM_SPACE
    #: the Relax frontends, passes (tvm/relax/transform), pipeline and VM build: TVM's Python
    #: under tvm/relax (the passes' C++ is not measured)
    COVERAGE_PACKAGES: ClassVar[tuple[str, ...]] = ("tvm/relax",)

    def __init__(self, target: str = "llvm", opt_level: int = 3, pipeline: str = "fused",
                 mcpu: str | None = None):
        if target not in ("llvm", "cuda"):
            raise ValueError(f"{self.kind}: target must be llvm or cuda, got {target!r}")
        if pipeline not in ("fused", "default"):
            raise ValueError(f"{self.kind}: pipeline must be fused or default, got {pipeline!r}")
        if not 0 <= int(opt_level) <= 3:
            raise ValueError(f"{self.kind}: opt_level must be 0..3, got {opt_level!r}")
        if mcpu is not None and target != "llvm":
            raise ValueError(f"{self.kind}: mcpu is an llvm option, got target {target!r}")
        if mcpu is not None and not str(mcpu).replace("-", "").isalnum():
            raise ValueError(f"{self.kind}: bad mcpu {mcpu!r}")
        self.name = self.kind
        self.tvm_target = target
        #: the llvm target's CPU (None: TVM's generic x86-64)
        self.mcpu = mcpu
        self.target = "cuda" if target == "cuda" else "cpu"
        self.opt_level = int(opt_level)
        self.pipeline = pipeline

    def prepare(self) -> None:
        import tvm  # noqa: F401
        from tvm import relax  # noqa: F401

    @property
    def version(self) -> str:
        import tvm

        return f"tvm-{tvm.__version__}"

    def unavailable(self) -> str | None:
        if not self.is_gpu:
            return None
        import tvm

        if not tvm.cuda(0).exist:
            return "tvm target cuda needs a CUDA GPU, and none is visible here"
        return None

    def _device(self) -> Any:
        import tvm

        return tvm.cuda(0) if self.is_gpu else tvm.cpu(0)

    @abc.abstractmethod
    def _import(self, m: Materialized, result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        """The test as a Relax `IRModule` whose `main` takes the graph inputs positionally,
        and per input set those inputs in that order; wraps its work in `stage(IMPORT)`."""

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        mod, sets = self._import(m, result)
        return self.compile_and_run(mod, sets, result)

    def compile_and_run(self, mod: Any, sets: list[list[np.ndarray]],
                        result: BackendResult) -> list[np.ndarray]:
        """Compile `mod` (stage compile), build the VM and call `main` on each input set
        (stage run); the outputs of every set, in order, as one flat list."""
        import tvm
        from tvm import relax

        target = tvm.target.Target(self.tvm_target if self.mcpu is None
                                   else {"kind": self.tvm_target, "mcpu": self.mcpu})

        def build() -> Any:
            pipeline = (relax.get_default_pipeline(target) if self.pipeline == "fused"
                        else "default")
            with tvm.transform.PassContext(opt_level=self.opt_level):
                return tvm.compile(mod, target=target, relax_pipeline=pipeline)

        ex = self.stage(Stage.COMPILE, build, result, "compile_ms")
        dev = self._device()
        vm = self.stage(Stage.RUN, lambda: relax.VirtualMachine(ex, dev), result, "run_ms")

        def run(feeds: list[np.ndarray]) -> list[np.ndarray]:
            args = [tvm.runtime.tensor(np.asarray(x), dev) for x in feeds]
            return _to_numpy(vm["main"](*args))

        return self.run_sets(sets, run, result)


class TvmBackend(RelaxBackend):
    """TVM Relax through its ONNX importer."""

    UNSUPPORTED = TVM_UNSUPPORTED
    LACKS = TVM_LACKS

    def prepare(self) -> None:
        super().prepare()
        from tvm.relax.frontend import onnx  # noqa: F401

    def _import(self, m: Materialized, result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        from tvm.relax.frontend.onnx import from_onnx

        model = m.onnx_model
        mod = self.stage(Stage.IMPORT, lambda: from_onnx(model), result, "compile_ms")
        return mod, [list(feeds.values()) for feeds in input_feed_sets(m)]


def _to_numpy(out: Any) -> list[np.ndarray]:
    """The VM's result (a tensor, or a tuple/Array of them) as numpy arrays, in order."""
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [o.numpy() for o in out]


register("tvm", TvmBackend, target="llvm")
register("tvm_cuda", TvmBackend, target="cuda")
