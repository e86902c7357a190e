"""torch.compile with the Inductor backend, on the torch module that interprets the graph
(`ir.materialize.to_torch.GraphModule`: params are buffers, forward takes the graph inputs).

Control flow is expressed in the module's `dialect`: `hop` (default: `torch.cond`, a
higher-order op Dynamo captures whole, so Inductor compiles both branches) or `python` (plain
`if` on the predicate's value: Dynamo graph-breaks, which `fullgraph=True` refuses:
`unsupported`), or `mixed`: per test, by its seed, `hop` or `python`, the latter always with
`fullgraph=False` (graph breaks, guards and recompiles when another input set takes another
branch are the compiler path it tests). The row's `dialect` says which one a test used.

Stages: import = build the module and `torch.compile` it (cheap: Dynamo is lazy); compile = the
first call (Dynamo traces, Inductor generates and compiles code, then the code runs once);
run = a second call, whose outputs are the ones compared. `torch._dynamo.reset()` after every
test keeps compiled-code caches from growing without bound.

Cost (measured, one core): the first compile in a process costs 12-17 s, later ones 2-6 s.
The sandbox's fork server imports Dynamo and Inductor once (`PRELOAD`); `prepare`, in each new
sandbox process, compiles a trivial function forward and backward before the process takes its
first test (bench/sandbox_start.py measures what that adds to a process start).

Registered: `inductor` (cpu), `inductor_cuda`, `inductor_dynamic` (cpu, dynamic shapes).
Options: `device` (`cpu` | `cuda`), `fullgraph` (default true: a graph break is an error),
`dynamic` (default false; true: symbolic shapes), `dialect` (`hop` | `python` | `mixed`),
`unbacked` (dynamic-shape tests: `mark_unbacked` instead of `mark_dynamic`), the program's form
`scalars`, `params`, `inplace` (campaign/backends/forms.py; the row's `dialect` is its label).

Dynamic-shape tests (docs/dynshape.md): the module computes its shape arguments from its
inputs' sizes (`ir.materialize.dynshape.DynGraphModule`), `torch.compile(dynamic=None)` with every symbolic
input dim marked (`torch._dynamo.mark_dynamic`) on each call's inputs; the compiles of each
input set are counted (`CompileCounter`, `BackendResult.compiles`), so a recompile for a later
shape is seen.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, ClassVar

import numpy as np

from campaign.artifacts import Materialized
from campaign.backends.base import (
    Backend,
    BackendInfo,
    BackendResult,
    KnownUnsupported,
    NotApplicable,
    ReproBodies,
    ReproSpec,
    breaks_graph,
    register,
)
from campaign.backends.configs import Option, config_text
from campaign.backends.forms import FORM_SPACE, form_option
from campaign.backends.inductor import caches
from campaign.backends.inductor.shape_guards import (
    GuardLog,
    clear_guard_failures,
    guard_failure_reasons,
    recompile_cause,
)
from campaign.verdict import Stage
from ir.core.graph import Graph

INDUCTOR_UNSUPPORTED = (
    # with fullgraph=True Dynamo refuses what it cannot trace in one graph (data-dependent
    # Python control flow, unsupported builtins): a documented limit, not a miscompilation
    KnownUnsupported("Dynamo cannot capture this program as one graph (fullgraph=True)",
                     Stage.COMPILE, r"Unsupported|UserError", None),
)

#: with fullgraph=False (graph breaks allowed), Inductor's lowering of `torch.scan` to a
#: while_loop (fx_passes/post_grad.py) calls `.item()` on the loop index while the fake mode
#: has no shape environment for it, so every program holding a scan fails to compile
#: (pytorch#153437, open): a known bug, not found again (docs/findings.md says how it was
#: checked); with fullgraph=True the same programs compile
SCAN_WITH_GRAPH_BREAKS = KnownUnsupported(
    "torch.scan under fullgraph=False fails in Inductor's scan-to-while_loop lowering "
    "(pytorch#153437)", Stage.COMPILE, r"InductorError|DataDependentOutputException",
    r"DataDependentOutputException: aten\._local_scalar_dense", r"post_grad\.body_fn")

#: a torch.while_loop carrying a Python int (the loop counter in the form `scalars=number`):
#: Inductor fails before lowering (pytorch#166525, open; on torch 2.13 the message is
#: FakeTensorUpdater's, checked by hand with that issue's own reproducer): a known bug
WHILE_LOOP_INT_CARRY = KnownUnsupported(
    "torch.while_loop carrying a Python int fails in Inductor (pytorch#166525)", Stage.COMPILE,
    r"InductorError|AssertionError",
    r"A subgraph argument other than striding has been modified; FakeTensorUpdater cannot "
    r"update this argument")

#: gradient tests (docs/training.md): the backward of a torch.cond (or scan) with a bool or int
#: output beside a float one fails in the higher-order op's autograd, eager HOP included
#: (docs/findings F32, found by dynsmith): a known bug, not found again
COND_NON_FLOAT_BACKWARD = KnownUnsupported(
    "torch.cond/scan backward with a non-float output fails (F32)", None,
    r"InductorError|AssertionError", r"outs_to_grad length \(\d+\) != tangents length")

#: gradient tests: a compiled LSTM whose input does not require grad but whose weights do takes
#: the mkldnn inference path, whose workspace is None (docs/findings F33, pytorch#185163, open)
LSTM_MKLDNN_BACKWARD = KnownUnsupported(
    "compiled LSTM with a frozen input takes mkldnn's inference path (F33, pytorch#185163)", None,
    r"InductorError|AssertionError|TypeError",
    r"tensors_saved_with_vc_check to be Tensors|expected Tensor\(\) for op: "
    r"torch\.ops\.aten\.mkldnn_rnn_layer")

#: gradient tests: AOT autograd's compiled backward fails its version-counter check when the
#: partitioner saves (or recomputes from) an input that the runtime epilogue then mutates, as in
#: `a.mul_(y)` with `a` not requiring grad and `y` requiring it; eager runs it (pytorch#185497,
#: open; fix pytorch#185876 open; found again by gradient tests: docs/training.md)
SAVED_INPUT_MUTATED_BACKWARD = KnownUnsupported(
    "AOT autograd saves an input its runtime epilogue mutates (pytorch#185497)", None,
    r"RuntimeError|InductorError",
    r"one of the variables needed for gradient computation has been modified by an inplace "
    r"operation", r"runtime_wrappers\.\w+")

#: gradient tests: Inductor's C++ wrapper does not implement the backward of a while_loop
#: (`codegen_while_loop` raises it explicitly for `while_loop_stack_output`): a documented gap
CPP_WRAPPER_WHILE_LOOP_BACKWARD = KnownUnsupported(
    "Inductor's C++ wrapper has no while_loop backward (NYI)", None,
    r"InductorError|NotImplementedError", r"NYI cpp wrapper for while_loop_stack_output")

#: compile regions (`ir.ops.region`): Inductor's C++ wrapper does not implement
#: `invoke_subgraph` (`CppWrapperCpu.codegen_invoke_subgraph` raises it explicitly on 2.13 and
#: 2.14.1; implemented by pytorch#194703, after these releases): a documented gap
CPP_WRAPPER_INVOKE_SUBGRAPH = KnownUnsupported(
    "Inductor's C++ wrapper has no invoke_subgraph (compile regions; pytorch#194703)", None,
    r"InductorError|NotImplementedError",
    r"codegen invoke_subgraph is not implemented for cpp wrapper")

#: the configurations (cpp_wrapper or not) this process has compiled once already
_warmed: set[bool] = set()

#: constructor options that set a `torch._inductor.config` key for this backend's compiles
#: (compile_fx config_patches); None leaves Inductor's own default
INDUCTOR_FLAGS = {
    "freezing": "freezing",
    "pattern_matcher": "pattern_matcher",
    "split_reductions": "split_reductions",
    "aggressive_fusion": "aggressive_fusion",
    "max_fusion_size": "max_fusion_size",
    "layout_optimization": "layout_optimization",
    "loop_ordering_after_fusion": "loop_ordering_after_fusion",
    "reorder_for_locality": "reorder_for_locality",
    "inplace_buffers": "inplace_buffers",
    "allow_buffer_reuse": "allow_buffer_reuse",
    "memory_planning": "memory_planning",
    "joint_graph_constant_folding": "joint_graph_constant_folding",
    "comprehensive_padding": "comprehensive_padding",
    "simdlen": "cpp.simdlen",
    "loop_tail_vec": "cpp.enable_loop_tail_vec",
    "tiling_heuristics": "cpp.enable_tiling_heuristics",
}

#: Inductor's configuration space on CPU (docs/configs.md says why each option is there):
#: options that change which compiler code runs, from torch/_inductor/config.py's own
#: comments. Left out on purpose: options that change results by design (fast-math,
#: floating-point contraction, the decomposed tanh of pytorch#148241, fallback_random) or
#: only act on GPU (Triton, CUDA graphs), and size_asserts (it only removes checks).
INDUCTOR_SPACE = (
    Option("fullgraph", (True, False), "a graph break is allowed: Dynamo splits the program "
           "and guards on the pieces (hop dialect; the python dialect always allows them)"),
    Option("dynamic", (False, True, None), "symbolic sizes from the first compile (True) or "
           "after a recompile (None): the SymInt paths of lowering and codegen"),
    Option("mode", (None, "max-autotune-no-cudagraphs"), "autotuning: the C++ GEMM "
           "templates and their epilogue fusion for mm/conv on CPU"),
    Option("cpp_wrapper", (False, True), "the host code as C++ (AOTInductor's wrapper "
           "codegen, control flow included) instead of Python"),
    Option("freezing", (None, True), "weights become constants: constant folding, conv-bn "
           "folding and the frozen-weight layout passes"),
    Option("pattern_matcher", (None, False), "no pattern rewrites: the plain lowerings of what "
           "the patterns would replace"),
    Option("split_reductions", (None, False), "reductions in one kernel instead of split"),
    Option("aggressive_fusion", (None, True), "fusion of nodes without common reads"),
    Option("max_fusion_size", (None, 1, 8), "fusion capped: more, smaller kernels and the "
           "buffers between them"),
    Option("layout_optimization", (None, False), "no channels-last layout for convolutions"),
    Option("loop_ordering_after_fusion", (None, False), "no loop reordering after fusion"),
    Option("reorder_for_locality", (None, False), "no scheduler reordering for locality"),
    Option("inplace_buffers", (None, False), "no reuse of an input buffer as the output"),
    Option("allow_buffer_reuse", (None, False), "no buffer reuse across unrelated values"),
    Option("memory_planning", (None, True), "pooled allocation of intermediate buffers"),
    Option("joint_graph_constant_folding", (None, False), "no constant folding before "
           "partitioning"),
    Option("comprehensive_padding", (None, False), "no padding of strides for alignment"),
    Option("simdlen", (None, 0, 256), "C++ kernels without vectorization (0) or with 256-bit "
           "vectors (AVX2 codegen on an AVX-512 CPU)"),
    Option("loop_tail_vec", (None, False), "scalar instead of masked-vector loop tails"),
    Option("tiling_heuristics", (None, False), "no tiling-selection heuristics in C++ kernels"),
    *FORM_SPACE,
)


#: AOT autograd's options that shape a gradient test's backward (torch/_functorch/config.py),
#: drawn only for gradient tests (`Backend.TRAINING_SPACE`); docs/configs.md says why each
TRAINING_FLAGS = {
    "memory_budget": "activation_memory_budget",
    "donated_buffer": "donated_buffer",
    "recompute_views": "recompute_views",
    "ban_recompute_reductions": "ban_recompute_reductions",
    "ban_recompute_not_in_allowlist": "ban_recompute_not_in_allowlist",
    "eager_backward_lowering": "force_non_lazy_backward_lowering",
}

TRAINING_SPACE = (
    Option("memory_budget", (None, 0.0, 0.5), "the partitioner's activation memory budget: "
           "0 saves nothing and recomputes the forward in the backward, 0.5 solves which "
           "activations to save (the knapsack of the min-cut partitioner)"),
    Option("donated_buffer", (None, False), "no donation of saved activations' buffers to "
           "the backward"),
    Option("recompute_views", (None, True), "views recomputed in the backward instead of "
           "saved"),
    Option("ban_recompute_reductions", (None, False), "the partitioner may recompute "
           "reductions"),
    Option("ban_recompute_not_in_allowlist", (None, False), "the partitioner may recompute "
           "ops outside its allow-list"),
    Option("eager_backward_lowering", (None, True), "the backward graph compiled with the "
           "forward instead of at its first call"),
)


def _torch_input_sets(m: Materialized, device: str) -> list[list]:
    """Per input set, the graph inputs as tensors on `device`, in order."""
    import torch

    return [[torch.from_numpy(np.asarray(x)).to(device) for x in feeds.values()]
            for feeds in m.tc.feed_sets()]


def _copies(args: list) -> list:
    return [a.clone() for a in args]


def twin_arrays(g: Graph, values: dict[str, np.ndarray], strided: bool) -> list[np.ndarray]:
    """A cache test's near-twin's inputs: copies of `values` of `g`'s inputs, in column-major
    strides when `strided` (`caches.twin_arrays`)."""
    return caches.twin_arrays([v.name for v in g.inputs], values, strided)


#: the torch.compile backends this module runs (`compiler`): Inductor, and the stages before
#: it, which tell AOT autograd's faults from Inductor's (docs/training.md)
COMPILERS = ("inductor", "aot_eager", "aot_eager_decomp_partition", "eager")


#: its repro.py's script parts (`ReproBodies`): torch.compile of the torch program (its
#: shape guards' log for a dynamic-shape test; the torch.func program for a transform test;
#: the near-twin's and the test's programs with the caches on for a cache test)
TORCH_COMPILE_BODIES = ReproBodies(
    (f"{__name__}.torch_compile", f"{__name__}.repro"),
    dynshape=(f"{__name__}.shape_guards", f"{__name__}.torch_compile", f"{__name__}.repro_shapes"),
    transform=(f"{__name__}.torch_compile", f"{__name__}.repro_transform"),
    cache=(f"{__name__}.torch_compile", f"{__name__}.caches", f"{__name__}.repro_cache"))

class CompileCounter:
    """A torch.compile backend that counts the FX graphs it compiles with `compiler` (each
    compile and recompile of each graph-broken piece), under `config_patches` (options of
    `torch._inductor.config` for these compiles only: Inductor's)."""

    def __init__(self, config_patches: dict[str, Any] | None = None,
                 compiler: str = "inductor") -> None:
        self.n = 0
        self.config_patches = dict(config_patches or {})
        self.compiler = compiler

    def __call__(self, gm, example_inputs):
        self.n += 1
        if self.compiler != "inductor":
            from torch._dynamo.backends.registry import lookup_backend

            return lookup_backend(self.compiler)(gm, example_inputs)
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs, config_patches=self.config_patches)


def _outputs_numpy(out) -> list[np.ndarray]:
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return [o.detach().cpu().numpy() for o in out]


class InductorBackend(Backend):
    """`torch.compile(module, backend="inductor")` on one device (or one of the stages before
    Inductor, `compiler`). A gradient test trains: each call's forward outputs, then the
    gradients of its leaves by the compiled backward (`ir.materialize.grad.training_step`)."""

    INFO = BackendInfo("torch.compile (Inductor)", ("torch",))

    UNSUPPORTED = INDUCTOR_UNSUPPORTED
    CONFIG_SPACE = INDUCTOR_SPACE
    TRAINING_SPACE = TRAINING_SPACE
    TRAINS = True
    TRANSFORMS = True
    #: a transform test whose eager runs only in the python dialect (torch.func has no rule
    #: for the higher-order ops' derivatives) is compiled in it, without fullgraph
    ADAPTS_DIALECT = True
    #: Inductor and the stages before it (`aot_eager`, `eager`) share torch.compile's tracing
    COMPILE_FRONTEND = "torch.compile's Dynamo and AOT autograd"
    #: Dynamo, AOT autograd, the higher-order ops, Inductor's lowering and scheduling
    COVERAGE_PACKAGES = ("torch/_dynamo", "torch/_functorch", "torch/_higher_order_ops",
                         "torch/_inductor")

    def __init__(self, device: str = "cpu", fullgraph: bool = True, dynamic: bool | None = False,
                 dialect: str = "hop", unbacked: bool = False, cpp_wrapper: bool = False,
                 mode: str | None = None, freezing: bool | None = None,
                 pattern_matcher: bool | None = None, split_reductions: bool | None = None,
                 aggressive_fusion: bool | None = None, max_fusion_size: int | None = None,
                 layout_optimization: bool | None = None,
                 loop_ordering_after_fusion: bool | None = None,
                 reorder_for_locality: bool | None = None, inplace_buffers: bool | None = None,
                 allow_buffer_reuse: bool | None = None, memory_planning: bool | None = None,
                 joint_graph_constant_folding: bool | None = None,
                 comprehensive_padding: bool | None = None, simdlen: int | None = None,
                 loop_tail_vec: bool | None = None, tiling_heuristics: bool | None = None,
                 scalars: str = "tensor", params: str = "buffer", inplace: str = "written",
                 compiler: str = "inductor", memory_budget: float | None = None,
                 donated_buffer: bool | None = None, recompute_views: bool | None = None,
                 ban_recompute_reductions: bool | None = None,
                 ban_recompute_not_in_allowlist: bool | None = None,
                 eager_backward_lowering: bool | None = None):
        if device not in ("cpu", "cuda"):
            raise ValueError(f"inductor: device must be cpu or cuda, got {device!r}")
        if dialect not in ("hop", "python", "mixed"):
            raise ValueError(f"inductor: dialect must be hop, python or mixed, got {dialect!r}")
        self.dialect = dialect
        #: how the torch program is written (`ir.materialize.form`, campaign/backends/forms.py)
        self.form = form_option("inductor", scalars, params, inplace)
        self.name = "inductor"
        self.target = device
        self.fullgraph = bool(fullgraph)
        #: torch.compile's `dynamic`: False static, True symbolic from the start, None after
        #: a recompile
        self.dynamic = None if dynamic is None else bool(dynamic)
        if mode not in (None, "default", "max-autotune-no-cudagraphs", "max-autotune",
                        "reduce-overhead", "lite"):
            raise ValueError(f"inductor: unknown mode {mode!r}")
        self.mode = None if mode == "default" else mode
        #: `torch._inductor.config` keys set for this backend's compiles (INDUCTOR_FLAGS)
        given = dict(freezing=freezing, pattern_matcher=pattern_matcher,
                     split_reductions=split_reductions, aggressive_fusion=aggressive_fusion,
                     max_fusion_size=max_fusion_size, layout_optimization=layout_optimization,
                     loop_ordering_after_fusion=loop_ordering_after_fusion,
                     reorder_for_locality=reorder_for_locality, inplace_buffers=inplace_buffers,
                     allow_buffer_reuse=allow_buffer_reuse, memory_planning=memory_planning,
                     joint_graph_constant_folding=joint_graph_constant_folding,
                     comprehensive_padding=comprehensive_padding, simdlen=simdlen,
                     loop_tail_vec=loop_tail_vec, tiling_heuristics=tiling_heuristics)
        self.flags = {INDUCTOR_FLAGS[k]: v for k, v in given.items() if v is not None}
        if compiler not in COMPILERS:
            raise ValueError(f"inductor: compiler must be one of {', '.join(COMPILERS)}, "
                             f"got {compiler!r}")
        #: the torch.compile backend: Inductor, or a stage before it (`aot_eager`)
        self.compiler = compiler
        #: `torch._functorch.config` keys set for this backend's compiles (TRAINING_FLAGS)
        training = dict(memory_budget=memory_budget, donated_buffer=donated_buffer,
                        recompute_views=recompute_views,
                        ban_recompute_reductions=ban_recompute_reductions,
                        ban_recompute_not_in_allowlist=ban_recompute_not_in_allowlist,
                        eager_backward_lowering=eager_backward_lowering)
        self.training_flags = {TRAINING_FLAGS[k]: v for k, v in training.items()
                               if v is not None}
        #: dynamic-shape tests: mark their symbolic dims unbacked (no 0/1 specialization, no
        #: guards on them) instead of dynamic
        self.unbacked = bool(unbacked)
        #: the C++ wrapper (`torch._inductor.config.cpp_wrapper`): the host code that calls
        #: the kernels, control flow included, is generated as C++ and built with them into
        #: one library, instead of Python calling one library per kernel. Another code
        #: generator (the one AOTInductor uses), and on CPU one g++ run per graph instead of one
        #: per kernel (each about 0.7 s here, most of a compile)
        self.cpp_wrapper = bool(cpp_wrapper)

    @property
    def version(self) -> str:
        import torch

        return f"torch-{torch.__version__}"

    def stage_spec(self, compiler: str) -> str | None:
        """`torch.compile(backend=compiler)` on the same device, dialect, form, fullgraph,
        dynamic and AOT autograd options (`TRAINING_SPACE`); Inductor's own options
        (`CONFIG_SPACE`, the C++ wrapper, mode) do not apply before Inductor."""
        if compiler not in COMPILERS:
            raise ValueError(f"inductor: compiler must be one of {', '.join(COMPILERS)}, "
                             f"got {compiler!r}")
        if compiler == self.compiler:
            return self.name
        kept = {o.name for o in TRAINING_SPACE} | {"scalars", "params", "inplace"}
        options = {k: v for k, v in self._options.items() if k in kept}
        options.update(device=self.target, dialect=self.dialect, fullgraph=self.fullgraph,
                       dynamic=self.dynamic, unbacked=self.unbacked)
        return f"{compiler}?{config_text(options)}"

    def repro_spec(self) -> ReproSpec:
        """The graph as torch code in this form, torch.compile'd with these options
        (campaign/backends/inductor/torch_compile.py); a gradient test trains, a transform test compiles
        its program (campaign/backends/inductor/repro.py, inductor_transform.py)."""
        return ReproSpec("inductor", {"device": self.target, "fullgraph": self.fullgraph,
                                      "dynamic": self.dynamic, "cpp_wrapper": self.cpp_wrapper,
                                      "mode": self.mode, "flags": dict(self.flags),
                                      "compiler": self.compiler,
                                      "training_flags": dict(self.training_flags)},
                         dialect=self.dialect, form=self.form, trains=True,
                         adapts_dialect=self.ADAPTS_DIALECT,
                         bodies=TORCH_COMPILE_BODIES)

    PRELOAD: ClassVar[tuple[str, ...]] = ("torch", "torch._dynamo", "torch._inductor.compile_fx",
                                          "torch._inductor.config")

    def prepare(self) -> None:
        """Import Dynamo/Inductor and compile a trivial function once, forward and backward (no
        test code), so that the first test's compile is not the 12-17 s first compile. Runs
        AOT autograd: never in a process that forks sandbox processes (`campaign.sandbox`)."""
        if self.cpp_wrapper in _warmed:
            return
        import torch
        import torch._dynamo
        import torch._inductor.compile_fx  # noqa: F401
        import torch._inductor.config as icfg

        icfg.compile_threads = 1  # no compile worker pool: it would not survive a fork
        if self.target == "cpu":
            # the C++ wrapper builds its own precompiled header on its first compile
            f = torch.compile(lambda x: torch.relu(x) * 2 + 1, fullgraph=True,
                              backend=CompileCounter(self._config_patches(), self.compiler))
            with torch.no_grad():
                f(torch.ones(4))
            torch._dynamo.reset()
            # and a backward once: AOT autograd's partitioner and the backward's compile
            x = torch.ones(4, requires_grad=True)
            f(x).sum().backward()
            torch._dynamo.reset()
        _warmed.add(self.cpp_wrapper)

    def _config_patches(self) -> dict[str, Any]:
        patches = dict(self.flags)
        if self.cpp_wrapper:
            patches["cpp_wrapper"] = True
        if self.mode is not None:
            # torch.compile takes no `mode` beside a custom backend: what the mode sets
            from torch._inductor import list_mode_options

            patches.update(list_mode_options(self.mode))
        return patches

    def child_init(self, work_dir: str) -> None:
        import torch._inductor.config as icfg
        from torch._inductor.utils import clear_caches

        # generated kernels go to this process's scratch dir, removed with the process; no
        # on-disk graph cache: every test must really be compiled, and nothing should pile up
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work_dir, "inductor")
        icfg.compile_threads = 1
        icfg.fx_graph_cache = False
        icfg.autotune_local_cache = False
        clear_caches()

    def lacks(self) -> frozenset[str]:
        # the C++ wrapper raises on every compile region (CPP_WRAPPER_INVOKE_SUBGRAPH): its
        # tests go to the other Inductor backends instead of failing after a whole compile
        return self.LACKS | ({"region"} if self.cpp_wrapper else frozenset())

    def known_unsupported(self) -> tuple[KnownUnsupported, ...]:
        known = [*self.UNSUPPORTED, COND_NON_FLOAT_BACKWARD, LSTM_MKLDNN_BACKWARD,
                 CPP_WRAPPER_WHILE_LOOP_BACKWARD, SAVED_INPUT_MUTATED_BACKWARD,
                 CPP_WRAPPER_INVOKE_SUBGRAPH]
        if not self.fullgraph:
            known.append(SCAN_WITH_GRAPH_BREAKS)
        if self.form.numbers:
            known.append(WHILE_LOOP_INT_CARRY)
        return tuple(known)

    def unavailable(self) -> str | None:
        if not self.is_gpu:
            return None
        import torch

        if not torch.cuda.is_available():
            return "inductor device cuda needs a CUDA GPU, and torch sees none"
        return None

    def reset(self) -> None:
        import torch._dynamo

        torch._dynamo.reset()

    def _evaluate(self, m: Materialized, result: BackendResult) -> list[np.ndarray]:
        dialect = self.dialect_for(m.tc)
        assert dialect is not None  # a torch backend always has one
        result.dialect = self.form.label(dialect)
        fullgraph = self.fullgraph and not breaks_graph(self.dialect, dialect)

        counter = CompileCounter(self._config_patches(), self.compiler)
        if m.tc.mode.wraps_module:
            return self._evaluate_transform(m, result, dialect, fullgraph, counter)
        if m.tc.mode.warms_cache and self.takes_cache_tests():
            return self._evaluate_cached(m, result, dialect, fullgraph)
        return self._run_module(m, result, dialect, fullgraph, counter)

    def takes_cache_tests(self) -> bool:
        return self.compiler == "inductor"  # the FX graph cache and the AOT autograd cache

    def _evaluate_cached(self, m: Materialized, result: BackendResult, dialect: str,
                         fullgraph: bool) -> list[np.ndarray]:
        """A cache test (`campaign.modes.cache`): with both caches on, the near-twin compiled
        and run in a fresh cache directory, then the test there (warm), then the test in
        another fresh one (cold); per input set the warm outputs, then the cold ones."""
        import torch

        n = len(m.tc.graph.outputs)
        with caches.caches_on():
            with caches.fresh_cache_dir():
                self.stage(Stage.COMPILE, lambda: self._run_twin(m, dialect, fullgraph),
                           result, "compile_ms")
                torch._dynamo.reset()
                before = caches.cache_hits()
                warm = self._run_module(m, result, dialect, fullgraph,
                                        CompileCounter(self._config_patches(), self.compiler))
                result.cache_hits = caches.cache_hits() - before
                torch._dynamo.reset()
            with caches.fresh_cache_dir():
                cold = self._run_module(m, result, dialect, fullgraph,
                                        CompileCounter(self._config_patches(), self.compiler))
                torch._dynamo.reset()
        out: list[np.ndarray] = []
        for k in range(0, len(warm), n):
            out += warm[k:k + n] + cold[k:k + n]
        return out

    def _run_twin(self, m: Materialized, dialect: str, fullgraph: bool) -> None:
        """Compile and run a cache test's near-twin (`CacheSpec`), writing its cache entries."""
        import torch

        from ir.materialize.dynshape import torch_module
        from ir.ops.custom import Custom, register, unregister

        spec = m.tc.cache
        g, values = spec.twin_graph(m.tc), spec.twin_values(m.tc)
        # a `schema` twin's custom op under the test's op's name (freed again below)
        for inst, _ in g.walk():
            if isinstance(inst.op, Custom):
                q = inst.op.qualname(inst.blocks[0])
                if q in spec.rename:
                    register(inst.op, inst.blocks[0], qualname=spec.rename[q])
        try:
            module = torch_module(g, None, {p.name: values[p.name] for p in g.params},
                                  dialect=dialect, form=self.form).to(self.target).eval()
            patches = {**self._config_patches(), **spec.config}
            compiled = torch.compile(module, backend=CompileCounter(patches, self.compiler),
                                     fullgraph=fullgraph, dynamic=self.dynamic)
            xs = [torch.from_numpy(a).to(self.target)
                  for a in twin_arrays(g, values, spec.strided)]
            with torch.no_grad():
                compiled(*xs)
        finally:
            for q in spec.rename.values():
                unregister(q)

    def _run_module(self, m: Materialized, result: BackendResult, dialect: str, fullgraph: bool,
                    counter: CompileCounter) -> list[np.ndarray]:
        """The test's module compiled once and run on every input set (a gradient test:
        trained), its outputs per set."""
        import torch

        dyn = m.tc.dynshape  # dynamic shapes: one module, its symbolic dims marked dynamic
        grad = m.tc.grad
        holder: dict[str, Any] = {}

        def build():
            from ir.materialize.dynshape import torch_module

            trainable = grad.param_leaves(m.tc.graph) if grad is not None else frozenset()
            module = torch_module(m.tc.graph, dyn, m.tc.params(), dialect=dialect,
                                  form=self.form, trainable=trainable)
            module = holder["module"] = module.to(self.target).eval()
            return torch.compile(module, backend=counter, fullgraph=fullgraph,
                                 dynamic=None if dyn is not None else self.dynamic)

        compiled = self.stage(Stage.IMPORT, build, result, "compile_ms")
        sets = self.stage(Stage.IMPORT, lambda: _torch_input_sets(m, self.target))

        def mark(xs: list) -> None:
            if dyn is not None:
                from ir.materialize.dynshape import mark_dynamic

                # maybe_mark_dynamic, on every call alike (Dynamo guards on how inputs are
                # marked): set 0 (every symbolic size >= 2) compiles generic code, a later set
                # with a 0/1 size may recompile and specialize it (by design), without the
                # ConstraintViolationError mark_dynamic raises then
                mark_dynamic(xs, m.tc.graph, dyn, unbacked=self.unbacked, maybe=True)

        # fresh copies per call: a graph may write its inputs in place (docs/inplace.md)
        if grad is not None:
            from ir.materialize.grad import trainable_params, training_step

            params = trainable_params(holder["module"])

            def call(k: int, args: list) -> list:
                # marked once made leaves: a leaf is a new tensor, without the old one's marks
                return training_step(compiled, m.tc.graph_of(k), _copies(args), grad, k, params,
                                     mark=mark)
        else:
            def call(k: int, args: list) -> list:
                fresh = _copies(args)
                mark(fresh)
                return compiled(*fresh)

        outs: list[np.ndarray] = []
        # a dynamic-shape test: why a later set compiled again (the failing guard, the torch
        # code that added it: campaign/backends/inductor/shape_guards.py, which its repro runs too)
        guards = GuardLog()
        if dyn is not None:
            clear_guard_failures()
        with torch.set_grad_enabled(grad is not None), self._training_patches(), \
                (guards if dyn is not None else contextlib.nullcontext()):
            # the first call compiles (for set 0: a gradient test's forward, then its
            # backward); the others run what guards allow, so a set taking another
            # Python-dialect branch, or of another shape, may compile again: counted per set
            # (`result.compiles`), as run time
            self.stage(Stage.COMPILE, lambda: call(0, sets[0]), result, "compile_ms")
            compiles = [counter.n]
            for k, args in enumerate(sets):
                before = counter.n
                result.input_set = k
                outs += _outputs_numpy(self.stage(Stage.RUN,
                                                  lambda: call(k, args),  # noqa: B023 (called at once)
                                                  result, "run_ms"))
                if k:
                    compiles.append(counter.n - before)
                else:
                    compiles[0] += counter.n - before
            result.input_set = None
            result.compiles = compiles
        if dyn is not None and any(compiles[1:]):
            result.recompile_cause = recompile_cause(guard_failure_reasons(), guards.added)
        return outs

    def _evaluate_transform(self, m: Materialized, result: BackendResult, dialect: str,
                            fullgraph: bool, counter: CompileCounter) -> list[np.ndarray]:
        """A transform test (docs/training.md): `torch.compile` of the transformed program
        (`ir.materialize.transforms.transformed`: torch.func over the module as a function of
        its leaves), called once to compile and once more for the results."""
        import torch

        from ir.materialize.dynshape import torch_module
        from ir.materialize.transforms import transform_program, transformed

        spec, g = m.tc.transform, m.tc.graph
        if dialect not in spec.dialects:
            raise NotApplicable(f"{spec.name}: torch eager runs this test only in the "
                                f"{' or '.join(spec.dialects)} dialect, not {dialect}")
        if self.is_gpu:
            raise NotApplicable("transform tests run on the CPU only")

        def build() -> tuple[Any, list]:
            module = torch_module(g, None, m.tc.params(), dialect=dialect, form=self.form,
                                  trainable=spec.param_leaves(g)).eval()
            f, args = transform_program(module, g, spec, m.tc.value_sets())
            return torch.compile(transformed(spec, f, 0, g.outputs), backend=counter,
                                 fullgraph=fullgraph, dynamic=self.dynamic), args

        compiled, args = self.stage(Stage.IMPORT, build, result, "compile_ms")
        with self._training_patches():
            self.stage(Stage.COMPILE, lambda: compiled(*args), result, "compile_ms")
            result.input_set = 0
            outs = self.stage(Stage.RUN, lambda: compiled(*args), result, "run_ms")
            result.input_set = None
        result.compiles = [counter.n]
        return [o.detach().cpu().numpy() for o in outs]

    def _training_patches(self) -> Any:
        """AOT autograd's options of this configuration (`TRAINING_FLAGS`), for its compiles."""
        import contextlib

        import torch._functorch.config as fcfg

        return fcfg.patch(self.training_flags) if self.training_flags else contextlib.nullcontext()


register("inductor", InductorBackend, device="cpu")
register("inductor_cuda", InductorBackend, device="cuda")
register("inductor_dynamic", InductorBackend, device="cpu", dynamic=True)
#: AOT autograd with eager kernels: Dynamo and AOT autograd's joint graph and partitioning
#: without Inductor, which tells their faults from Inductor's (docs/training.md)
register("aot_eager", InductorBackend, device="cpu", compiler="aot_eager",
         info=BackendInfo("torch.compile (aot_eager: Dynamo and AOT autograd)", ("torch",)))
