"""Reproducer for dynsmith bucket inductor-crash-7b6bd628a9: backend 'inductor', crash during compile.

    AssertionError: expected size N==N, stride N==N at dim=N; expected size N==N, stride N==N at dim=N; expected size N==N, stride N==N at dim=N @ c4zcsbvnaih4ydvrgrygyqi5y7gie7d6dcg356a52pk2vox7m4cr.true_graph_0 < c4zcsbvnaih4ydvrgrygyqi5y7gie7d6dcg356a52pk2vox7m4cr.call
    expected size 4==4, stride 1==36 at dim=1; expected size 6==6, stride 24==6 at dim=2; expected size 6==6, stride 4==1 at dim=3

Standalone: numpy and the backend's own library only (no dynsmith). Run
    python repro.py
It prints REPRODUCED and exits 1 when the failure happens, NOT REPRODUCED (exit 0)
when it does not, DIFFERENT FAILURE (exit 2) for another error; a signal kills it
(the last '[repro] <stage>' line says where). The data is in inputs*.npz, the
reference outputs in expected.npz. The graph (GraphIR, graph.gir):

    graph main(%x: f32[2,4,6,6], %x0: i64[], %x1: f32[3,4], %x2: f32[], %w1: param f32[4,4,3,3], %s1: param f32[4], %m1: param f32[4], %v1: param f32[4], %w2: param f32[4,4,3,3], %s2: param f32[4], %b2: param f32[4], %m2: param f32[4], %v2: param f32[4]) {
      %c1 = conv2d[stride=[1,1], padding=[1,1], dilation=[1,1], groups=1](%x, %w1) : f32[2,4,6,6]
      %v20, %v21, %v22, %v23, %v24 = scan[num_carries=4, reverse=true](%c1, %s1, %m1, %v1, %x1) : f32[2,4,6,6], f32[4], f32[4], f32[4], f32[3] {
        graph body(%b8: f32[2,4,6,6], %b9: f32[4], %b10: f32[4], %b11: f32[4], %b12: f32[4]) {
          %v14 = batch_norm(%b8, %b9, %b12, %b10, %b11) : f32[2,4,6,6]
          %v15 = softsign(%v14) : f32[2,4,6,6]
          %v16 = reduce_sum[axis=0, keepdim=false](%v15) : f32[4,6,6]
          %v17 = reduce_sum[axis=0, keepdim=false](%v16) : f32[6,6]
          %v18 = reduce_sum[axis=0, keepdim=false](%v17) : f32[6]
          %v19 = reduce_sum[axis=0, keepdim=false](%v18) : f32[]
          return %v14, %b9, %b10, %b11, %v19
        }
      }
      %a1 = relu(%v20) : f32[2,4,6,6]
      %c2 = conv2d[stride=[1,1], padding=[1,1], dilation=[1,1], groups=1](%a1, %w2) : f32[2,4,6,6]
      %v0 = reduce_sum[axis=0, keepdim=false](%v22) : f32[]
      %v3 = gt(%v0, %x2) : b8[]
      %sum = if(%v3, %x0, %c2, %s2, %b2, %m2, %v2, %x) : f32[2,4,6,6] {
        graph then(%b13: i64[], %b14: f32[2,4,6,6], %b15: f32[4], %b16: f32[4], %b17: f32[4], %b18: f32[4], %b19: f32[2,4,6,6]) {
          %v27, %v28, %v29, %v30, %v31 = loop(%b13, %b14, %b15, %b16, %b17, %b18) : f32[2,4,6,6], f32[4], f32[4], f32[4], f32[4] {
            graph body(%b20: i64[], %b21: f32[2,4,6,6], %b22: f32[4], %b23: f32[4], %b24: f32[4], %b25: f32[4]) {
              %v26 = batch_norm(%b21, %b22, %b23, %b24, %b25) : f32[2,4,6,6]
              return %v26, %b22, %b23, %b24, %b25
            }
          }
          %v32 = add(%v27, %b19) : f32[2,4,6,6]
          return %v32
        }
        graph else(%b33: i64[], %b34: f32[2,4,6,6], %b35: f32[4], %b36: f32[4], %b37: f32[4], %b38: f32[4], %b39: f32[2,4,6,6]) {
          %v47, %v48, %v49, %v50, %v51 = loop(%b33, %b34, %b35, %b36, %b37, %b38) : f32[2,4,6,6], f32[4], f32[4], f32[4], f32[4] {
            graph body(%b40: i64[], %b41: f32[2,4,6,6], %b42: f32[4], %b43: f32[4], %b44: f32[4], %b45: f32[4]) {
              %v46 = batch_norm(%b41, %b42, %b43, %b44, %b45) : f32[2,4,6,6]
              return %v46, %b42, %b43, %b44, %b45
            }
          }
          %v52 = cos(%v47) : f32[2,4,6,6]
          return %v52
        }
      }
      %out = clip[lo=-0.75, hi=0.75](%sum) : f32[2,4,6,6]
      return %out, %v24
    }
"""

import faulthandler
import os
import re
import sys

import numpy as np

faulthandler.enable()
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECT = {'verdict': 'crash', 'stage': 'compile', 'error_class': 'AssertionError', 'error_sig': 'AssertionError: expected size N==N, stride N==N at dim=N; expected size N==N, stride N==N at dim=N; expected size N==N, stride N==N at dim=N @ c4zcsbvnaih4ydvrgrygyqi5y7gie7d6dcg356a52pk2vox7m4cr.true_graph_0 < c4zcsbvnaih4ydvrgrygyqi5y7gie7d6dcg356a52pk2vox7m4cr.call'}
#: (rtol, atol) per graph output: |actual - expected| <= atol + rtol * |expected|
TOLERANCES = [(0.008, 0.0008), (0.008, 0.0008)]
INPUTS = ['x', 'x0', 'x1', 'x2']
PARAMS = ['w1', 's1', 'm1', 'v1', 'w2', 's2', 'b2', 'm2', 'v2']
STAGE = None
#: exception types that only wrap the real error (their first line is generic)
WRAPPERS = ("BackendCompilerFailed", "InternalTorchDynamoError", "TorchExportError",
            "ConversionError")


def load(name):
    with np.load(os.path.join(HERE, name), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def input_sets():
    """Every input set: set 0 holds inputs and params, later sets new graph inputs."""
    base = load("inputs.npz")
    sets, k = [base], 1
    while os.path.exists(os.path.join(HERE, f"inputs_set{k}.npz")):
        sets.append({**base, **load(f"inputs_set{k}.npz")})
        k += 1
    return sets


def stage(name):
    global STAGE
    STAGE = name
    print(f"[repro] {name}", flush=True)


def watchdog():
    """A timeout reproduces when there is still no result EXPECT["timeout_s"] seconds after
    main() started: the limit the hang was confirmed at plus a cold start."""
    if EXPECT["verdict"] != "timeout":
        return
    import threading

    wait = EXPECT["timeout_s"]
    print(f"[repro] expecting a timeout: reproduced if there is no result within {wait:g} s "
          f"({EXPECT['timeout_note']})", flush=True)

    def expire():
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
    faulthandler.dump_traceback_later(wait + 10, exit=True)


def root(e):
    for _ in range(8):
        if type(e).__name__ not in WRAPPERS:
            break
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if not isinstance(inner, BaseException):
            break
        e = inner
    return e


def done(code, text):
    print(text, flush=True)
    sys.exit(code)


def failed(e):
    e = root(e)
    first = (str(e).strip().splitlines() or [""])[0]
    what = f"{type(e).__name__} during {STAGE}: {first}"
    if (EXPECT["verdict"] == "crash" and type(e).__name__ == EXPECT["error_class"]
            and STAGE == EXPECT["stage"]):
        done(1, f"REPRODUCED: crash: {what}")
    done(2, f"DIFFERENT FAILURE: {what} (expected {EXPECT['verdict']} "
            f"{EXPECT['error_class']} during {EXPECT['stage']})")


def judge(outs):
    """Why the outputs are wrong (off the reference and, where known, off the float64 truth
    too), or None."""
    expected = load("expected.npz")
    truth = load("truth.npz") if os.path.exists(os.path.join(HERE, "truth.npz")) else {}
    if len(outs) != len(expected):
        return f"{len(outs)} outputs, expected {len(expected)}"
    for i, a in enumerate(outs):
        a, e = np.asarray(a), expected[f"out{i}"]
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
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
            return (f"output {i} (input set {i // len(TOLERANCES)}): {int(bad.sum())}/{a.size} "
                    f"elements differ, max abs err {float(np.nanmax(err)) if err.size else 0:.3g}; "
                    f"{shown}")
    return None


def finish(outs):
    problem = judge(outs)
    if problem is None:
        done(0, "NOT REPRODUCED: every output matches the reference")
    if EXPECT["verdict"] == "mismatch":
        done(1, f"REPRODUCED: mismatch: {problem}")
    done(2, f"DIFFERENT FAILURE: mismatch: {problem} (expected {EXPECT['verdict']})")

import torch
from torch._higher_order_ops.scan import scan


def _fresh(ts):
    return tuple(t.clone(memory_format=torch.contiguous_format) for t in ts)


class Model(torch.nn.Module):
    """The graph as plain torch code (hop control flow)."""

    def __init__(self, params):
        super().__init__()
        for name, value in params.items():
            self.register_buffer(f"p_{name}", torch.from_numpy(value))

    def forward(self, x, x0, x1, x2):
        w1 = self.p_w1
        s1 = self.p_s1
        m1 = self.p_m1
        v1 = self.p_v1
        w2 = self.p_w2
        s2 = self.p_s2
        b2 = self.p_b2
        m2 = self.p_m2
        v2 = self.p_v2
        _t1 = torch.nn.functional.conv2d(x, w1, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        c1 = _t1
        def _combine7(carry, x):
            b8 = carry[0]
            b9 = carry[1]
            b10 = carry[2]
            b11 = carry[3]
            b12 = x[0]
            _t8 = b11.add(1e-05)
            _t9 = torch.rsqrt(_t8)
            _t10 = _t9.reshape((1, -1, 1, 1))
            _t11 = b10.reshape((1, -1, 1, 1))
            _t12 = b8.sub(_t11)
            _t13 = _t12.mul(_t10)
            _t14 = b9.reshape((1, -1, 1, 1))
            _t15 = _t13.mul(_t14)
            _t16 = b12.reshape((1, -1, 1, 1))
            _t17 = _t15.add(_t16)
            v14 = _t17
            _t18 = torch.nn.functional.softsign(v14)
            v15 = _t18
            _t19 = v15.sum(dim=0, keepdim=False, dtype=torch.float32)
            v16 = _t19
            _t20 = v16.sum(dim=0, keepdim=False, dtype=torch.float32)
            v17 = _t20
            _t21 = v17.sum(dim=0, keepdim=False, dtype=torch.float32)
            v18 = _t21
            _t22 = v18.sum(dim=0, keepdim=False, dtype=torch.float32)
            v19 = _t22
            return _fresh((v14, b9, b10, b11)), _fresh((v19,))
        _final23, _ys24 = scan(_combine7, _fresh((c1, s1, m1, v1)), _fresh((x1,)), dim=0, reverse=True)
        v20 = _final23[0]
        v21 = _final23[1]
        v22 = _final23[2]
        v23 = _final23[3]
        v24 = _ys24[0]
        _t25 = torch.relu(v20)
        a1 = _t25
        _t26 = torch.nn.functional.conv2d(a1, w2, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        c2 = _t26
        _t27 = v22.sum(dim=0, keepdim=False, dtype=torch.float32)
        v0 = _t27
        _t28 = torch.gt(v0, x2)
        v3 = _t28
        def _then30(b13, b14, b15, b16, b17, b18, b19):
            def _cond_fn36(i, n, *vs):
                return i < n
            def _body_fn37(i, n, b21, b22, b23, b24, b25):
                b20 = i
                _t38 = b25.add(1e-05)
                _t39 = torch.rsqrt(_t38)
                _t40 = _t39.reshape((1, -1, 1, 1))
                _t41 = b24.reshape((1, -1, 1, 1))
                _t42 = b21.sub(_t41)
                _t43 = _t42.mul(_t40)
                _t44 = b22.reshape((1, -1, 1, 1))
                _t45 = _t43.mul(_t44)
                _t46 = b23.reshape((1, -1, 1, 1))
                _t47 = _t45.add(_t46)
                v26 = _t47
                return (i + 1, n.clone(), v26.clone(memory_format=torch.contiguous_format), b22.clone(memory_format=torch.contiguous_format), b23.clone(memory_format=torch.contiguous_format), b24.clone(memory_format=torch.contiguous_format), b25.clone(memory_format=torch.contiguous_format))
            _final48 = torch.while_loop(_cond_fn36, _body_fn37, (torch.zeros((), dtype=torch.int64), b13.clone(), *_fresh((b14, b15, b16, b17, b18))))
            v27 = _final48[2]
            v28 = _final48[3]
            v29 = _final48[4]
            v30 = _final48[5]
            v31 = _final48[6]
            _t49 = torch.add(v27, b19)
            v32 = _t49
            return (v32.clone(memory_format=torch.contiguous_format),)
        def _else50(b33, b34, b35, b36, b37, b38, b39):
            def _cond_fn56(i, n, *vs):
                return i < n
            def _body_fn57(i, n, b41, b42, b43, b44, b45):
                b40 = i
                _t58 = b45.add(1e-05)
                _t59 = torch.rsqrt(_t58)
                _t60 = _t59.reshape((1, -1, 1, 1))
                _t61 = b44.reshape((1, -1, 1, 1))
                _t62 = b41.sub(_t61)
                _t63 = _t62.mul(_t60)
                _t64 = b42.reshape((1, -1, 1, 1))
                _t65 = _t63.mul(_t64)
                _t66 = b43.reshape((1, -1, 1, 1))
                _t67 = _t65.add(_t66)
                v46 = _t67
                return (i + 1, n.clone(), v46.clone(memory_format=torch.contiguous_format), b42.clone(memory_format=torch.contiguous_format), b43.clone(memory_format=torch.contiguous_format), b44.clone(memory_format=torch.contiguous_format), b45.clone(memory_format=torch.contiguous_format))
            _final68 = torch.while_loop(_cond_fn56, _body_fn57, (torch.zeros((), dtype=torch.int64), b33.clone(), *_fresh((b34, b35, b36, b37, b38))))
            v47 = _final68[2]
            v48 = _final68[3]
            v49 = _final68[4]
            v50 = _final68[5]
            v51 = _final68[6]
            _t69 = torch.cos(v47)
            v52 = _t69
            return (v52.clone(memory_format=torch.contiguous_format),)
        _cond70 = torch.cond(v3, _then30, _else50, (x0.clone(), c2.clone(), s2.clone(), b2.clone(), m2.clone(), v2.clone(), x.clone()))
        sum = _cond70[0]
        _t71 = torch.clamp(sum, -0.75, 0.75)
        out = _t71
        return (out, v24)

def main():
    import torch._inductor.config as icfg

    torch.set_num_threads(1)
    icfg.compile_threads = 1
    icfg.fx_graph_cache = False
    print(f"torch {torch.__version__}: torch.compile(backend='inductor', fullgraph=True, "
          f"dynamic=False) on cpu", flush=True)
    sets = input_sets()
    stage("import")
    try:
        params = {n: np.array(sets[0][n], copy=True) for n in PARAMS}
        model = Model(params).to('cpu').eval()
        compiled = torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)
        args = [[torch.from_numpy(np.array(s[n], copy=True)).to('cpu') for n in INPUTS]
                for s in sets]
    except Exception as e:
        failed(e)
    outs = []
    with torch.no_grad():
        stage("compile")
        try:
            compiled(*args[0])
        except Exception as e:
            failed(e)
        stage("run")
        try:
            for xs in args:
                out = compiled(*xs)
                outs += [o.detach().cpu().numpy() for o in out]
        except Exception as e:
            failed(e)
    finish(outs)


if __name__ == "__main__":
    watchdog()
    main()
