"""torch.compile as the fuzzer's Inductor backend runs it (`InductorBackend`): its process-wide
options, the backend argument of the failing configuration, AOT autograd's options. Shared by
the repro of a test (`inductor`) and of a transform test (`inductor_transform`)."""
from __future__ import annotations

from typing import Any

import torch

# ---- per-test values
#: the backend's options: device (cpu, cuda), torch.compile's fullgraph and dynamic (False
#: static, True symbolic, None after a recompile), the C++ wrapper, Inductor's mode (None:
#: default) and `torch._inductor.config` flags, the torch.compile backend (inductor, or a stage
#: before it: aot_eager) and AOT autograd's options (`torch._functorch.config`)
DEVICE = "cpu"
FULLGRAPH = True
DYNAMIC: bool | None = False
CPP_WRAPPER = False
MODE: str | None = None
FLAGS: dict[str, Any] = {}
COMPILER = "inductor"
TRAINING_FLAGS: dict[str, Any] = {}
# ---- end of per-test values


def configure() -> Any:
    """Set Inductor's process-wide options as the fuzzer's sandbox does; torch.compile's
    `backend` argument."""
    import torch._inductor.config as icfg

    torch.set_num_threads(1)
    icfg.compile_threads = 1
    icfg.fx_graph_cache = False
    icfg.cpp_wrapper = CPP_WRAPPER
    return compile_backend()


def compile_backend() -> Any:
    """The stage before Inductor by name, or Inductor: with the failing configuration's
    `torch._inductor.config` options, for these compiles only, as the fuzzer set them
    (`compile_fx(config_patches=...)`, with what MODE sets: torch.compile takes no mode
    beside a backend function)."""
    if COMPILER != "inductor":
        return COMPILER
    if not FLAGS and MODE is None:
        return "inductor"
    from torch._inductor.compile_fx import compile_fx

    patches = dict(FLAGS)
    if MODE is not None:
        from torch._inductor import list_mode_options

        patches.update(list_mode_options(MODE))

    def inductor_with_config(gm: Any, example_inputs: Any) -> Any:
        return compile_fx(gm, example_inputs, config_patches=patches)

    print(f"torch._inductor.config patches: {patches}", flush=True)
    return inductor_with_config


def describe(program: str, device: str) -> str:
    """What is compiled, how, on which device (the script's first line)."""
    return (f"torch {torch.__version__}: torch.compile({program}backend={COMPILER!r}, "
            f"fullgraph={FULLGRAPH}, dynamic={DYNAMIC}), cpp_wrapper={CPP_WRAPPER}, on {device}")


def set_training_flags() -> None:
    """The failing configuration's AOT autograd options (`torch._functorch.config`), as the
    fuzzer set them for its compiles."""
    if not TRAINING_FLAGS:
        return
    import torch._functorch.config as fcfg

    for key, value in TRAINING_FLAGS.items():
        setattr(fcfg, key, value)
    print("torch._functorch.config:", TRAINING_FLAGS, flush=True)
