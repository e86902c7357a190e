"""Inductor: a torch.cond branch returning `x[2:].clone()` fails to compile with "RuntimeError:
When merging two branches' output in torch.cond,  expected same storage_offset but got 0 and 2"
(dynsmith F53, known upstream: pytorch#197489).

Inductor's post-grad pass `remove_noop_ops` (torch/_inductor/fx_passes/post_grad.py) removes a
`clone` whose value has the same size, stride, dtype and device as its source: `same_meta`
does not compare `storage_offset`, so the clone of the offset view `x[2:]` goes and the branch
returns the view itself, at storage offset 2, while the other branch returns a fresh buffer
(offset 0). The fake-tensor re-propagation of the cond then stops in cond's `_merge_output`
(torch/_higher_order_ops/cond.py), which requires equal storage offsets. eager, `eager` and
`aot_eager` backends run and agree; cpp_wrapper and gradients do not matter.

Cases (one line each: `<case> <backend> ok ...` or `<case> <backend> FAIL <error>`):

    clone  x[2:].clone() vs (x * 2)[2:].clone()   fails under inductor on 2.13.0 and 2.14.1
    add0   x[2:] + 0     vs x[:1] * 2             fails under inductor on 2.14.1 only: there
                                                  joint_graph's remove_no_ops turns `+ 0` into
                                                  the view (pytorch#197893)

    python inductor_cond_storage_offset_noop_clone.py                  # one line per case
    python inductor_cond_storage_offset_noop_clone.py --offset-check   # same_meta also compares
                                                                       # storage_offset
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")

if "--offset-check" in sys.argv:
    # the check the upstream fix adds: a clone of a view at another storage offset is no no-op
    from torch._inductor.fx_passes import post_grad as _pg

    _same_meta = _pg.same_meta

    def _same_meta_offset(node1, node2):
        if not _same_meta(node1, node2):
            return False
        v1, v2 = node1.meta["val"], node2.meta["val"]
        return v1.layout != torch.strided or v1.storage_offset() == v2.storage_offset()

    _pg.same_meta = _same_meta_offset


def f_clone(p, x):
    return torch.cond(p, lambda x: x[2:].clone(), lambda x: (x * 2)[2:].clone(), (x,))


def f_add0(p, x):
    return torch.cond(p, lambda x: x[2:] + 0, lambda x: x[:1] * 2, (x,))


CASES = {"clone": f_clone, "add0": f_add0}


def one_line(e):
    msg = " ".join(str(e).split("\n")[0].split())
    return f"{type(e).__name__}: {msg}"[:300]


def main():
    print(f"torch {torch.__version__}")
    torch.manual_seed(0)
    x = torch.randn(3)
    for name, f in CASES.items():
        for pv in (False, True):
            p = torch.tensor(pv)
            ref = f(p, x)
            for backend in ("eager", "aot_eager", "inductor"):
                torch._dynamo.reset()
                try:
                    got = torch.compile(f, backend=backend, fullgraph=True)(p, x)
                except Exception as e:                      # noqa: BLE001
                    print(f"{name:6} p={pv!s:5} {backend:9} FAIL {one_line(e)}", flush=True)
                    continue
                same = torch.allclose(got, ref)
                print(f"{name:6} p={pv!s:5} {backend:9} {'ok' if same else 'WRONG'} "
                      f"got={got.tolist()} eager={ref.tolist()}", flush=True)


if __name__ == "__main__":
    main()
