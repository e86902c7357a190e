"""The ops' facts for gradient tests: `Op.kinks` (a margin around every point where an op's
derivative jumps) and `Op.saves_for_backward` (whether torch's backward reads the operands or
results, which an in-place write may then not change).

Kinks: each measure is 0 away from its kinks, positive on them, and has a gradient just beside
them (the input search descends on it); the kink points are checked against torch itself (the
slope jumps there and nowhere the measure allows). Saves: every op declaring that it saves
nothing runs in torch eager with its operands and results written in place after it, and its
backward still runs; ops that do save fail the same way eager does."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ir.core.dtypes import DType
from ir.core.op import OP_REGISTRY, Op
from ir.core.types import TensorType
from ir.ops.common import margin
from ir.ops.conv import window_out

torch.set_num_threads(1)

F16, F32, F64 = torch.float16, torch.float32, torch.float64


def _op(name: str, **attrs) -> Op:
    return OP_REGISTRY[name](**attrs)


def _total(op: Op, *xs: torch.Tensor) -> torch.Tensor:
    """The sum of `op`'s kink measures, each checked to be a finite float tensor >= 0."""
    total = torch.zeros((), dtype=F64)
    for m in op.kinks(*xs):
        assert m.dtype.is_floating_point, (op.name, m.dtype)
        assert bool(torch.isfinite(m).all()) and bool((m >= 0).all()), (op.name, m)
        total = total + m.double().sum()
    return total


def _grad(op: Op, *xs: torch.Tensor) -> list[torch.Tensor]:
    """The gradient of the total kink measure w.r.t. each float operand (measure > 0 asserted)."""
    leaves = [x.clone().requires_grad_(x.is_floating_point()) for x in xs]
    total = _total(op, *leaves)
    assert total.item() > 0
    total.backward()
    return [x.grad for x in leaves if x.requires_grad]


def _float_dtypes(op: Op) -> list[torch.dtype]:
    """The float dtypes op's signatures give its first operand."""
    sigs = {s for n in type(op).arities() for s in type(op).signatures(n)}
    return sorted({ins[0].torch for ins, _ in sigs if ins[0].is_float}, key=str)


# ---- elementwise kinks ----------------------------------------------------------------------------

#: (op, attributes) -> its kink points: where torch's slope jumps
UNARY = {
    ("abs", ()): (0.0,),
    ("relu", ()): (0.0,),
    ("relu_", ()): (0.0,),
    ("selu", ()): (0.0,),
    ("leaky_relu", (("alpha", 0.1),)): (0.0,),
    ("leaky_relu", (("alpha", 1.0),)): (),
    ("elu", (("alpha", 0.5),)): (0.0,),
    ("elu", (("alpha", 1.5),)): (0.0,),
    ("elu", (("alpha", 1.0),)): (),
    ("hardsigmoid", ()): (-3.0, 3.0),
    ("hardswish", ()): (-3.0, 3.0),
    ("clip", (("lo", -0.75), ("hi", 1.75))): (-0.75, 1.75),
    ("clamp_", (("lo", -2.25), ("hi", 0.25))): (-2.25, 0.25),
}
UNARY_IDS = [name + "".join(f"[{k}={v}]" for k, v in attrs) for name, attrs in UNARY]


def _slope(op: Op, x: float) -> float:
    """d op(x) / dx by torch's autograd, in float64."""
    t = torch.tensor([x], dtype=F64, requires_grad=True)
    op.torch(t * 1).sum().backward()  # t * 1: relu_ and clamp_ write a non-leaf
    return t.grad.item()


@pytest.mark.parametrize(("key", "kinks"), list(UNARY.items()), ids=UNARY_IDS)
def test_unary_measure_is_zero_away_positive_on_and_descends_beside_each_kink(key, kinks):
    name, attrs = key
    op = _op(name, **dict(attrs))
    for dtype in _float_dtypes(op):
        far = [k + s for k in kinks for s in (-0.5, 0.5)] or [-1.0, 0.0, 1.0]
        assert _total(op, torch.tensor(far, dtype=dtype)).item() == 0, dtype
        for k in kinks:
            assert _total(op, torch.tensor([k], dtype=dtype)).item() > 0, (dtype, k)
            beside = k + torch.tensor([-0.5, 0.5], dtype=F64) * margin(dtype, abs(k))
            for x in beside.to(dtype):
                (g,) = _grad(op, x.reshape(1))
                assert g.abs().item() > 0.5, (dtype, k, x)


@pytest.mark.parametrize(("key", "kinks"), list(UNARY.items()), ids=UNARY_IDS)
def test_unary_kinks_are_where_torchs_slope_jumps(key, kinks):
    op = _op(key[0], **dict(key[1]))
    for k in kinks:
        assert abs(_slope(op, k - 1e-4) - _slope(op, k + 1e-4)) > 0.1, k
    for x in (-3.0, 0.0, 3.0):  # a kink of one op is a smooth point of the others
        if x not in kinks:
            assert abs(_slope(op, x - 1e-4) - _slope(op, x + 1e-4)) < 1e-2, x


@pytest.mark.parametrize(("key", "kinks"), list(UNARY.items()), ids=UNARY_IDS)
def test_unary_measure_vanishes_exactly_beyond_the_margin_where_the_slope_is_smooth(key, kinks):
    op = _op(key[0], **dict(key[1]))
    near_kinks = st.tuples(st.sampled_from(kinks or (0.0,)), st.floats(-0.05, 0.05)).map(sum)

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(x=st.one_of(st.floats(-5.0, 5.0), near_kinks))
    def check(x: float):
        gaps = [abs(x - k) - margin(F64, abs(k)) for k in kinks]
        assume(all(abs(g) > 1e-9 for g in gaps))
        flagged = _total(op, torch.tensor([x], dtype=F64)).item() > 0
        assert flagged == any(g < 0 for g in gaps)
        if not flagged:  # no jump within the margin: both sides agree (up to the curvature)
            h = 0.5 * margin(F64, 0.0)
            assert abs(_slope(op, x - h) - _slope(op, x + h)) < 0.05

    check()


@pytest.mark.parametrize("name", ["abs", "relu", "relu_", "clip", "clamp_"])
def test_integer_operands_have_no_kinks(name):
    attrs = {"lo": -1.0, "hi": 2.0} if name in ("clip", "clamp_") else {}
    assert _op(name, **attrs).kinks(torch.tensor([-1, 0, 2], dtype=torch.int32)) == []


def test_smooth_unaries_have_no_kinks():
    x = torch.tensor([-3.0, 0.0, 3.0])
    for name in ("neg", "sigmoid", "tanh", "gelu", "softsign", "sqrt", "floor", "sigmoid_"):
        assert _op(name).kinks(x) == [], name


# ---- max and min ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["max", "min"])
def test_binary_extremes_kink_at_ties_of_distinct_values(name):
    op = _op(name)
    x = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, 7.0]])
    assert _total(op, x, torch.tensor([0.0, 2.0, -0.5])).item() == 0  # broadcast, no tie
    assert _total(op, x, x).item() == 0  # the same value: either operand is it
    tie = op.kinks(x, torch.tensor([1.0, 5.0, 7.0]))[0]  # broadcast against both rows
    assert tie.shape == (2, 3)
    assert (tie > 0).tolist() == [[True, False, False], [False, False, True]]
    gx, gy = _grad(op, torch.tensor([2.0]), torch.tensor([2.001]))
    assert gx.item() > 0.5 and gy.item() < -0.5  # descent pushes them apart
    assert op.kinks(torch.tensor([1, 2]), torch.tensor([1, 3])) == []


def test_binary_extreme_margin_grows_with_magnitude():
    op = _op("max")
    assert _total(op, torch.tensor([1000.0]), torch.tensor([1000.5])).item() > 0
    assert _total(op, torch.tensor([1.0]), torch.tensor([1.5])).item() == 0
    assert _total(op, torch.tensor([1.0], dtype=F16), torch.tensor([1.04], dtype=F16)).item() > 0
    assert _total(op, torch.tensor([1.0]), torch.tensor([1.04])).item() == 0


# ---- reductions -----------------------------------------------------------------------------------

def test_reduce_max_and_min_kink_only_at_ties_for_their_extreme():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    mx, mn = _op("reduce_max", axis=1, keepdim=False), _op("reduce_min", axis=1, keepdim=True)
    assert (mx.kinks(x)[0] > 0).flatten().tolist() == [True, False]
    assert _total(mn, x).item() == 0  # 3 ties 3, but the minimum is 1
    assert (mn.kinks(-x)[0] > 0).flatten().tolist() == [True, False]
    # equal extremes of different slices, and ties below the extreme, are fine
    assert _total(mx, torch.tensor([[1.0, 2.0], [2.0, 1.0]])).item() == 0
    assert _total(_op("reduce_max", axis=0, keepdim=False), torch.tensor([5.0, 1.0, 1.0])).item() == 0
    (g,) = _grad(mx, torch.tensor([[1.0, 3.0, 2.995]]))
    assert g[0, 1].item() < -0.5 and g[0, 2].item() > 0.5


def test_reduce_extremes_of_one_element_or_integers_have_no_kinks():
    op = _op("reduce_max", axis=1, keepdim=True)
    assert op.kinks(torch.ones(3, 1)) == []
    assert op.kinks(torch.ones(3, 4, dtype=torch.int64)) == []
    assert _op("reduce_sum", axis=0, keepdim=True).kinks(torch.ones(3, 4)) == []


def test_topk_ties_are_its_domains_already():
    op = _op("topk", axis=0, k=2, largest=True)
    assert op.kinks(torch.tensor([3.0, 3.0, 1.0])) == []
    for x in ([3.0, 3.0, 1.0], [3.0, 2.0, 2.0]):  # a tie among the k, or at the k-th
        assert sum(m.sum() for m in op.domain(torch.tensor(x))).item() > 0, x
    assert sum(m.sum() for m in op.domain(torch.tensor([3.0, 2.0, 1.0]))).item() == 0


# ---- max pooling ----------------------------------------------------------------------------------

def _window_ties(x: torch.Tensor, kernel, stride, padding) -> torch.Tensor:
    """Brute force: whether each window's two largest real elements lie within the margin,
    unless both are exactly 0 (a structural zero carries no gradient: `tie_apart`)."""
    n = len(kernel)
    outs = [window_out(x.shape[2 + i], kernel[i], stride[i], padding[i]) for i in range(n)]
    ties = torch.zeros(tuple(x.shape[:2]) + tuple(outs), dtype=torch.bool)
    for idx in torch.cartesian_prod(*[torch.arange(o) for o in outs]).reshape(-1, n).tolist():
        ranges = [range(max(0, o * s - p), min(size, o * s - p + k)) for o, s, p, k, size
                  in zip(idx, stride, padding, kernel, x.shape[2:], strict=True)]
        window = x[(..., *[slice(r.start, r.stop) for r in ranges])].flatten(2)
        top = window.sort(dim=-1, descending=True).values
        if top.shape[-1] >= 2:
            hi, lo = top[..., 0].double(), top[..., 1].double()
            near = (hi - lo) < margin(x.dtype, torch.maximum(hi.abs(), lo.abs()))
            ties[(..., *idx)] = near & ~((hi == 0) & (lo == 0))
    return ties


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data())
def test_maxpool_kinks_are_exactly_the_ties_within_a_window(data):
    spatial = data.draw(st.sampled_from((1, 2)))
    kernel, stride, padding, sizes = [], [], [], []
    for _ in range(spatial):
        k = data.draw(st.integers(1, 4))
        p = data.draw(st.integers(0, k // 2))
        sizes.append(data.draw(st.integers(max(1, k - 2 * p), 6)))
        kernel.append(k), stride.append(data.draw(st.integers(1, 2))), padding.append(p)
    dtype = data.draw(st.sampled_from((F16, F32, F64)))
    shape = (1, 2, *sizes)
    x = torch.tensor(data.draw(st.lists(st.integers(-2, 2), min_size=math.prod(shape),
                                        max_size=math.prod(shape))), dtype=dtype).reshape(shape)
    op = _op(f"maxpool{spatial}d", kernel=tuple(kernel), stride=tuple(stride), padding=tuple(padding))
    measures = op.kinks(x)
    if math.prod(kernel) == 1:
        assert measures == []
        return
    (m,) = measures
    assert m.shape == op.torch(x).shape
    assert torch.equal(m > 0, _window_ties(x, kernel, stride, padding))
    leaf = x.clone().requires_grad_()
    _total(op, leaf).backward()
    assert bool(torch.isfinite(leaf.grad).all())  # the -inf padding leaves no NaN behind


def test_maxpool_ties_across_windows_are_fine_and_near_ties_descend():
    op = _op("maxpool1d", kernel=(2,), stride=(2,), padding=(0,))
    assert _total(op, torch.tensor([[[1.0, 2.0, 2.0, 0.0, 5.0, 4.0]]])).item() == 0
    overlapping = _op("maxpool1d", kernel=(3,), stride=(1,), padding=(1,))
    assert (overlapping.kinks(torch.tensor([[[1.0, 2.0, 2.0, 0.0]]]))[0] > 0).tolist() == \
        [[[False, True, True, False]]]
    (g,) = _grad(_op("maxpool2d", kernel=(2, 2), stride=(1, 1), padding=(0, 0)),
                 torch.tensor([[[[1.0, 3.0], [2.995, 0.0]]]]))
    assert g[0, 0, 0, 1].item() < -0.5 and g[0, 0, 1, 0].item() > 0.5


# ---- rnn ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("nonlinearity", ["relu", "tanh"])
@pytest.mark.parametrize("h0", [False, True])
def test_rnn_preactivations_give_its_outputs(direction, nonlinearity, h0):
    op = _op("rnn", hidden=3, direction=direction, nonlinearity=nonlinearity)
    nd, gen = op.num_directions, torch.Generator().manual_seed(0)
    seq, batch = 4, 2
    args = [torch.randn(s, generator=gen) for s in
            ((seq, batch, 5), (nd, 3, 5), (nd, 3, 3), (nd, 6), *([(nd, batch, 3)] if h0 else []))]
    y, y_h = op.torch(*args)
    act = torch.relu if nonlinearity == "relu" else torch.tanh
    pre = op.preactivations(*args)
    assert pre.shape == (nd, seq, batch, 3)
    torch.testing.assert_close(act(pre).permute(1, 2, 0, 3).reshape(seq, batch, nd * 3), y)
    assert (len(op.kinks(*args)) == 1) == (nonlinearity == "relu")


def test_rnn_relu_kinks_at_zero_preactivations():
    op = _op("rnn", hidden=2, direction="forward", nonlinearity="relu")
    x, w, r = torch.randn(3, 1, 4), torch.zeros(1, 2, 4), torch.zeros(1, 2, 2)
    assert _total(op, x, w, r, torch.zeros(1, 4)).item() > 0
    assert _total(op, x, w, r, torch.tensor([[1.0, -1.0, 0.0, 0.5]])).item() == 0
    _, _, _, gb = _grad(op, x, w, r, torch.tensor([[0.004, -1.0, 0.0, 0.0]]))
    assert gb[0, 0].item() < -0.5 and gb[0, 2].item() < -0.5  # both biases of unit 0 move it
    assert op.kinks(x.half(), w.half(), r.half(), torch.ones(1, 4).half())[0].dtype == F32


# ---- saves_for_backward ---------------------------------------------------------------------------

M = (3, 4)
#: ops declaring saves_for_backward=False: (name, attributes, operands as (shape, dtype))
SAVES_NOTHING: list[tuple[str, dict, list[tuple[tuple[int, ...], torch.dtype]]]] = [
    ("add", {}, [(M, F32), ((4,), F32)]),
    ("add", {}, [(M, F16), ((1, 4), F16)]),
    ("sub", {}, [(M, F32), (M, F32)]),
    *[(c, {}, [(M, F32), ((4,), F32)]) for c in ("eq", "lt", "gt", "le", "ge")],
    *[(u, {}, [(M, F32)]) for u in ("neg", "floor", "ceil", "round", "sign")],
    ("cast", {"to": DType.float16}, [(M, F32)]),
    ("cast", {"to": DType.float32}, [(M, F16)]),
    ("cast", {"to": DType.float64}, [(M, F32)]),
    ("cast", {"to": DType.float32}, [(M, torch.int32)]),
    ("reduce_sum", {"axis": 1, "keepdim": True}, [(M, F32)]),
    ("reduce_mean", {"axis": 0, "keepdim": False}, [(M, F32)]),
    ("argmax", {"axis": 1, "keepdim": False}, [(M, F32)]),
    ("argmin", {"axis": 0, "keepdim": True}, [(M, F32)]),
    ("cumsum", {"axis": 1}, [(M, F32)]),
    ("gather", {"axis": 1, "indices": (0, 0, 3)}, [(M, F32)]),
    ("triu", {"k": 1}, [(M, F32)]),
    ("tril", {"k": -1}, [((2, 3, 4), F32)]),
    ("pad_constant", {"value": 0.25, "pads": (1, 2)}, [((2, 3, 4), F32)]),
    ("pad_constant", {"value": 0.0, "pads": (1, 0, 0, 2)}, [((2, 3, 4), F32)]),
    ("resize_nearest", {"scales": (2,)}, [((1, 2, 3), F32)]),
    ("resize_nearest", {"scales": (2, 3)}, [((1, 2, 3, 4), F32)]),
    ("resize_linear", {"scales": (3,)}, [((1, 2, 3), F32)]),
    ("resize_linear", {"scales": (2, 2)}, [((1, 2, 3, 4), F16)]),
    ("reshape", {"shape": (2, 6)}, [(M, F32)]),
    ("flatten", {"axis": 1}, [((2, 3, 4), F32)]),
    ("squeeze", {"axis": 0}, [((1, 3, 4), F32)]),
    ("unsqueeze", {"axis": 1}, [(M, F32)]),
    ("expand", {"shape": (2, 3, 4)}, [((3, 1), F32)]),
    ("transpose", {"perm": (2, 0, 1)}, [((2, 3, 4), F32)]),
    ("tile", {"repeats": (2, 1)}, [(M, F32)]),
    ("concat", {"axis": 0}, [(M, F32), ((2, 4), F32), ((1, 4), F32)]),
    ("slice", {"axis": 1, "start": 0, "end": 3, "step": 2}, [(M, F32)]),
    ("split2", {"axis": 0, "sizes": (1, 2)}, [(M, F32)]),
    ("split3", {"axis": 1, "sizes": (1, 1, 2)}, [(M, F32)]),
    ("view_slice", {"axis": 0, "start": 1, "end": 3, "step": 1}, [(M, F32)]),
    ("view_select", {"axis": 1, "index": 2}, [(M, F32)]),
    ("view_reshape", {"shape": (2, 6)}, [(M, F32)]),
    ("view_permute", {"perm": (1, 0)}, [(M, F32)]),
    ("view_diagonal", {"offset": 1, "dim1": 0, "dim2": 1}, [(M, F32)]),
    ("view_expand", {"shape": (2, 3, 4)}, [(M, F32)]),
    ("view_unfold", {"dim": 1, "size": 2, "step": 2}, [(M, F32)]),
    ("slice_scatter", {"axis": 1, "start": 0, "end": 4, "step": 2}, [(M, F32), ((3, 2), F32)]),
    ("select_scatter", {"axis": 0, "index": 1}, [(M, F32), ((4,), F32)]),
    ("diagonal_scatter", {"offset": 0, "dim1": 0, "dim2": 1}, [(M, F32), ((3,), F32)]),
    ("unfold_scatter", {"dim": 1, "size": 2, "step": 2}, [(M, F32), ((3, 2, 2), F32)]),
    ("clone", {}, [(M, F32)]),
    ("add_", {}, [(M, F32), ((4,), F32)]),
    ("add_", {}, [(M, F32), ((4,), F16)]),
    ("sub_", {}, [(M, F32), (M, F32)]),
    ("copy_", {}, [(M, F32), ((4,), F32)]),
    ("copy_", {}, [(M, F32), (M, F16)]),
    ("copy_", {}, [(M, F64), ((4,), torch.int64)]),
    ("fill_", {"value": 2.0}, [(M, F32)]),
    ("setitem", {"starts": (0, 1), "ends": (2, 2), "steps": (1, 0)}, [(M, F32), ((2,), F32)]),
    ("index_put_", {"depth": 1, "indices": (0, 2), "accumulate": False}, [(M, F32), ((2, 4), F32)]),
    ("index_put_", {"depth": 1, "indices": (0, 0), "accumulate": True}, [(M, F32), ((4,), F32)]),
    ("index_put", {"depth": 2, "indices": (0, 1, 2, 3), "accumulate": False}, [(M, F32), ((2,), F32)]),
    ("index_put", {"depth": 1, "indices": (1, 1), "accumulate": True}, [(M, F32), ((2, 4), F32)]),
    ("fill", {"value": -1.5}, [(M, F32)]),
]

#: ops that do save: (name, attributes, operands, what a write to breaks the backward)
SAVES: list[tuple[str, dict, list[tuple[tuple[int, ...], torch.dtype]], str]] = [
    ("mul", {}, [(M, F32), (M, F32)], "operands"),
    ("relu", {}, [(M, F32)], "results"),
    ("pad_reflect", {"pads": (1, 1)}, [((2, 3, 4), F32)], "operands"),
    ("avgpool1d", {"kernel": (2,), "stride": (1,), "padding": (1,)}, [((1, 2, 4), F32)], "operands"),
    ("topk", {"axis": 1, "k": 2, "largest": True}, [(M, F32)], "results"),  # the indices
    ("where", {}, [(M, torch.bool), (M, F32), (M, F32)], "operands"),  # the condition
    ("masked_fill", {"value": 1.0}, [(M, F32), (M, torch.bool)], "operands"),  # the mask
]

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


def _case_id(case: tuple) -> str:
    name, attrs, operands = case[:3]
    return f"{name}[{','.join(f'{k}={v}' for k, v in attrs.items())}]" + \
        "(" + ",".join(str(dt).removeprefix("torch.") for _, dt in operands) + ")"


def _tensor(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    if not dtype.is_floating_point:
        return torch.randint(-3, 4, shape, generator=gen, dtype=dtype)
    return torch.randn(shape, generator=gen).to(dtype)


def _write(t: torch.Tensor) -> None:
    """Write `t` in place, as a later instruction would (outside autograd). Where elements
    repeat (an expanded view) torch refuses the write: its version count is raised instead,
    which is all a write does to autograd's bookkeeping."""
    if any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape, strict=True)):
        torch.autograd.graph.increment_version(t)
    elif t.dtype == torch.bool:
        t.logical_not_()
    else:
        t.add_(1)


def _backward_after_writes(op: Op, operands: list[torch.Tensor], write: str) -> None:
    """Run `op` on non-leaf copies of `operands` (float ones requiring grad), write its
    operands or its results in place, then back-propagate a loss built before the writes."""
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in operands]
    args = [t * 1 if t.requires_grad else t for t in leaves]  # non-leaves: writable in place
    out = op.torch(*args)
    outs = list(out) if isinstance(out, tuple) else [out]
    diff = [o for o in outs if o.requires_grad]
    loss = sum((o.double().sum() for o in diff), torch.zeros((), dtype=F64))
    with torch.no_grad():
        for t in args if write == "operands" else outs:
            _write(t)
    if diff:
        loss.backward()


def _check_case(op: Op, operands: list[torch.Tensor]) -> None:
    """The case is a valid instance: the op accepts these operand types and infers torch's."""
    types = [TensorType(tuple(t.shape), next(d for d in DType if d.torch == t.dtype)) for t in operands]
    assert op.result_dtypes(tuple(t.dtype for t in types)) is not None
    assert all(c is True for c in op.requires(types)) and op.problem(types) is None
    out = op.torch(*[t.clone() for t in operands])
    outs = list(out) if isinstance(out, tuple) else [out]
    assert [(tuple(t.shape), t.dtype) for t in op.infer(types)] == \
        [(tuple(o.shape), next(d for d in DType if d.torch == o.dtype)) for o in outs]


@pytest.mark.parametrize("case", SAVES_NOTHING, ids=[_case_id(c) for c in SAVES_NOTHING])
@pytest.mark.parametrize("write", ["operands", "results"])
def test_ops_that_save_nothing_back_propagate_after_their_operands_and_results_are_written(case, write):
    name, attrs, specs = case
    op = _op(name, **attrs)
    assert not op.saves_for_backward
    gen = torch.Generator().manual_seed(0)
    operands = [_tensor(shape, dtype, gen) for shape, dtype in specs]
    _check_case(op, operands)
    _backward_after_writes(op, operands, write)


@pytest.mark.parametrize("case", SAVES, ids=[_case_id(c) for c in SAVES])
def test_ops_that_save_fail_in_eager_when_what_they_saved_is_written(case):
    name, attrs, specs, breaks = case
    op = _op(name, **attrs)
    assert op.saves_for_backward
    gen = torch.Generator().manual_seed(0)
    operands = [_tensor(shape, dtype, gen) for shape, dtype in specs]
    _check_case(op, operands)
    with pytest.raises(RuntimeError, match=MODIFIED):
        _backward_after_writes(op, operands, breaks)


def test_every_op_declaring_it_saves_nothing_is_checked():
    declared = {n for n, c in OP_REGISTRY.items() if not c.saves_for_backward}
    no_float = {n for n in declared
                if not any(d.is_float for k in OP_REGISTRY[n].arities()
                           for ins, _ in OP_REGISTRY[n].signatures(k) for d in ins)}
    # int and bool ops take no gradient at all
    assert no_float == {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and",
                        "logical_or", "logical_xor", "logical_not"}
    assert declared - no_float == {name for name, _, _ in SAVES_NOTHING}


def test_exact_ties_at_zero_carry_no_gradient_and_are_allowed():
    """relu then max pooling (or max, or reduce_max) ties the negative windows at exactly 0:
    no gradient reaches them, so the tie is no kink; a tie at any other value still is."""
    from ir.core.op import OP_REGISTRY

    zeros = torch.zeros(1, 1, 4)
    pool = OP_REGISTRY["maxpool1d"](kernel=(2,), stride=(2,), padding=(0,))
    assert not bool((pool.kinks(zeros)[0] > 0).any())
    assert bool((pool.kinks(torch.full((1, 1, 4), 0.5))[0] > 0).all())
    mx = OP_REGISTRY["max"]()
    assert not bool((mx.kinks(torch.zeros(3), torch.zeros(3))[0] > 0).any())
    assert bool((mx.kinks(torch.ones(3), torch.ones(3).clone())[0] > 0).all())
    rmax = OP_REGISTRY["reduce_max"](axis=0, keepdim=False)
    assert not bool((rmax.kinks(torch.zeros(3))[0] > 0).any())
    assert bool((rmax.kinks(torch.tensor([2.0, 2.0, 1.0]))[0] > 0).any())
