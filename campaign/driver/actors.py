"""How a stage class becomes a Ray actor (its process's environment, its placement options,
a `where()` start-up check), and the sweep of what a run's actors left running."""
from __future__ import annotations

import gc
import logging
import os
import socket
import time
from typing import Any

import ray

log = logging.getLogger(__name__)

#: one thread per actor for the libraries that would start one per core (torch and ORT are set
#: in code; TVM reads its variable when its thread pool starts, after the actor's start):
#: actors share the cores with each other and with their sandbox processes
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TVM_NUM_THREADS": "1"}
#: ... and a small oneDNN primitive cache (torch's conv/RNN/matmul kernels, JIT-compiled per
#: shape): its default 1024 entries grew a cpu_ort generation actor by ~18 KB a test (+45 MB over
#: 2500 tests, still growing; flat with 64), while a test reuses only its own few shapes (the
#: input search runs one graph many times: 64 costs no CPU, 0 would cost 19%)
ACTOR_ENV = {**THREAD_ENV, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}


def actor_env() -> dict[str, str]:
    """ACTOR_ENV, except where the driver's own environment says otherwise."""
    return {k: os.environ.get(k, v) for k, v in ACTOR_ENV.items()}


def run_env(run_id: str) -> dict[str, str]:
    """The actors' environment: ACTOR_ENV, and the run id that the marks of every process
    their sandboxes start carry (`campaign.proctree`), so the campaign's end finds them all."""
    from campaign.proctree import RUN_ENV

    return {**actor_env(), RUN_ENV: run_id}


def kill_leftovers(run_id: str, wait_s: float = 3.0) -> int:
    """Kill every process the run's sandboxes started that is still running (actors killed
    with SIGKILL leave their sandbox processes' orphans to init); returns how many. Repeated
    until none is found (actors may still be dying)."""
    from campaign.proctree import sweep

    n, quiet, deadline = 0, 0, time.monotonic() + wait_s
    while quiet < 2 and time.monotonic() < deadline:
        k = sweep(f"{run_id}:", owner_dead_only=False)
        n += k
        quiet = quiet + 1 if k == 0 else 0
        time.sleep(0.1)
    if n:
        log.warning("killed %d processes the run's compilers left running", n)
    return n


def hosted(cls: type, env: dict[str, str]) -> type:
    """`cls` with `env` set in its actor's process before it starts (a runtime_env would cost
    seconds per actor), and a `where()` method: the node an actor landed on (its start-up check
    too)."""

    class Hosted(cls):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            os.environ.update(env)
            super().__init__(*args, **kwargs)
            # what the actor holds now (torch, onnx, z3, Ray: ~250k objects) lives as long as
            # it does: out of the collector's way, so full collections stop walking it
            gc.collect()
            gc.freeze()

        def where(self) -> dict[str, Any]:
            return {"node_id": ray.get_runtime_context().get_node_id(),
                    "host": socket.gethostname(), "pid": os.getpid()}

    Hosted.__name__ = Hosted.__qualname__ = cls.__name__
    return Hosted


def actor_class(cls: type, resources: dict[str, float], run_id: str) -> Any:
    """`cls` as a Ray actor class holding `resources` (CPU, GPU, custom), never restarted, in
    the run's environment (`run_env`)."""
    # no task events: Ray's GCS would keep every call's (up to 100k), growing by ~10 MB
    # a minute, and each call would cost their reporting; nothing here reads them
    opts: dict[str, Any] = {"num_cpus": resources.get("CPU", 0.0), "max_restarts": 0,
                            "enable_task_events": False}
    if resources.get("GPU"):
        opts["num_gpus"] = resources["GPU"]
    custom = {r: v for r, v in resources.items() if r not in ("CPU", "GPU")}
    if custom:
        opts["resources"] = custom
    return ray.remote(**opts)(hosted(cls, run_env(run_id)))


def kill_actor(actor: Any) -> None:
    """Kill an actor for good; one already gone is no error."""
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone
        pass
