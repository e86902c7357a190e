"""NNSmith's models as dynsmith graphs: the converter behind `bench/coverage_race.py`'s NNSmith side.

Set-up: NNSmith 0.1.0 pins old packages, so it lives in a venv of its own that sees the system
packages (torch, onnx, z3):

    python -m venv --system-site-packages /tmp/nns
    /tmp/nns/bin/pip install --no-deps nnsmith appdirs multipledispatch

Run by that interpreter from the repository root (the script puts the root on sys.path):

    /tmp/nns/bin/python bench/nnsmith_graphs.py --seed-start 0 --count 100 --nodes 10 [--check]

Output contract: one JSON line per seed on stdout, flushed, nothing else on stdout:
`{"seed": s, "cpu_s": <time.process_time() so far>, "gir": <dynsmith text form or null>,
"why": <null or a one-line reason>}`. `--count 0` runs forever. Logs go to stderr.

Generation is NNSmith's own: `model_gen(opset=Model.init("onnx").operators(),
method="symbolic-cinit", seed=s, max_nodes=N, timeout_ms=10000).make_concrete()` (the ONNX
model type's op set, as NNSmith's ONNX/TVM campaigns use; it includes the torch dialect's
Linear, Flatten, PTMatMul and TorchReduceSum, since NNSmith's ONNX models are exported from
torch). Departures needed on this machine's packages: `onnx._serialize` is
`SerializeToString` (bench/nnsmith_loop.py), and a generation that raises is reported (`why`).

Mapping rules (each NNSmith op to dynsmith ops with exactly its torch semantics; the reference
for NNSmith's semantics is its torch materialization, `nnsmith.materialize.torch.forward`):
  - NNSmith `Input` -> a graph input; `Constant` (a weight placeholder) -> a param; the weights
    of NNSmith's torch modules -> params: Conv1d/NCHWConv2d weight [O,I,k..] and bias (as a
    param of shape [O,1(,1)] added after the conv: `nn.Conv*d` has bias=True), Linear weight
    [O,I] and bias [O], BatchNorm2d weight/bias/running_mean/running_var [C] (eval mode, the
    ONNX export's mode, eps 1e-5), PReLU weight [1]. Values are not needed (the harness
    searches them); `--check` takes them from NNSmith's own torch model.
  - dtypes f16/f32/f64/i32/i64/bool map one to one; any other dtype (NNSmith also draws int8,
    int16, uint8, complex) is not converted.
  - outputs: NNSmith's (its leaf vars, in order) less repeats and inputs/params (from an
    identity mapping or an unused placeholder), unless none would be left.
  - one-to-one: elementwise ops (Abs, Neg, ReLU, GELU (exact), LeakyReLU (alpha 0.01), Sigmoid,
    Sin, Cos, Tan, Asin, Acos, Atan, Ceil, Floor, Round, Sqrt), Clip (torch bounds +-1.5 for
    floats, +-1 for ints), broadcasting binaries (Add, Sub, Mul, Div, Pow, Max, Min, Equal,
    Greater, Less, And, Or, Xor), Where, Softmax, Transpose (the dim0/dim1 swap as a perm),
    Reshape, Squeeze, reductions (keepdim false), ArgMax/ArgMin, Tril/Triu, Cast, Slice (NNSmith's
    regions and INT_MAX end normalised to 0 <= start < end <= dim), Concat2/3, MaxPool2d and
    AvgPool2d (count_include_pad, floor mode: torch's defaults), Linear, BatchNorm2d,
    NearestInterp/LinearInterp/BilinearInterp when the target size is an integer multiple of
    the input size (then torch's `size=` equals dynsmith's integer `scales`).
  - exact compositions: Concat1, a Cast to the same dtype, a zero Pad and an Expand that grows
    nothing at the same rank are the identity (the value itself); Concat4/5 = nested concats;
    Flatten = reshape to [numel]; a Cast of floats to bool = logical_not(eq(x, fill(x, 0)));
    Log2 = log(x) / fill(x, ln 2) (what torch's ONNX exporter emits for log2: ONNX has no Log2);
    TorchReduceSum of an int32 = cast to int64 then reduce_sum (torch accumulates ints in int64);
    PReLU(x, w) = relu(x) - w * relu(-x); Conv = conv (groups 1) + bias; a conv padding above
    dynsmith's 2 = a zero pad_constant chain then the conv unpadded; MatMul: 1-D operands through
    unsqueeze/squeeze (torch.matmul's rule), a rank-2 (or 1) right operand = dynsmith matmul; a
    batched right operand = broadcast mul + reduce_sum over k (exact in value: the products and
    their sum, in another summation order); Pad: negative pads = slice, positive pads = chained
    pad ops of <= 3 per side (constant/replicate pads compose exactly; reflect only in one
    step), on dynsmith's trailing padded dims, with the leading dims merged by a reshape where
    dynsmith's pads do not take that many trailing dims at this rank, and pads of more than 2
    dims (or of dim 0) one dim at a time through transposes (the pads are separable).
  - not converted (`why` names the op): BicubicInterp, TrilinearInterp, interpolation to
    a non-multiple size, and whatever dynsmith's verifier refuses (dtype signatures narrower
    than NNSmith's, e.g. f64 tan/atan/asin/acos/gelu/leaky_relu/pool/conv; pool kernels > 5;
    pads of leading dims).

Figures (this machine, 2 shared cores, nodes 10, seeds 0..299, `--check`):
  - `--opset onnx` (default): 300 generated, 103 converted (34.3%), 0 check failures.
    Not converted: dtypes dynsmith lacks (complex64/128 34, uint8 16, int16 13, int8 11),
    float -> int casts (CastI32/CastI64 41: dynsmith's cast refuses them by design), f64 where
    dynsmith's op is f16/f32 only (LeakyReLU 12, Asin 10, GELU 8, Tan 7, Atan 7, Acos 4,
    AvgPool2d/MaxPool2d some), interpolation (Trilinear 6, Bicubic 5, non-multiple sizes 8,
    3-D nearest 4), pool kernels > 5, a reflect pad > 3.
  - `--opset ort` (NNSmith's ORT campaign op set): 300 generated, 172 converted (57.3%),
    0 check failures. Not converted: float -> int casts 47, uint8 18, int16 16, int8 11, GELU on
    f64 17, interpolation 15, pools 4.
  - the check ran every converted model on 3 input draws (one skipped: a value > 4M elements);
    every dynsmith op the mapping emits occurred in checked models (conv1d/conv2d/batch_norm/
    resize/pads among them). A per-op run (model_gen with a one-op op set, 6 seeds per op of
    the onnx set) also found no disagreement.
  - time: generation + conversion ~13 ms CPU per model after ~2 s of start-up (import, op
    set); the conversion itself (build + verify) 0.4-0.5 ms per model.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import ir.ops  # noqa: E402,F401  (registers the op library)
from ir.core.dtypes import DType  # noqa: E402
from ir.core.graph import Graph, Inst, Value  # noqa: E402
from ir.core.op import OP_REGISTRY, Op  # noqa: E402
from ir.core.shapes import holds  # noqa: E402
from ir.core.text import print_graph  # noqa: E402
from ir.core.types import TensorType  # noqa: E402
from ir.core.verify import VerifyError, verify  # noqa: E402

LOG = logging.getLogger("nnsmith_graphs")
INT_MAX = 2**63 - 1
MAX_PAD = 3  # dynsmith's pad ops: at most 3 per side
MAX_CONV_PAD = 2  # dynsmith's conv ops: padding <= 2


class Unconvertible(Exception):
    """The model has no exact dynsmith form; the message is the one-line `why`."""


@dataclass(frozen=True)
class WeightSource:
    """Where `--check` reads a param's value in NNSmith's SymbolNet: instruction `index`'s
    module attribute `attr` (`data` for a Constant), reshaped to the param's shape."""

    index: int
    attr: str


@dataclass
class Converted:
    graph: Graph
    #: NNSmith input var -> dynsmith input name (in SymbolNet's input order)
    inputs: dict[str, str]
    #: dynsmith param name -> its value's place in NNSmith's torch model
    weights: dict[str, WeightSource]
    #: for each dynsmith output, the index of NNSmith's output (a leaf var) it is
    kept: list[int]


@dataclass
class Builder:
    """A dynsmith graph under construction; every op is type-checked as it is added."""

    inputs: list[Value] = field(default_factory=list)
    params: list[Value] = field(default_factory=list)
    insts: list[Inst] = field(default_factory=list)
    types: dict[str, TensorType] = field(default_factory=dict)
    weights: dict[str, WeightSource] = field(default_factory=dict)
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def input(self, t: TensorType) -> str:
        name = self.fresh("x")
        self.inputs.append(Value(name, t))
        self.types[name] = t
        return name

    def param(self, t: TensorType, src: WeightSource) -> str:
        name = self.fresh("w")
        self.params.append(Value(name, t))
        self.types[name] = t
        self.weights[name] = src
        return name

    def emit(self, op: Op, args: Sequence[str], what: str) -> list[str]:
        """Add `op(args)`; raise Unconvertible (naming `what`) if dynsmith refuses it."""
        ins = [self.types[a] for a in args]
        dts = tuple(t.dtype for t in ins)
        if op.result_dtypes(dts) is None:
            raise Unconvertible(f"{what}: dynsmith {op.name} takes no ({','.join(d.short for d in dts)})")
        problem = op.problem(ins)
        if problem:
            raise Unconvertible(f"{what}: dynsmith {op.name}: {problem}")
        for c in op.requires(ins):
            if not holds(c):
                raise Unconvertible(f"{what}: dynsmith {op.name} {_attrs(op)} refuses {_types(ins)}")
        outs = op.infer(ins)
        results = tuple(Value(self.fresh("v"), t) for t in outs)
        self.insts.append(Inst(op, tuple(args), results))
        for r in results:
            self.types[r.name] = r.type
        return [r.name for r in results]

    def op(self, name: str, args: Sequence[str], what: str, **attrs: Any) -> str:
        (out,) = self.emit(OP_REGISTRY[name](**attrs), args, what)
        return out

    def graph(self, outputs: Sequence[str]) -> Graph:
        return Graph("nnsmith", tuple(self.inputs), tuple(self.insts), tuple(outputs), tuple(self.params))


def _attrs(op: Op) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in op.attrs().items()) + "}"


def _types(ts: Sequence[TensorType]) -> str:
    return " ".join(str(t) for t in ts)


# ---- dtypes -------------------------------------------------------------------------------------
_DTYPES = {"float16": DType.float16, "float32": DType.float32, "float64": DType.float64,
           "int32": DType.int32, "int64": DType.int64, "bool": DType.bool}


def dtype_of(d: Any) -> DType:
    try:
        return _DTYPES[d.name]
    except KeyError:
        raise Unconvertible(f"dtype {d.name}") from None


def ttype(abs_tensor: Any) -> TensorType:
    shape = tuple(int(s) for s in abs_tensor.shape)
    if any(s < 1 for s in shape):
        raise Unconvertible(f"zero-size dim in {shape}")
    return TensorType(shape, dtype_of(abs_tensor.dtype))


# ---- the op mapping ------------------------------------------------------------------------------
#: (op, args, SymbolNet instruction index) -> result names
Rule = Callable[["Ctx", Any, list[str]], list[str]]

UNARY = {"ReLU": "relu", "GELU": "gelu", "Sigmoid": "sigmoid", "Sin": "sin", "Cos": "cos",
         "Asin": "asin", "Acos": "acos", "Tan": "tan", "Atan": "atan", "Abs": "abs",
         "Ceil": "ceil", "Floor": "floor", "Round": "round", "Sqrt": "sqrt", "Neg": "neg"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "max",
          "Min": "min", "Equal": "eq", "Greater": "gt", "Less": "lt", "And": "logical_and",
          "Or": "logical_or", "Xor": "logical_xor"}
REDUCE = {"ReduceSum": "reduce_sum", "TorchReduceSum": "reduce_sum", "ReduceMin": "reduce_min",
          "ReduceMax": "reduce_max", "ReduceMean": "reduce_mean", "ReduceProd": "reduce_prod",
          "ArgMax": "argmax", "ArgMin": "argmin"}
UNMAPPED = {"BicubicInterp": "no bicubic resize in dynsmith",
            "TrilinearInterp": "no trilinear resize in dynsmith"}


@dataclass
class Ctx:
    """The builder plus what a rule needs of the NNSmith instruction being converted."""

    b: Builder
    name: str  # NNSmith op class name
    index: int  # the instruction's index in SymbolNet.instructions
    in_types: list[TensorType]
    out_types: list[TensorType]

    def op(self, name: str, args: Sequence[str], **attrs: Any) -> str:
        return self.b.op(name, args, self.name, **attrs)

    def weight(self, shape: tuple[int, ...], attr: str, dtype: DType = DType.float32) -> str:
        return self.b.param(TensorType(shape, dtype), WeightSource(self.index, attr))

    def type(self, name: str) -> TensorType:
        return self.b.types[name]


def conv_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    (x,) = args
    spatial = 1 if c.name == "Conv1d" else 2
    if spatial == 1:
        k, dil = (op.kernel_size,), (op.dilation,)
    else:
        k, dil = (op.kernel_h_size, op.kernel_w_size), (op.dilation_h, op.dilation_w)
    pad = op.padding
    if pad > MAX_CONV_PAD:  # zero-pad first (exact: the conv pads with zeros), then no padding
        x = pad_chain(c, x, "pad_constant", [(pad, pad)] * spatial, value=0.0)
        pad = 0
    w = c.weight((op.out_channels, op.in_channels, *k), "weight")
    name = "conv1d" if spatial == 1 else "conv2d"
    y = c.op(name, [x, w], stride=(op.stride,) * spatial, padding=(pad,) * spatial,
             dilation=dil, groups=1)
    bias = c.weight((op.out_channels,) + (1,) * spatial, "bias")
    return [c.op("add", [y, bias])]


def pad_chain(c: Ctx, x: str, op_name: str, pairs: list[tuple[int, int]], **attrs: Any) -> str:
    """Pad the last len(pairs) dims (pairs in dim order) by >= 0 amounts, in steps of <= 3
    per side (exact for constant and replicate pads: padding twice = padding by the sum). Where
    dynsmith's pads do not take that many trailing dims of this rank, the leading dims are
    merged into one first and split back after (exact: the pads act on the trailing dims only)."""
    shape = c.type(x).shape
    rank, n = len(shape), len(pairs)
    if n >= rank and pairs[0] == (0, 0):
        pairs, n = pairs[1:], n - 1
    if n > 2 or n >= rank + (rank == 1):
        raise Unconvertible(f"{c.name}: pads of {n} dims of a rank-{rank} value")
    lead = shape[: rank - n]
    reshaped = n not in range(max(1, rank - 2), min(2, rank - 1) + 1)  # dynsmith Pad.padded_dims
    if reshaped:
        x = c.op("reshape", [x], shape=(math.prod(lead), *shape[rank - n:]))
    rest = [list(p) for p in pairs]
    while any(v > 0 for p in rest for v in p):
        if op_name == "pad_reflect" and any(v > MAX_PAD for p in rest for v in p):
            raise Unconvertible(f"{c.name}: reflect pad > {MAX_PAD}")
        step = [min(v, MAX_PAD) for p in rest for v in p]
        x = c.op(op_name, [x], pads=tuple(step), **attrs)
        rest = [[max(v - MAX_PAD, 0) for v in p] for p in rest]
    if reshaped:
        x = c.op("reshape", [x], shape=(*lead, *c.type(x).shape[1:]))
    return x


def pad_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    (x,) = args
    lst = list(op.padding_list)
    n = len(lst) // 2
    # torch's list: (lo, hi) of the last dim first
    pairs = [(lst[2 * i], lst[2 * i + 1]) for i in range(n)][::-1]
    rank = c.in_types[0].rank
    for j, (lo, hi) in enumerate(pairs):  # negative pads crop: a slice
        axis = rank - n + j
        if lo < 0 or hi < 0:
            size = c.type(x).shape[axis]
            x = c.op("slice", [x], axis=axis, start=max(-lo, 0), end=size - max(-hi, 0), step=1)
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    while pos and pos[0] == (0, 0):  # only the dims that grow
        pos = pos[1:]
    if not pos:
        return [x]
    kind = op.extra_attrs["type"]
    name, attrs = ("pad_constant", {"value": 0.5}) if kind == "constant" else (f"pad_{kind}", {})
    if len(pos) <= 2 and len(pos) < rank:
        return [pad_chain(c, x, name, pos, **attrs)]
    return [pad_per_dim(c, x, name, pos, **attrs)]


def pad_per_dim(c: Ctx, x: str, op_name: str, pairs: list[tuple[int, int]], **attrs: Any) -> str:
    """Pads of more trailing dims than one dynsmith pad takes: one dim at a time, each moved
    last by a transpose and back (exact: constant, replicate and reflect pads are separable)."""
    rank = c.type(x).rank
    for j, pair in enumerate(pairs):
        axis = rank - len(pairs) + j
        if pair == (0, 0):
            continue
        if axis == rank - 1:
            x = pad_chain(c, x, op_name, [pair], **attrs)
            continue
        perm = _swap(rank, axis, rank - 1)
        x = c.op("transpose", [x], perm=perm)
        x = pad_chain(c, x, op_name, [pair], **attrs)
        x = c.op("transpose", [x], perm=perm)
    return x


def slice_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    axis = op.extra_attrs["axis"]
    size = c.in_types[0].shape[axis]
    end = size if op.end == INT_MAX else min(op.end, size)
    return [c.op("slice", args, axis=axis, start=op.start, end=end, step=op.step)]


def expand_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    """x.expand(out shape); at the same rank with nothing grown it is the identity."""
    src, dst = c.in_types[0].shape, c.out_types[0].shape
    if tuple(dst) == tuple(src):
        return args
    return [c.op("expand", args, shape=tuple(dst))]


def concat_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    axis = op.extra_attrs["axis"]
    if len(args) == 1:
        return args
    x = c.op("concat", args[:3], axis=axis)
    rest = args[3:]
    while rest:
        x = c.op("concat", [x, *rest[:2]], axis=axis)
        rest = rest[2:]
    return [x]


def matmul_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    a, b = args
    ra, rb = c.in_types[0].rank, c.in_types[1].rank
    if ra == 1:
        a = c.op("unsqueeze", [a], axis=0)
    if rb == 1:
        b = c.op("unsqueeze", [b], axis=1)
    if c.type(b).rank == 2:
        y = c.op("matmul", [a, b])
    else:
        y = batched_matmul(c, a, b)
    if rb == 1:
        y = c.op("squeeze", [y], axis=c.type(y).rank - 1)
    if ra == 1:
        y = c.op("squeeze", [y], axis=c.type(y).rank - 2 if c.type(y).rank >= 2 else 0)
    return [y]


def batched_matmul(c: Ctx, a: str, b: str) -> str:
    """a[..., m, k] @ b[..., k, n] = sum_k a[..., m, k, 1] * b[..., 1, k, n]."""
    a4 = c.op("unsqueeze", [a], axis=c.type(a).rank)
    b4 = c.op("unsqueeze", [b], axis=c.type(b).rank - 2)
    prod = c.op("mul", [a4, b4])
    return c.op("reduce_sum", [prod], axis=c.type(prod).rank - 2, keepdim=False)


def reduce_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    (x,) = args
    axis = op.extra_attrs["reduce_dim"]
    if axis is None:
        raise Unconvertible(f"{c.name} of a scalar")
    if c.name == "TorchReduceSum" and c.type(x).dtype is DType.int32:
        x = c.op("cast", [x], to=DType.int64)
    return [c.op(REDUCE[c.name], [x], axis=axis, keepdim=False)]


def interp_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    src = c.in_types[0].shape[2:]
    size = list(op.size)
    if len(size) not in (1, 2):
        raise Unconvertible(f"{c.name} over {len(size)} spatial dims")
    if any(t % s for t, s in zip(size, src, strict=True)):
        raise Unconvertible(f"{c.name} to a non-multiple size")
    scales = tuple(t // s for t, s in zip(size, src, strict=True))
    name = "resize_nearest" if c.name == "NearestInterp" else "resize_linear"
    return [c.op(name, args, scales=scales)]


def prelu_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    """prelu(x) = x if x >= 0 else w * x = relu(x) - w * relu(-x)."""
    (x,) = args
    w = c.weight((1,) if c.in_types[0].rank else (), "weight")
    pos = c.op("relu", [x])
    neg = c.op("relu", [c.op("neg", [x])])
    return [c.op("sub", [pos, c.op("mul", [w, neg])])]


def log2_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    """log2(x) = log(x) / ln 2, as torch's ONNX exporter writes it (ONNX has no Log2): the ln 2
    is a `fill` of x's shape."""
    (x,) = args
    ln2 = c.op("fill", [x], value=math.log(2.0))
    return [c.op("div", [c.op("log", [x]), ln2])]


def cast_rule(c: Ctx, op: Any, args: list[str]) -> list[str]:
    to = dtype_of(op.extra_attrs["to"])
    if c.in_types[0].dtype is to:
        return args
    if to is DType.bool and c.in_types[0].dtype.is_float:  # x.to(bool) = (x != 0), NaN -> True
        (x,) = args
        zero = c.op("fill", [x], value=0.0)
        return [c.op("logical_not", [c.op("eq", [x, zero])])]
    return [c.op("cast", args, to=to)]


def simple(fn: Callable[[Ctx, Any, list[str]], str]) -> Rule:
    return lambda c, op, args: [fn(c, op, args)]


RULES: dict[str, Rule] = {
    **{k: simple(lambda c, op, a, n=v: c.op(n, a)) for k, v in UNARY.items()},
    **{k: simple(lambda c, op, a, n=v: c.op(n, a)) for k, v in BINARY.items()},
    **{k: reduce_rule for k in REDUCE},
    "LeakyReLU": simple(lambda c, op, a: c.op("leaky_relu", a, alpha=0.01)),
    "PReLU": prelu_rule,
    "Log2": log2_rule,
    "Clip": simple(lambda c, op, a: c.op("clip", a, **(
        {"lo": -1.5, "hi": 1.5} if c.in_types[0].dtype.is_float else {"lo": -1.0, "hi": 1.0}))),
    "Where": simple(lambda c, op, a: c.op("where", a)),
    "Softmax": simple(lambda c, op, a: c.op("softmax", a, axis=op.dim)),
    "MaxPool2d": simple(lambda c, op, a: c.op(
        "maxpool2d", a, kernel=(op.kernel_h_size, op.kernel_w_size), stride=(op.stride,) * 2,
        padding=(op.padding,) * 2)),
    "AvgPool2d": simple(lambda c, op, a: c.op(
        "avgpool2d", a, kernel=(op.kernel_h_size, op.kernel_w_size), stride=(op.stride,) * 2,
        padding=(op.padding,) * 2)),
    "Slice": slice_rule,
    "ConstPad": pad_rule, "ReplicatePad": pad_rule, "ReflectPad": pad_rule,
    **{f"ExpandLast{i}": expand_rule for i in range(1, 5)},
    "BatchNorm2d": simple(lambda c, op, a: c.op("batch_norm", [
        a[0], *(c.weight((op.nfeat,), k) for k in ("weight", "bias", "running_mean", "running_var"))])),
    "Conv1d": conv_rule, "NCHWConv2d": conv_rule,
    "Reshape": simple(lambda c, op, a: c.op("reshape", a, shape=tuple(c.out_types[0].shape))),
    "Flatten": simple(lambda c, op, a: c.op("reshape", a, shape=tuple(c.out_types[0].shape))),
    "Transpose": simple(lambda c, op, a: c.op("transpose", a, perm=_swap(
        c.in_types[0].rank, op.extra_attrs["dim0"], op.extra_attrs["dim1"]))),
    "NearestInterp": interp_rule, "LinearInterp": interp_rule, "BilinearInterp": interp_rule,
    "Squeeze": simple(lambda c, op, a: c.op("squeeze", a, axis=op.extra_attrs["reduce_dim"])),
    "Tril": simple(lambda c, op, a: c.op("tril", a, k=op.diagonal)),
    "Triu": simple(lambda c, op, a: c.op("triu", a, k=op.diagonal)),
    **{f"Concat{i}": concat_rule for i in range(1, 6)},
    **{k: cast_rule for k in ("CastF32", "CastF64", "CastI32", "CastI64", "CastBool")},
    "MatMul": matmul_rule, "PTMatMul": matmul_rule,
    "Linear": simple(lambda c, op, a: c.op("linear", [
        a[0], c.weight((op.ofeat, op.ifeat), "weight"), c.weight((op.ofeat,), "bias")])),
}


def _swap(rank: int, d0: int, d1: int) -> tuple[int, ...]:
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


# ---- the converter --------------------------------------------------------------------------------
def convert(gir: Any) -> Converted:
    """NNSmith's concrete GraphIR -> a verified dynsmith graph (raises Unconvertible)."""
    from nnsmith.abstract.op import Constant, Input

    b = Builder()
    env: dict[str, str] = {}
    inputs: dict[str, str] = {}
    index = 0  # SymbolNet.instructions skips Input instructions
    for inst in gir.insts:
        op = inst.iexpr.op
        (ret, *more) = inst.retvals()
        if isinstance(op, Input):
            env[ret] = inputs[ret] = b.input(ttype(op.abs_tensor))
            continue
        if isinstance(op, Constant):
            env[ret] = b.param(ttype(op.abs_tensor), WeightSource(index, "data"))
            index += 1
            continue
        name = type(op).__name__
        if name in UNMAPPED:
            raise Unconvertible(f"{name}: {UNMAPPED[name]}")
        rule = RULES.get(name)
        if rule is None:
            raise Unconvertible(f"{name}: no mapping")
        ctx = Ctx(b, name, index, [ttype(t) for t in op.input_like], [ttype(t) for t in op.output_like])
        outs = rule(ctx, op, [env[a] for a in inst.iexpr.args])
        for r, o, want in zip(inst.retvals(), outs, ctx.out_types, strict=True):
            if b.types[o] != want:
                raise Unconvertible(f"{name}: result {b.types[o]} is not NNSmith's {want}")
            env[r] = o
        index += 1
    outs, kept = pick_outputs([env[v] for v in gir.leaf_var()], {v.name for v in (*b.inputs, *b.params)})
    g = b.graph(outs)
    try:
        verify(g)
    except VerifyError as e:
        raise Unconvertible(f"verify: {str(e).splitlines()[0]}") from None
    return Converted(g, inputs, b.weights, kept)


def pick_outputs(outs: list[str], placeholders: set[str]) -> tuple[list[str], list[int]]:
    """NNSmith's outputs less repeats and inputs/params (what an identity mapping or a leaf
    placeholder makes; they compute nothing), unless nothing else is left."""
    seen: set[str] = set()
    kept = []
    for i, o in enumerate(outs):
        if o not in seen and o not in placeholders:
            seen.add(o)
            kept.append(i)
    if not kept:
        kept = [0]
    return [outs[i] for i in kept], kept


# ---- NNSmith ---------------------------------------------------------------------------------------
def compat() -> None:
    """This machine's packages against NNSmith 0.1.0's: onnx lacks `onnx._serialize` (NNSmith
    calls it), and torch 2.13's `torch.onnx.export` defaults to the dynamo exporter, which
    cannot export NNSmith's models (its numeric check `torch.isinf(...).any()` is a
    data-dependent guard: "Could not guard on data-dependent expression Eq(u0, 1)"), so every
    op of the "ort" op set's inference failed and NNSmith cached an empty op set. NNSmith was
    written for the TorchScript exporter: `dynamo=False` unless a caller says otherwise."""
    import functools

    import onnx
    import torch

    if not hasattr(onnx, "_serialize"):
        onnx._serialize = lambda proto: proto.SerializeToString()
    export = torch.onnx.export
    if not getattr(export, "_torchscript_default", False):
        @functools.wraps(export)
        def torchscript_export(*args, **kwargs):
            kwargs.setdefault("dynamo", False)
            return export(*args, **kwargs)
        torchscript_export._torchscript_default = True
        torch.onnx.export = torchscript_export


def load_opset(kind: str) -> list[Any]:
    """"onnx": every op of NNSmith's ONNX model type with all its dtypes (the brief's recipe);
    "ort": what `nnsmith.fuzz model.type=onnx backend.type=onnxruntime` generates from:
    `auto_opset` against ORT (cpu, optmax), `vulops` false as in NNSmith's config (so no Log2,
    Pow, Sqrt, Asin, Acos), each op's dtypes narrowed to those that export and run (cached by
    NNSmith under ~/.cache/nnsmith-0.1.0; the first inference takes ~15 s)."""
    from nnsmith.materialize import Model

    if kind == "onnx":
        return Model.init("onnx").operators()
    from nnsmith.backends.factory import BackendFactory
    from nnsmith.error import InternalError
    from nnsmith.narrow_spec import NNSMITH_CACHE_DIR, auto_opset, get_cache_name

    factory = BackendFactory.init("onnxruntime", target="cpu", optmax=True)
    for attempt in range(5):  # inferring the op set can trip NNSmith's Reshape check (random)
        try:
            ops = auto_opset(Model.init("onnx"), factory, vulops=False)
        except InternalError:
            if attempt == 4:
                raise
            continue
        if ops:
            return ops
        # an empty op set (every op failed its trial, as with the dynamo exporter): a cache
        # entry that would make every generation fail; dropped, so a fixed set-up infers again
        cache = os.path.join(NNSMITH_CACHE_DIR, get_cache_name(Model.init("onnx"), factory) + ".yaml")
        if os.path.exists(cache):
            os.remove(cache)
        raise RuntimeError(f"NNSmith inferred an empty ORT op set (every op failed its trial; "
                           f"the cache {cache} was removed): check its exporter")
    raise AssertionError("unreachable")


def generate(opset: Any, seed: int, nodes: int) -> Any:
    from nnsmith.graph_gen import model_gen

    return model_gen(opset=opset, method="symbolic-cinit", seed=seed, max_nodes=nodes,
                     timeout_ms=10000).make_concrete()


# ---- the semantic check ----------------------------------------------------------------------------
#: input draws of the check: NNSmith's own (uniform in [3, 7], ints rounded), its "center"
#: draw (uniform in [-4, 0]) and a symmetric one (normal, sd 2), so both signs are exercised
DRAWS: tuple[dict[str, Any], ...] = ({}, {"base": "center"}, {"sd": 2.0})


def draw(shape: Sequence[int], dtype: Any, how: dict[str, Any]) -> Any:
    import torch
    from nnsmith.materialize.torch.symbolnet import random_tensor

    if "sd" not in how:
        return random_tensor(shape, dtype, **how)
    x = torch.randn(tuple(shape)) * how["sd"]
    if dtype == torch.bool:
        return x > 0
    return x.to(dtype) if dtype.is_floating_point else torch.round(x).to(dtype)


#: the check skips a model holding a value of more elements (NNSmith draws dims up to
#: thousands: one model of 250 seeds took 22 GB)
CHECK_MAX_ELEMS = 2**22


def too_big(g: Graph) -> bool:
    return any(math.prod(v.type.shape) > CHECK_MAX_ELEMS for v in g.all_values())


def check(gir: Any, conv: Converted, seed: int) -> str | None:
    """Run NNSmith's SymbolNet (eval mode) and dynsmith's interpreter on the same random inputs
    and weights (three draws); None when every output agrees (allclose; NaN/inf equal where both
    have them)."""
    import torch
    from nnsmith.materialize.torch.symbolnet import SymbolNet

    from ir.core.interpreter import Interpreter

    torch.manual_seed(seed)
    net = SymbolNet(gir)
    net.eval()
    for inst in net.instructions:  # non-trivial BatchNorm statistics
        fn = inst[0]
        if isinstance(fn, torch.nn.BatchNorm2d):
            fn.running_mean.copy_(torch.randn_like(fn.running_mean))
            fn.running_var.copy_(torch.rand_like(fn.running_var) + 0.5)
    types = {p.name: p.type for p in conv.graph.params}
    weights = {}
    for pname, src in conv.weights.items():
        t = getattr(net.instructions[src.index][0], src.attr)
        weights[pname] = t.detach().clone().reshape(types[pname].shape)
    for how in DRAWS:
        feeds = {k: draw(v.shape, v.dtype.torch(), how) for k, v in net.input_like.items()}
        env = {**weights, **{conv.inputs[k]: v.clone() for k, v in feeds.items()}}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = net(*[feeds[k] for k in gir.input_var()])
            values = Interpreter().run(conv.graph, env)
        got = [values[o] for o in conv.graph.outputs]
        want = [want[i] for i in conv.kept]
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            problem = compare(w, g)
            if problem:
                return f"draw {how}, output {i}: {problem}"
    return None


def compare(want: Any, got: Any) -> str | None:
    import torch

    if want.dtype != got.dtype or tuple(want.shape) != tuple(got.shape):
        return f"type {want.dtype}{list(want.shape)} vs {got.dtype}{list(got.shape)}"
    if not want.dtype.is_floating_point:
        return None if torch.equal(want, got) else "values differ"
    w, g = want.double(), got.double()
    tol = 1e-2 if want.dtype == torch.float16 else 1e-4
    if torch.allclose(w, g, rtol=tol, atol=tol, equal_nan=True):
        return None
    bad = ~torch.isclose(w, g, rtol=tol, atol=tol, equal_nan=True)
    return f"{int(bad.sum())} of {w.numel()} values differ (max |d| {float((w - g)[bad].abs().max()):.3g})"


# ---- main ------------------------------------------------------------------------------------------
@dataclass
class Tally:
    generated: int = 0
    gen_failed: int = 0
    converted: int = 0
    check_failed: int = 0
    check_errors: int = 0
    check_skipped: int = 0
    unmapped: Counter = field(default_factory=Counter)
    ms: list[float] = field(default_factory=list)

    def report(self) -> str:
        n = self.generated
        lines = [f"models generated {n} (generation failures {self.gen_failed}), converted "
                 f"{self.converted} ({100 * self.converted / max(n, 1):.1f}%), check failed "
                 f"{self.check_failed}, check errors {self.check_errors}, check skipped (a value > "
                 f"{CHECK_MAX_ELEMS} elements) {self.check_skipped}, convert ms/model "
                 f"{sum(self.ms) / max(len(self.ms), 1):.2f}"]
        lines += [f"  {k}: {v}" for k, v in self.unmapped.most_common()]
        return "\n".join(lines)


def reason_key(why: str) -> str:
    """The part of a `why` that names the op (for the per-op tally)."""
    return why.split(":")[0] if not why.startswith("verify") else why[:90]


def run_seed(opset: Any, seed: int, nodes: int, do_check: bool, tally: Tally) -> dict[str, Any]:
    try:
        gir = generate(opset, seed, nodes)
    except Exception as e:  # NNSmith's own failures (constraint errors, internal errors)
        tally.gen_failed += 1
        first = str(e).splitlines()[0] if str(e) else ""
        return {"gir": None, "why": f"generation failed: {type(e).__name__}: {first}"[:200]}
    tally.generated += 1
    t0 = time.perf_counter()
    try:
        conv = convert(gir)
    except Unconvertible as e:
        tally.unmapped[reason_key(str(e))] += 1
        return {"gir": None, "why": str(e).replace("\n", " ")}
    finally:
        tally.ms.append((time.perf_counter() - t0) * 1e3)
    tally.converted += 1
    if do_check and too_big(conv.graph):
        tally.check_skipped += 1
    elif do_check:
        try:
            problem = check(gir, conv, seed)
        except Exception as e:  # noqa: BLE001 - a check that cannot run is reported, not fatal
            tally.check_errors += 1
            LOG.warning("seed %d: check error %s: %s", seed, type(e).__name__, e)
            problem = None
        if problem:
            tally.check_failed += 1
            LOG.warning("seed %d: CHECK FAILED %s\n%s", seed, problem, gir.pretty())
    return {"gir": print_graph(conv.graph), "why": None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--count", type=int, default=100, help="0: forever")
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--opset", choices=("onnx", "ort"), default="onnx",
                    help="onnx: Model.init('onnx').operators(); ort: NNSmith's ORT campaign op set")
    ap.add_argument("--lockstep", action="store_true",
                    help="make each seed's model only when a line arrives on stdin (a reader "
                         "that takes graphs on demand, e.g. bench/coverage_race.py: no work "
                         "done ahead of it); ends at end of input")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    logging.getLogger("gen").setLevel(logging.ERROR)
    compat()
    opset = load_opset(args.opset)
    tally = Tally()
    seed = args.seed_start
    try:
        while args.count == 0 or seed < args.seed_start + args.count:
            if args.lockstep and not sys.stdin.readline():
                break
            row = run_seed(opset, seed, args.nodes, args.check, tally)
            print(json.dumps({"seed": seed, "cpu_s": round(time.process_time(), 3), **row}), flush=True)
            seed += 1
    finally:
        print(tally.report(), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
