"""The start of every repro script: the folder's data, stages, the timeout watchdog, and the
judgement of the outputs (REPRODUCED / NOT REPRODUCED / DIFFERENT FAILURE, exit 1 / 0 / 2).

Also dynsmith's own: `root_error` is how a backend row names the error a wrapper exception
wraps (`campaign.backends.base` imports it), so a script and the campaign unwrap alike.
"""
from __future__ import annotations

import faulthandler
import os
import sys
from typing import Any, NoReturn

import numpy as np

if __name__ == "__main__":  # the script itself (not dynsmith importing this module)
    faulthandler.enable()
HERE = os.path.dirname(os.path.abspath(__file__))
# ---- per-test values
#: what to reproduce: verdict, stage, error_class, error_sig (a timeout: timeout_s, the
#: wait, and timeout_note)
EXPECT: dict[str, Any] = {"verdict": "mismatch", "stage": "compare", "error_class": None,
                          "error_sig": None}
#: (rtol, atol) per graph output (then per gradient, for a gradient test):
#: |actual - expected| <= atol + rtol * |expected|
TOLERANCES: list[tuple[float, float]] = []
#: what each result of an input set is
LABELS: list[str] = []
#: a gradient test (outputs, then the leaves' gradients: train_step)
GRADIENTS = False
INPUTS: list[str] = []
PARAMS: list[str] = []
# ---- end of per-test values
STAGE: str | None = None
#: exception types that only wrap the real error (their first line is generic: Dynamo's
#: "backend='inductor' raised:", the exporter's "Failed to export the model ...")
WRAPPER_ERRORS = frozenset({"BackendCompilerFailed", "InternalTorchDynamoError",
                            "TorchExportError", "ConversionError"})
#: seconds faulthandler's watchdog waits beyond a timeout repro's own (when the GIL is held)
WATCHDOG_GRACE_S = 10


def load(name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(HERE, name), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def input_sets() -> list[dict[str, np.ndarray]]:
    """Every input set: set 0 holds inputs and params, later sets new graph inputs."""
    base = load("inputs.npz")
    sets, k = [base], 1
    while os.path.exists(os.path.join(HERE, f"inputs_set{k}.npz")):
        sets.append({**base, **load(f"inputs_set{k}.npz")})
        k += 1
    return sets


def stage(name: str) -> None:
    global STAGE
    STAGE = name
    print(f"[repro] {name}", flush=True)


def watchdog() -> None:
    """A timeout reproduces when there is still no result EXPECT["timeout_s"] seconds after
    main() started: the limit the hang was confirmed at plus a cold start."""
    if EXPECT["verdict"] != "timeout":
        return
    import threading

    wait = EXPECT["timeout_s"]
    print(f"[repro] expecting a timeout: reproduced if there is no result within {wait:g} s "
          f"({EXPECT['timeout_note']})", flush=True)

    def expire() -> None:
        print(f"REPRODUCED: timeout: no result within {wait:g} s (during {STAGE})",
              flush=True)
        faulthandler.dump_traceback(all_threads=True)  # where it hangs
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(wait, expire)
    timer.daemon = True
    timer.start()
    # should native code never release the GIL, faulthandler's own thread ends the process
    # (exit 1, "Timeout (...)!" and the stacks on stderr)
    faulthandler.dump_traceback_later(wait + WATCHDOG_GRACE_S, exit=True)


def root_error(e: BaseException) -> BaseException:
    """The error a chain of wrapper exceptions (`WRAPPER_ERRORS`) wraps, or `e` itself."""
    for _ in range(8):
        if type(e).__name__ not in WRAPPER_ERRORS:
            break
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if not isinstance(inner, BaseException):
            break
        e = inner
    return e


def done(code: int, text: str) -> NoReturn:
    print(text, flush=True)
    sys.exit(code)


def failed(e: BaseException) -> NoReturn:
    e = root_error(e)
    first = (str(e).strip().splitlines() or [""])[0]
    what = f"{type(e).__name__} during {STAGE}: {first}"
    if (EXPECT["verdict"] == "crash" and type(e).__name__ == EXPECT["error_class"]
            and STAGE == EXPECT["stage"]):
        done(1, f"REPRODUCED: crash: {what}")
    done(2, f"DIFFERENT FAILURE: {what} (expected {EXPECT['verdict']} "
            f"{EXPECT['error_class']} during {EXPECT['stage']})")


def judge(outs: list[Any]) -> str | None:
    """Why the outputs are wrong (off the reference and, where known, off the float64 truth
    too), or None."""
    expected = load("expected.npz")
    truth = load("truth.npz") if os.path.exists(os.path.join(HERE, "truth.npz")) else {}
    if len(outs) != len(expected):
        return f"{len(outs)} outputs, expected {len(expected)}"
    for i, out in enumerate(outs):
        a, e = np.asarray(out), expected[f"out{i}"]
        if a.shape != e.shape or a.dtype != e.dtype:
            return (f"{LABELS[i % len(LABELS)]}: {a.dtype}{list(a.shape)}, "
                    f"expected {e.dtype}{list(e.shape)}")
        rtol, atol = TOLERANCES[i % len(TOLERANCES)]
        af, ef = a.astype(np.float64), e.astype(np.float64)
        bad = ~(np.abs(af - ef) <= atol + rtol * np.abs(ef))
        if f"out{i}" in truth:
            t = truth[f"out{i}"].astype(np.float64)
            bad &= ~(np.abs(af - t) <= atol + rtol * np.abs(t))
        if bad.any():
            err = np.abs(af - ef)[bad]
            where = [tuple(int(k) for k in ix) for ix in np.argwhere(bad)[:4]]
            shown = "; ".join(f"at {ix} got {float(af[ix]):.9g}, expected {float(ef[ix]):.9g}"
                              for ix in where)
            return (f"{LABELS[i % len(LABELS)]} (input set {i // len(TOLERANCES)}): "
                    f"{int(bad.sum())}/{a.size} "
                    f"elements differ, max abs err {float(np.nanmax(err)) if err.size else 0:.3g}; "
                    f"{shown}")
    return None


def finish(outs: list[Any]) -> NoReturn:
    problem = judge(outs)
    if problem is None:
        done(0, "NOT REPRODUCED: every output matches the reference")
    if EXPECT["verdict"] == "mismatch":
        done(1, f"REPRODUCED: mismatch: {problem}")
    done(2, f"DIFFERENT FAILURE: mismatch: {problem} (expected {EXPECT['verdict']})")
