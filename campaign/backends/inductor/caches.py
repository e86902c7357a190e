"""The compile caches as a cache test runs them (`campaign.modes.cache`): Inductor's FX graph
cache and AOT autograd's cache switched on, a fresh cache directory, the caches' hit counters and
a near-twin's input arrays. The Inductor backend's own code (`InductorBackend._evaluate_cached`),
and a script part (campaign/backends/repro_scripts: standard library, numpy and torch only)
that a cache test's repro.py copies, so the script turns the caches on as the backend did.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np

#: the caches' counters (`torch._dynamo.utils.counters`, group and name) a repro prints
CACHE_COUNTERS = (("inductor", "fxgraph_cache_hit"), ("inductor", "fxgraph_cache_miss"),
                  ("inductor", "fxgraph_cache_bypass"), ("aot_autograd", "autograd_cache_hit"),
                  ("aot_autograd", "autograd_cache_miss"),
                  ("aot_autograd", "autograd_cache_bypass"))


def cache_counters() -> dict[str, int]:
    """This process's counts so far of the caches' hits, misses and bypasses (by name)."""
    from torch._dynamo.utils import counters

    return {name: int(counters[group][name]) for group, name in CACHE_COUNTERS}


def cache_hits() -> int:
    """Hits so far in this process of the FX graph cache and the AOT autograd cache."""
    seen = cache_counters()
    return seen["fxgraph_cache_hit"] + seen["autograd_cache_hit"]


@contextlib.contextmanager
def caches_on(fx_graph: bool = True, autograd: bool = True) -> Iterator[None]:
    """Inductor's FX graph cache and AOT autograd's cache on (as users have them by default;
    the fuzzer's other tests run without them: `InductorBackend.child_init`); either off where
    its argument says (a cache repro's localization)."""
    import torch._functorch.config as fcfg
    import torch._inductor.config as icfg

    with icfg.patch(fx_graph_cache=fx_graph), fcfg.patch(enable_autograd_cache=autograd):
        yield


@contextlib.contextmanager
def fresh_cache_dir() -> Iterator[str]:
    """A new, empty Inductor cache directory for what runs inside (`TORCHINDUCTOR_CACHE_DIR`,
    removed after), under the one named before (a sandbox process's, set by `child_init`,
    which Inductor makes only when it first writes there), or the system's temporary folder."""
    import shutil
    import tempfile

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if before is not None:
        os.makedirs(before, exist_ok=True)
    d = tempfile.mkdtemp(prefix="cache-test-", dir=before)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
    try:
        yield d
    finally:
        if before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
        shutil.rmtree(d, ignore_errors=True)


def twin_arrays(names: list[str], values: dict[str, np.ndarray],
                strided: bool) -> list[np.ndarray]:
    """A cache test's near-twin's inputs: copies of the `values` of inputs `names`, in
    column-major strides when `strided` (the same shapes and values: numpy's
    `ascontiguousarray` would make a 0-d array 1-d)."""
    return [np.array(values[n], order="F" if strided else "C", copy=True) for n in names]
