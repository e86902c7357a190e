"""Apache TVM Relax: ONNX import (`relax.frontend.onnx.from_onnx`), compile, run on the Relax VM.

Stages: import = `from_onnx` (ONNX initializers become constants of the module, the importer's
default `keep_params_in_input=False`, so the compiler sees real weights to fold; only the graph
inputs are fed at run time, positionally in ONNX input order); compile = `tvm.compile` with a
Relax pipeline under `PassContext(opt_level)`; run = build the VM, copy the inputs, call `main`.

`RelaxBackend` is the compile and run every TVM backend shares: `tvm` here imports the ONNX
model, `tvm_torch` (`campaign.backends.tvm_torch`) the `torch.export` of the torch module.

Gradient tests (docs/training.md): `tvm` trains with TVM's own reverse mode, a second autodiff
beside eager autograd. Import: the ONNX model with the leaf params moved from initializers to
graph inputs (after the graph inputs, in graph order), so `main` takes every leaf as a param;
then `main`'s bindings re-emitted into one function `loss(inputs..., leaf params...,
cotangents...)` returning `(L, outputs...)`, with `L = sum_i sum(o_i * c_i)` over the float
outputs with a cotangent (each term cast to float32: dL/dterm is 1 whatever the sum's dtype):
the forward, so a failure there (an imported output no tensor, which the multiply's type check
rejects) is the import's, not the backward's. Compile:
`relax.transform.Gradient("loss", require_grads=<the leaves, in GradSpec order>)` adds
`loss_adjoint`, which returns `((L, outputs...), (grad per leaf...))`; the module (without
`loss`) is built as an inference one. Run: `loss_adjoint` per input set; its outputs, then its
gradients. What the pass cannot differentiate (an op without `FPrimalGradient`, a `call_tir`,
control flow: `TVM_GRADIENT_UNSUPPORTED`) is verdict `unsupported`. The code that trains is
the repro's (campaign/backends/tvm/relax_training.py), so a gradient test's
repro.py trains as the backend does.

Registered: `tvm` (llvm), `tvm_cuda`. Options: `target` (`llvm` | `cuda`), `opt_level` (0-3,
default 3), `pipeline`: `fused` (default: `relax.get_default_pipeline(target)`, which fuses
operators) or `default` (TVM's `default_build` pipeline: legalize and build, no fusion).
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import (
    TVM_TRACKER,
    Backend,
    BackendInfo,
    BackendResult,
    KnownUnsupported,
    ReproBodies,
    ReproSpec,
    input_feed_sets,
    register,
)
from campaign.backends.configs import Option
from campaign.verdict import Stage

if TYPE_CHECKING:
    from ir.core.graph import Graph
    from ir.materialize.grad import GradSpec

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

#: `relax.transform.Gradient` (src/relax/transform/gradient.cc) in TVM 0.27: what it cannot
#: differentiate, a documented gap of the pass (a gradient test's compile stage), never a bug.
#: The ops with a gradient are those `tvm/relax/op/_op_gradient.py` registers: elementwise
#: arithmetic and comparisons, abs/cos/exp/log/negative/sigmoid/sin/sqrt/tanh, sum/mean/
#: variance, permute_dims/concat/split/expand_dims/reshape/cumsum/broadcast_to/take/where,
#: matmul, astype, relu/silu/softmax/log_softmax, conv2d, max_pool2d/avg_pool2d (and the
#: creation ops). Probed per GraphIR op: no gradient for acos/asin/atan/cosh/sinh/tan, ceil/
#: floor/round/sign, erf and gelu, leaky_relu, hardsigmoid/hardswish (relax.clip),
#: batch_norm/layer_norm, reduce_max/reduce_min/max/min, reduce_prod, slice (strided_slice),
#: squeeze, tril, conv1d, conv_transpose2d, avgpool1d/maxpool1d, resize_*, writes through
#: views (scatter_elements, scatter_nd); a call_tir for clip, pad_*, tile, instance_norm
TVM_GRADIENT_UNSUPPORTED = (
    # the Relax op the importer lowered a GraphIR op to has no registered gradient
    KnownUnsupported(
        "TVM's Gradient pass has no gradient for this Relax op", Stage.COMPILE,
        r"InternalError", r"Attribute FPrimalGradient has not been registered for relax\."),
    # a TIR function the importer emitted (`emit_te`) has no gradient either
    KnownUnsupported(
        "TVM's Gradient pass cannot differentiate a call_tir", Stage.COMPILE, r"InternalError",
        r"Differentiation of call_tir op without registering corresponding gradient function "
        r"is not supported yet"),
    # control flow: the importer gives a graph with an If no dataflow block, and the pass
    # takes one dataflow block only
    KnownUnsupported(
        "TVM's Gradient pass takes no control flow", Stage.COMPILE, r"InternalError",
        r"now only support one dataflow block"),
    # documented: the gradients of concat and mean need static sizes (docs/findings F37)
    KnownUnsupported(
        "TVM's concat/mean gradients need static sizes (F37)", Stage.COMPILE, r"TypeError",
        r"Mismatched type on argument #1 when calling: `relax\.op\.split|int\(\) argument must "
        r"be"),
    # known bugs, found by dynsmith's gradient tests and documented: not found again
    KnownUnsupported(
        "TVM's triu gradient returns one partial for two arguments (F35)", Stage.COMPILE,
        r"InternalError", r"partials number != inputs number"),
    KnownUnsupported(
        "TVM's Gradient pass fails on a symbolic var in a shape argument (F36)", Stage.COMPILE,
        r"KeyError|InternalError", r"key is not in Map"),
)

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
#: recurrent cells -> LSTM/GRU/RNN), and `custom` and `region`, each a model-local ONNX
#: function, which TVM 0.27's ONNX frontend does not import ("The following operators are not
#: supported for frontend ONNX: k0_..."): their tests are not sent to TVM (capability routing)
TVM_LACKS = frozenset({"loop", "scan", "lstm", "gru", "rnn", "custom", "region"})

#: the GraphIR ops whose gradient tests `relax.transform.Gradient` cannot train (TVM 0.27):
#: control flow (`if`; the other control-flow ops are in `TVM_LACKS`), and ops whose Relax
#: lowering reaches an op without `FPrimalGradient` (`acos` -> R.acos, `slice` ->
#: R.strided_slice, `batch_norm` -> R.nn.batch_norm, ...) or a `call_tir` (`clip`, `pad_*`,
#: `tile`). Measured per op: gradient tests of that op alone on `tvm` (4 seeds each: every one
#: `unsupported` with TVM_GRADIENT_UNSUPPORTED's message), and, for ops the generator makes
#: rarely alone (conv1d, pools, resize), the Relax ops of their import checked in TVM's op
#: registry; tests/campaign/backends/test_tvm_grad.py checks the table against that registry.
#: `triu` is not here: its gradient rule exists and is wrong (F35), a bug to keep finding.
TVM_TRAINING_LACKS = frozenset({
    "if", "acos", "asin", "atan", "avgpool1d", "batch_norm", "ceil", "clip", "conv1d",
    "conv_transpose2d", "cosh", "erf", "floor", "gelu", "hardsigmoid", "hardswish",
    "layer_norm", "leaky_relu", "max", "maxpool1d", "min", "pad_constant", "pad_reflect",
    "pad_replicate", "reduce_max", "reduce_min", "reduce_prod", "resize_linear",
    "resize_nearest", "round", "sign", "sinh", "slice", "squeeze", "tan", "tile", "tril"})


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


#: its repro.py's script parts (`ReproBodies`): Relax from model.onnx (symbolic dims
#: included); a gradient test trains with relax.transform.Gradient
TVM_BODIES = ReproBodies((f"{__name__}.relax", f"{__name__}.repro"),
                         dynshape=(f"{__name__}.relax", f"{__name__}.repro"),
                         training=(f"{__name__}.relax", f"{__name__}.relax_training",
                                   f"{__name__}.repro"))

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

    PRELOAD: ClassVar[tuple[str, ...]] = ("tvm", "tvm.relax", "onnx")

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

    def relax_options(self) -> dict[str, Any]:
        """The options of compile and run, for a repro (campaign/backends/tvm/relax.py); no pass is
        switched off (`disabled_pass`: what the repro's localization changes)."""
        return {"target": self.tvm_target, "mcpu": self.mcpu, "opt_level": self.opt_level,
                "pipeline": self.pipeline, "disabled_pass": []}

    def _device(self) -> Any:
        import tvm

        return tvm.cuda(0) if self.is_gpu else tvm.cpu(0)

    @abc.abstractmethod
    def _import(self, m: Materialized, result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        """The test as a Relax `IRModule` whose `main` takes the graph inputs positionally,
        and per input set those inputs in that order; wraps its work in `stage(IMPORT)`."""

    def _import_training(self, m: Materialized,
                         result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        """A gradient test as a Relax `IRModule` whose `main` takes the graph inputs, then the
        leaf params (in graph order), and per input set those values in that order; only a
        backend that trains (`TRAINS`) implements it."""
        raise NotImplementedError(f"{self.kind} does not train")

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        grad = m.tc.grad if self.TRAINS else None
        if grad is None:
            mod, sets = self._import(m, result)
            return self.compile_and_run(mod, sets, result)
        mod, sets = self._import_training(m, result)
        g = m.tc.graph
        # the loss is the forward re-emitted (its multiply by the cotangents reads the
        # imported outputs): a failure making it is the import's, before any backward
        loss_mod, cts = self.stage(Stage.IMPORT, lambda: training_loss(mod, g, grad), result,
                                   "compile_ms")
        adjoint = self.stage(Stage.COMPILE, lambda: gradient_module(loss_mod, g, grad), result,
                             "compile_ms")
        sets = [feeds + [np.asarray(grad.cotangents[k][g.outputs[i]]) for i in cts]
                for k, feeds in enumerate(sets)]
        return self.compile_and_run(adjoint, sets, result, func=ADJOINT, unpack=_training_results)

    def compile_and_run(self, mod: Any, sets: list[list[np.ndarray]], result: BackendResult,
                        func: str = "main", unpack: Any = None) -> list[np.ndarray]:
        """Compile `mod` (stage compile), build the VM and call `func` on each input set
        (stage run); the outputs of every set, in order, as one flat list (`unpack`: the VM
        result of one set as arrays, default `_to_numpy`)."""
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
            return (unpack or _to_numpy)(vm[func](*args))

        return self.run_sets(sets, run, result)


class TvmBackend(RelaxBackend):
    """TVM Relax through its ONNX importer; trains gradient tests with TVM's reverse mode."""

    INFO = BackendInfo(
        "TVM Relax (ONNX importer)", ("apache-tvm", "onnx"), TVM_TRACKER,
        own_training="A training step, TVM's own reverse mode: the ONNX model with the leaf "
                     "params as graph inputs, imported by `from_onnx`; its `main` re-emitted "
                     "as the loss `L = sum_i sum(out_i * c_i)` over the float outputs, with "
                     "the fixed cotangents `c_i` of `cotangents.npz`; "
                     "`relax.transform.Gradient` with respect to {leaves}; the expected "
                     "outputs and gradients are eager autograd's (`expected.npz`, float64 in "
                     "`truth.npz`). `repro.py` (`train_relax`) computes and compares them.")

    #: the importer's gaps, and the Gradient pass's (met by gradient tests only)
    UNSUPPORTED = TVM_UNSUPPORTED + TVM_GRADIENT_UNSUPPORTED
    LACKS = TVM_LACKS
    TRAINING_LACKS = TVM_TRAINING_LACKS
    #: a gradient test trains with `relax.transform.Gradient` (the module doc)
    TRAINS = True

    PRELOAD: ClassVar[tuple[str, ...]] = ("tvm", "tvm.relax", "tvm.relax.frontend.onnx", "onnx")

    def prepare(self) -> None:
        super().prepare()
        from tvm.relax.frontend import onnx  # noqa: F401

    def repro_spec(self) -> ReproSpec:
        """`model.onnx` through the ONNX frontend, then compiled and run
        (campaign/backends/tvm/repro.py); a gradient test trains as `_evaluate` does
        (campaign/backends/tvm/relax_training.py, whose functions this backend uses)."""
        return ReproSpec("tvm", self.relax_options(), trains=True,
                         bodies=TVM_BODIES)

    def _import(self, m: Materialized, result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        from tvm.relax.frontend.onnx import from_onnx

        model = m.onnx_model
        mod = self.stage(Stage.IMPORT, lambda: from_onnx(model), result, "compile_ms")
        return mod, [list(feeds.values()) for feeds in input_feed_sets(m)]

    def _import_training(self, m: Materialized,
                         result: BackendResult) -> tuple[Any, list[list[np.ndarray]]]:
        from tvm.relax.frontend.onnx import from_onnx

        assert m.tc.grad is not None
        model, values = leaf_params_as_inputs(m.onnx_model, m.tc.graph, m.tc.grad.leaves)
        mod = self.stage(Stage.IMPORT, lambda: from_onnx(model), result, "compile_ms")
        return mod, [list(feeds.values()) + values for feeds in input_feed_sets(m)]


#: the function `relax.transform.Gradient` makes of the loss function `loss`
ADJOINT = "loss_adjoint"


def leaf_params_as_inputs(model: Any, g: Graph,
                          leaves: tuple[str, ...]) -> tuple[Any, list[np.ndarray]]:
    """A copy of the ONNX `model` of `g` whose leaf params (of `leaves`) are graph inputs,
    after the graph's own, in graph order, instead of initializers; and their values (the
    initializers'), in that order (`relax_training.leaf_params_as_inputs`, which the repro
    copies)."""
    from campaign.backends.tvm.relax_training import leaf_params_as_inputs

    return leaf_params_as_inputs(model, [p.name for p in g.params], leaves)


def training_loss(mod: Any, g: Graph, spec: GradSpec) -> tuple[Any, list[int]]:
    """The loss module of the gradient test of `g` (`spec`), from the imported `mod` whose
    `main` takes the graph inputs, then the leaf params (graph order): `main`'s bindings
    re-emitted into `loss`, which returns `(L, outputs...)` (the module doc); and the indices
    of the outputs with a cotangent, whose cotangents `loss` takes after `main`'s params. The
    repro's own code (campaign/backends/tvm/relax_training.py: `loss_module`)."""
    from campaign.backends.tvm.relax_training import loss_module

    n_params = len(mod["main"].params)
    leaf_params = [p.name for p in g.params if p.name in spec.leaves]
    if n_params != len(g.inputs) + len(leaf_params):
        raise ValueError(f"the imported main takes {n_params} params, expected "
                         f"{len(g.inputs)} inputs and {len(leaf_params)} leaf params")
    cts = [i for i, o in enumerate(g.outputs) if o in spec.cotangents[0]]
    return loss_module(mod, cts, len(g.outputs)), cts


def gradient_module(loss_mod: Any, g: Graph, spec: GradSpec) -> Any:
    """The module whose `loss_adjoint` trains the gradient test of `g` (`spec`):
    `relax.transform.Gradient` of `training_loss`'s `loss_mod` (the module doc). The repro's
    own code (campaign/backends/tvm/relax_training.py: `differentiate`)."""
    from campaign.backends.tvm.relax_training import differentiate

    leaf_params = [p.name for p in g.params if p.name in spec.leaves]
    return differentiate(loss_mod, [v.name for v in g.inputs], leaf_params, spec.leaves)


def _training_results(out: Any) -> list[np.ndarray]:
    """`loss_adjoint`'s result `((L, outputs...), (grads...))` as the outputs, then the
    gradients (`relax_training.training_results`)."""
    from campaign.backends.tvm.relax_training import training_results

    return training_results(out)


def _to_numpy(out: Any) -> list[np.ndarray]:
    """The VM's result (a tensor, or a tuple/Array of them) as numpy arrays, in order."""
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [o.numpy() for o in out]


register("tvm", TvmBackend, target="llvm")
register("tvm_cuda", TvmBackend, target="cuda")
