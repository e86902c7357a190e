"""A cache test (`campaign.modes.cache`) on Inductor, as `InductorBackend._evaluate_cached` runs
it: with the FX graph cache and the AOT autograd cache on (`caches.caches_on`), in a fresh
cache directory the near-twin's program (TWIN_PROGRAM) is compiled and run, writing its cache
entries; Dynamo is reset; the test's program (TEST_PROGRAM) is compiled and run there (warm),
then in another fresh cache directory (cold). Per input set the warm outputs, then the cold
ones, judged against eager's (expected.npz holds each set's outputs twice, TOLERANCES and
LABELS cover both): a cache key that misses what tells the twin from the test serves the twin's
code to the warm compile alone. Each compile's cache hits and misses are printed.

Each program is run (`load_program`: its custom ops registered then) in a namespace of its own
when its turn comes: a `schema` twin registers its custom op under the test's op's name with
another schema, and is unregistered after its run (TWIN_RENAMED), so that the test's program
registers the test's op again, as the backend does. Both are compiled under one file name
(`PROGRAM_FILE`), as the fuzzer compiled one module class for both: a `self` twin's graphs are
the test's to the letter, their stack traces included (torch 2.13's keys do not read them:
a self pair hits both caches under two names too).

Its localization (`ablate`, docs/triage.md "Where the fault is") switches the caches off, the
near-twin's compile first (TWIN_FIRST, CACHES), then one cache alone; when the caches are not
needed, torch.compile's plan runs with them off.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from campaign.backends.inductor.caches import (
    cache_counters,
    caches_on,
    fresh_cache_dir,
    twin_arrays,
)
from campaign.backends.inductor.torch_compile import (
    COMPILER,
    DEVICE,
    DYNAMIC,
    FULLGRAPH,
    ablate_compile,
    build_program,
    compile_backend,
    configure,
    describe,
    first_call_stage,
    use_regions,
)
from campaign.backends.repro_scripts.localize import PASSES, SAME, Probe
from campaign.backends.repro_scripts.model import TEST_PROGRAM, TWIN_PROGRAM
from campaign.backends.repro_scripts.prelude import (
    failed,
    finish,
    input_sets,
    load,
    stage,
)

# ---- per-test values
#: the near-twin (`CacheSpec`): its kind (self, dtype, stride, config, schema) and what it is
TWIN = "self"
TWIN_DESCRIBE = "the test itself"
#: its inputs passed in column-major strides (a `stride` twin)
TWIN_STRIDED = False
#: the Inductor options it is compiled with besides the test's (a `config` twin)
TWIN_CONFIG: dict[str, Any] = {}
#: the custom ops it registers under the test's ops' names with another schema (a `schema`
#: twin), unregistered after its run
TWIN_RENAMED: list[str] = []
#: the file of its inputs and params (input set 0's; a `dtype` twin's: twin_inputs.npz), and
#: their names
TWIN_VALUES = "inputs.npz"
TWIN_INPUTS: list[str] = []
TWIN_PARAMS: list[str] = []
# ---- end of per-test values

# ---- localization switches (`--set NAME=<json>`, as the plan's runs set them; every cache
# script has them so: docs/triage.md, "Where the fault is")
#: compile and run the near-twin before the warm compile
TWIN_FIRST = True
#: the caches on: "fx_graph_cache" (Inductor's FX graph cache), "autograd_cache" (AOT
#: autograd's, which bypasses itself while the FX graph cache is off); none: no fresh cache
#: directories either
CACHES = ["fx_graph_cache", "autograd_cache"]

#: the file name both programs are compiled under (their stack traces alike)
PROGRAM_FILE = "<program>"


def load_program(source: str) -> dict[str, Any]:
    """Run a program's source in a namespace of its own (its custom ops are registered now);
    its lines are shown in tracebacks."""
    import linecache

    linecache.cache[PROGRAM_FILE] = (len(source), None, source.splitlines(keepends=True),
                                     PROGRAM_FILE)
    namespace: dict[str, Any] = {"__name__": "program"}
    exec(compile(source, PROGRAM_FILE, "exec"), namespace)
    return namespace


def unregister(namespace: dict[str, Any], names: list[str]) -> None:
    """Remove the custom ops of `names` that a program's namespace registered (its
    `torch.library.custom_op` definitions) from torch, freeing their names."""
    from torch._library.custom_ops import CustomOpDef

    for value in list(namespace.values()):
        if isinstance(value, CustomOpDef) and value._qualname in names:
            value._lib._destroy()


def counted(what: str, before: dict[str, int]) -> int:
    """Print the caches' counts since `before` (`cache_counters`); the hits among them."""
    now = cache_counters()
    seen = {k: now[k] - before[k] for k in now}
    print(f"[repro] {what}: " + ", ".join(f"{k} {v}" for k, v in seen.items()), flush=True)
    return seen["fxgraph_cache_hit"] + seen["autograd_cache_hit"]


def run_twin() -> None:
    """Compile and run the near-twin once (its compile writes its cache entries)."""
    namespace = load_program(TWIN_PROGRAM)
    try:
        values = load(TWIN_VALUES)
        use_regions(namespace["Model"])
        model = namespace["Model"]({n: np.array(values[n], copy=True)
                                    for n in TWIN_PARAMS}).to(DEVICE).eval()
        program = model if COMPILER == "none" else torch.compile(
            model, backend=compile_backend(TWIN_CONFIG), fullgraph=FULLGRAPH, dynamic=DYNAMIC)
        xs = [torch.from_numpy(a).to(DEVICE)
              for a in twin_arrays(TWIN_INPUTS, values, TWIN_STRIDED)]
        with torch.no_grad():
            program(*xs)
    finally:
        unregister(namespace, TWIN_RENAMED)


def run_test(model_class: Any, sets: list[dict[str, Any]], backend: Any) -> list[np.ndarray]:
    """The test's program compiled (its first call) and run on every input set: the outputs."""
    _, program, args = build_program(sets, backend, model_class)
    outs: list[np.ndarray] = []
    stage(first_call_stage())
    try:
        with torch.no_grad():
            program(*[x.clone() for x in args[0]])
    except Exception as e:
        failed(e)
    stage("run")
    try:
        for xs in args:
            with torch.no_grad():  # fresh inputs each call: the program may write to them
                outs += [o.detach().cpu().numpy() for o in program(*[x.clone() for x in xs])]
    except Exception as e:
        failed(e)
    return outs


def main() -> None:
    import contextlib

    import torch._inductor.config as icfg

    backend = configure()
    icfg.autotune_local_cache = False  # as the fuzzer's sandbox processes
    print(describe("", DEVICE), flush=True)
    on = {"fx_graph_cache": "the FX graph cache", "autograd_cache": "the AOT autograd cache"}
    print(f"cache test: the near-twin ({TWIN}) is {TWIN_DESCRIBE}; "
          + (" and ".join(on[c] for c in CACHES) + " on" if CACHES else "the caches off")
          + ("" if TWIN_FIRST else "; the near-twin not compiled first (TWIN_FIRST=False)"),
          flush=True)
    sets = input_sets()

    def directory() -> Any:  # a fresh cache directory, while a cache is on
        if CACHES:
            return fresh_cache_dir()
        return contextlib.nullcontext("the cache directory as it is (the caches off)")

    with caches_on("fx_graph_cache" in CACHES, "autograd_cache" in CACHES):
        with directory() as where:
            print(f"[repro] {'near-twin, then ' if TWIN_FIRST else ''}warm, in {where}",
                  flush=True)
            if TWIN_FIRST:
                stage("compile")
                before = cache_counters()
                try:
                    run_twin()
                except Exception as e:
                    failed(e)
                counted("near-twin's compile", before)
                torch._dynamo.reset()
            test = load_program(TEST_PROGRAM)["Model"]
            before = cache_counters()
            warm = run_test(test, sets, backend)
            hits = counted("warm compile", before)
            torch._dynamo.reset()
        with directory() as where:
            print(f"[repro] cold, in {where}", flush=True)
            before = cache_counters()
            cold = run_test(test, sets, backend)
            counted("cold compile", before)
            torch._dynamo.reset()
    n = max(1, len(warm) // len(sets))  # each set's outputs
    agree = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(warm, cold, strict=True))
    print(f"[repro] the warm compile was served {hits} cache entries; warm and cold outputs "
          f"{'agree' if agree else 'differ'}", flush=True)
    outs: list[Any] = []
    for k in range(0, len(warm), n):
        outs += warm[k:k + n] + cold[k:k + n]
    finish(outs)


def ablate(probe: Probe) -> tuple[str | None, str]:
    """`repro.py --localize` of a cache test: the caches first. Both off: when it still fails
    the same way they are not at fault, and torch.compile's plan (`ablate_compile`) runs
    with them off (without the near-twin too, when that still fails alike). When it passes,
    the near-twin is left out (does the failure need its entries?), then the AOT autograd
    cache is switched off alone: passing, its entry was at fault; still failing, the FX graph
    cache alone serves it (and off as well, it passed)."""
    off = probe("both caches off (CACHES=[])", CACHES=[])
    if off == SAME:
        alone = probe("both caches off, the near-twin not compiled first", CACHES=[],
                      TWIN_FIRST=False)
        probe.fixed = {"CACHES": [], **({"TWIN_FIRST": False} if alone == SAME else {})}
        culprit, why = ablate_compile(probe, load_program(TEST_PROGRAM))
        return culprit, (f"with both caches off it still fails the same way, so they are not at "
                         f"fault (without the near-twin as well it {alone}); torch.compile's "
                         f"plan with them off: {why}")
    if off != PASSES:
        return None, (f"with both caches off it {off}: whether they are at fault, the runs "
                      f"cannot tell")
    shown = "with both caches off it passes"
    twin = probe("the caches on, the near-twin not compiled first (TWIN_FIRST=False)",
                 TWIN_FIRST=False)
    shown += ("; without the near-twin compiled first it passes: the failure needs the twin's "
              "cache entries" if twin == PASSES else
              f"; without the near-twin compiled first it {twin}"
              + (": the test's own entries are enough" if twin == SAME else ""))
    aot = probe("the AOT autograd cache off, the FX graph cache on",
                CACHES=["fx_graph_cache"])
    if aot == PASSES:
        return ("aot_autograd: AOT autograd cache",
                f"{shown}; with the AOT autograd cache off alone it passes: an entry it served "
                f"the warm compile is at fault (its key misses what tells the compiles apart, "
                f"or the entry comes back wrong)")
    if aot == SAME:
        return ("inductor: FX graph cache",
                f"{shown}; with the AOT autograd cache off alone it still fails the same way, "
                f"with the FX graph cache off as well it passes: an entry the FX graph cache "
                f"served is at fault (its key misses what tells the compiles apart, or the "
                f"entry comes back wrong)")
    return None, (f"{shown}; with the AOT autograd cache off alone it {aot}: which cache, the "
                  f"runs cannot tell")
