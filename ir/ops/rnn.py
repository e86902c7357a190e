"""Recurrent layers as single instructions: `lstm`, `gru` and `rnn` (one layer, the whole
sequence at once), each binding several results in place.

IR semantics (ONNX's, layout=0):
  - operands: X [seq, batch, input]; weights, always params: W [nd, gates*H, input],
    R [nd, gates*H, H], B [nd, 2*gates*H] (the W-bias then the R-bias); optional initial
    states [nd, batch, H] (zeros when absent): `rnn`/`gru` take h0, `lstm` h0 then c0. nd is
    the number of directions (2 for `bidirectional`, else 1), H the `hidden` attribute.
  - gate blocks along W's, R's and each half of B's rows in ONNX order: LSTM (i, o, f, c),
    GRU (z, r, h); `rnn` has one block. Activations are ONNX's defaults (sigmoid for the gates,
    tanh for the cell/candidate), `rnn` uses its `nonlinearity` (tanh or relu). GRU applies
    its recurrent weights before the reset gate (ONNX `linear_before_reset=1`, torch's GRU).
  - results: Y [seq, batch, nd*H] (torch's layout: the forward direction's H features, then
    the reverse one's, so a stack of layers chains Y into the next X), Y_h [nd, batch, H] the
    final hidden state of each direction (for `reverse`, the state after reading x[0]) and,
    for `lstm`, Y_c [nd, batch, H] the final cell state.
  - `direction`: forward, reverse (the sequence read backwards; Y stays in sequence order)
    or bidirectional.

Materialization: torch calls the functional RNN kernels (`torch.lstm`, `torch.gru`,
`torch.rnn_tanh`, `torch.rnn_relu`) with the gate blocks permuted into torch's order (LSTM
(i, f, g, o), GRU (r, z, n)); `reverse` flips the sequence before and Y after. ONNX emits one
LSTM/GRU/RNN node and turns its Y [seq, nd, batch, H] into [seq, batch, nd*H] (Squeeze, or
Transpose + Reshape when bidirectional).

Dtypes: float16 and float32. ONNX Runtime 1.32's CPU kernels refuse float64 (LSTM and GRU fail
at run time, "does not support double yet"; RNN has no double kernel), so it is not declared.

`hidden` is a solver symbol (1..16); weights and new initial states are built from it and from
X's dims, so their shapes hold by construction. The generator's per-dim caps bound gates*H
(e.g. max_elems=4096: rank-3 dims <= 16, so LSTM H <= 4, GRU H <= 5, RNN H <= 16).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ir.core.dtypes import DType
from ir.core.importing import Imported, Operand, Prev, SourceNode, Step
from ir.core.op import Op, Signature, Slot
from ir.core.shapes import eq
from ir.core.types import TensorType
from ir.ops.common import F16_32, apart, as_float, is_float, ordered

if TYPE_CHECKING:
    from torch import Tensor

    from ir.core.onnx_builder import OnnxBuilder
    from ir.core.sampling import SampleContext

DIRECTIONS = ("forward", "reverse", "bidirectional")
#: the largest hidden size the generator draws (a given one, an imported model's, is any)
MAX_HIDDEN = 16


@dataclass(frozen=True)
class Recurrent(Op):
    """Shared typing and materialization of the three recurrent layers."""

    family: ClassVar[str] = "rnn"
    tolerance_factor: ClassVar[float] = 2.0  # long accumulations: summation order
    #: torch 2.14.1's mkldnn RNN backward, under torch.func.vjp inside an autograd.Function's
    #: backward, fails in eager ("Expected a proper Tensor but got None ... for argument #22
    #: 'workspace'"): no reference for a gradient test through such a custom op
    in_custom_kernels: ClassVar[bool] = False
    dtypes: ClassVar[frozenset[DType]] = F16_32
    #: Y, then the final states (each subclass sets it)
    num_results: ClassVar[int]
    #: gate blocks per direction in W, R and each half of B
    gates: ClassVar[int]
    #: torch's gate order as indices of ONNX's blocks
    torch_order: ClassVar[tuple[int, ...]]
    onnx_type: ClassVar[str]
    hidden: int
    direction: str

    # ---- typing ------------------------------------------------------------------------------
    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def num_states(self) -> int:
        """Initial-state operands the op can take (h0, and c0 for LSTM)."""
        return self.num_results - 1

    @classmethod
    def signatures(cls, n_inputs: int) -> Sequence[Signature]:
        return [((d,) * n_inputs, (d,) * cls.num_results) for d in ordered(cls.dtypes)]

    @classmethod
    def first_ranks(cls) -> tuple[int, ...]:
        return (3,)

    @classmethod
    def slots(cls, n_inputs: int, first: TensorType) -> Sequence[Slot]:
        weights = [Slot((3,), param=True), Slot((3,), param=True), Slot((2,), param=True)]
        return weights + [Slot((3,)) for _ in range(n_inputs - 4)]

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(**cls._sample_common(ctx))

    @staticmethod
    def _sample_common(ctx: SampleContext) -> dict:
        return dict(hidden=ctx.sym("hidden"),
                    direction=ctx.rng.choice(("forward", "forward", "reverse", "bidirectional")))

    def operand_type(self, index: int, first: TensorType, dtype: DType,
                     ctx: SampleContext) -> TensorType | None:
        nd, rows = self.num_directions, self.gates * self.hidden
        if index == 1:
            return TensorType((nd, rows, first.shape[2]), dtype)
        if index == 2:
            return TensorType((nd, rows, self.hidden), dtype)
        if index == 3:
            return TensorType((nd, 2 * rows), dtype)
        return TensorType((nd, first.shape[1], self.hidden), dtype)

    def _expected(self, x: TensorType) -> list[tuple]:
        nd, rows, h = self.num_directions, self.gates * self.hidden, self.hidden
        state = (nd, x.shape[1], h)
        return [(nd, rows, x.shape[2]), (nd, rows, h), (nd, 2 * rows)] + [state] * self.num_states

    def requires(self, ins: Sequence[TensorType]) -> list:
        x, *rest = ins
        if (self.direction not in DIRECTIONS or x.rank != 3
                or not 4 <= len(ins) <= 4 + self.num_states):
            return [False]
        cons = [self.hidden >= 1]
        if not isinstance(self.hidden, int):  # the generator's draw
            cons.append(self.hidden <= MAX_HIDDEN)
        # zip strict=False: the initial states are optional: `rest` may stop before the states
        for t, shape in zip(rest, self._expected(x), strict=False):
            if t.rank != len(shape):
                return [False]
            cons += [eq(a, b) for a, b in zip(t.shape, shape, strict=True)]
        return cons

    def infer(self, ins: Sequence[TensorType]) -> list[TensorType]:
        x = ins[0]
        seq, batch = x.shape[0], x.shape[1]
        nd, d = self.num_directions, x.dtype
        state = TensorType((nd, batch, self.hidden), d)
        return [TensorType((seq, batch, nd * self.hidden), d)] + [state] * self.num_states

    # ---- torch -------------------------------------------------------------------------------
    def _torch_params(self, w: Tensor, r: Tensor, b: Tensor) -> list[Tensor]:
        """[w_ih, w_hh, b_ih, b_hh] per direction (forward first), rows in torch's gate order."""
        rows = self.gates * self.hidden
        order = list(self.torch_order)

        def reorder(t: Tensor) -> Tensor:  # [nd, gates*H, ...] -> the same with the gate blocks permuted
            return t.unflatten(1, (self.gates, self.hidden))[:, order].flatten(1, 2)

        parts = [reorder(w), reorder(r), reorder(b[:, :rows]), reorder(b[:, rows:])]
        return [p[d] for d in range(self.num_directions) for p in parts]

    def _torch_kernel(self) -> Callable[..., tuple[Tensor, ...]]:
        raise NotImplementedError

    def torch(self, x: Tensor, w: Tensor, r: Tensor, b: Tensor, *states: Tensor) -> tuple[Tensor, ...]:
        import torch

        nd, batch = self.num_directions, x.shape[1]
        full = list(states) + [x.new_zeros((nd, batch, self.hidden))
                               for _ in range(self.num_states - len(states))]
        reverse = self.direction == "reverse"
        if reverse:
            x = torch.flip(x, (0,))
        hx = full if self.num_states > 1 else full[0]
        # (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        y, *finals = self._torch_kernel()(x, hx, self._torch_params(w, r, b), True, 1, 0.0, False,
                                          nd == 2, False)
        if reverse:
            y = torch.flip(y, (0,))
        return (y, *finals)

    # ---- ONNX --------------------------------------------------------------------------------
    def _onnx_attrs(self) -> dict:
        return {}

    def onnx(self, b: OnnxBuilder, ins: list[str], outs: list[str]) -> None:
        x, w, r, bias, *states = ins
        node_ins = [x, w, r, bias, ""] + states  # "": no sequence_lens
        y4 = b.fresh("y")
        b.node(self.onnx_type, node_ins if states else node_ins[:4], [y4, *outs[1:]],
               hidden_size=self.hidden, direction=self.direction, **self._onnx_attrs())
        if self.num_directions == 1:  # [seq, 1, batch, H] -> [seq, batch, H]
            b.node("Squeeze", [y4, b.const_i64([1])], [outs[0]])
        else:  # [seq, 2, batch, H] -> [seq, batch, 2, H] -> [seq, batch, 2H]
            yt = b.fresh("yt")
            b.node("Transpose", [y4], [yt], perm=[0, 2, 1, 3])
            b.node("Reshape", [yt, b.const_i64([0, 0, -1])], [outs[0]])


def _no_batching(kernel: str) -> str:
    """torch eager's refusal to vmap an RNN kernel (it has no batching rule)."""
    return (f"Batching rule not implemented for aten::{kernel}.input. We could not generate "
            "a fallback.")


#: torch eager's refusal of a forward-mode derivative of float32 LSTM (mkldnn's kernel)
_NO_FORWARD_AD = ("Trying to use forward AD with mkldnn_rnn_layer that does not support it "
                  "because it has not been implemented yet.")


@dataclass(frozen=True)
class Lstm(Recurrent):
    """LSTM: (x, W, R, B[, h0[, c0]]) -> (Y, Y_h, Y_c); gates (i, o, f, c)."""

    name: ClassVar[str] = "lstm"
    #: no batching rule; float32 LSTM runs mkldnn's kernel, which has no forward-mode
    #: derivative (float64 LSTM has one; refused all the same: conservative). Measured on 2.13
    eager_transform_refusals: ClassVar[Mapping[str, str]] = {
        "vmap": _no_batching("lstm"), "jvp": _NO_FORWARD_AD, "jacfwd": _NO_FORWARD_AD}
    arity: ClassVar[tuple[int, int]] = (4, 6)
    num_results: ClassVar[int] = 3
    gates: ClassVar[int] = 4
    torch_order: ClassVar[tuple[int, ...]] = (0, 2, 3, 1)  # (i, f, g=c, o)
    onnx_type: ClassVar[str] = "LSTM"

    def _torch_kernel(self) -> Callable[..., tuple[Tensor, ...]]:
        import torch

        return torch.lstm


@dataclass(frozen=True)
class Gru(Recurrent):
    """GRU: (x, W, R, B[, h0]) -> (Y, Y_h); gates (z, r, h), linear_before_reset=1."""

    name: ClassVar[str] = "gru"
    eager_transform_refusals: ClassVar[Mapping[str, str]] = {"vmap": _no_batching("gru")}
    arity: ClassVar[tuple[int, int]] = (4, 5)
    num_results: ClassVar[int] = 2
    gates: ClassVar[int] = 3
    torch_order: ClassVar[tuple[int, ...]] = (1, 0, 2)  # (r, z, n=h)
    onnx_type: ClassVar[str] = "GRU"

    def _torch_kernel(self) -> Callable[..., tuple[Tensor, ...]]:
        import torch

        return torch.gru

    def _onnx_attrs(self) -> dict:
        return {"linear_before_reset": 1}


@dataclass(frozen=True)
class Rnn(Recurrent):
    """Elman RNN: (x, W, R, B[, h0]) -> (Y, Y_h), h' = f(x W^T + h R^T + Wb + Rb), f = tanh or
    relu (`nonlinearity`)."""

    name: ClassVar[str] = "rnn"
    eager_transform_refusals: ClassVar[Mapping[str, str]] = {
        "vmap": _no_batching("rnn_tanh/rnn_relu")}
    arity: ClassVar[tuple[int, int]] = (4, 5)
    num_results: ClassVar[int] = 2
    gates: ClassVar[int] = 1
    torch_order: ClassVar[tuple[int, ...]] = (0,)
    onnx_type: ClassVar[str] = "RNN"
    nonlinearity: str

    @classmethod
    def sample(cls, ctx: SampleContext, first: TensorType) -> Op:
        return cls(**cls._sample_common(ctx), nonlinearity=ctx.rng.choice(("tanh", "relu")))

    def requires(self, ins: Sequence[TensorType]) -> list:
        if self.nonlinearity not in ("tanh", "relu"):
            return [False]
        return super().requires(ins)

    def preactivations(self, x: Tensor, w: Tensor, r: Tensor, b: Tensor, *states: Tensor) -> Tensor:
        """f's arguments x W^T + h R^T + Wb + Rb at every step, [nd, seq, batch, H] in sequence
        order (float32 or float64), computed by the recurrence itself (the torch kernels do
        not expose them). Differentiable in every operand."""
        import torch

        xf, wf, rf, bf = (as_float(t) for t in (x, w, r, b))
        h_size, steps = self.hidden, range(x.shape[0])
        act = torch.relu if self.nonlinearity == "relu" else torch.tanh
        out = []
        for d in range(self.num_directions):
            h = as_float(states[0][d]) if states else xf.new_zeros((x.shape[1], h_size))
            bias = bf[d, :h_size] + bf[d, h_size:]
            backwards = self.direction == "reverse" or d == 1
            pre: list[Tensor] = []
            for t in reversed(steps) if backwards else steps:
                pre.append(xf[t] @ wf[d].T + h @ rf[d].T + bias)
                h = act(pre[-1])
            out.append(torch.stack(pre[::-1] if backwards else pre))
        return torch.stack(out)

    def kinks(self, x: Tensor, w: Tensor, r: Tensor, b: Tensor, *states: Tensor) -> list[Tensor]:
        """relu: every pre-activation keeps the margin from 0 (relu's kink); tanh is smooth."""
        if self.nonlinearity != "relu" or not is_float(x) or not x.numel():
            return []
        return [apart(self.preactivations(x, w, r, b, *states), 0.0, x.dtype)]

    def _torch_kernel(self) -> Callable[..., tuple[Tensor, ...]]:
        import torch

        return torch.rnn_tanh if self.nonlinearity == "tanh" else torch.rnn_relu

    def _onnx_attrs(self) -> dict:
        return {"activations": [self.nonlinearity.capitalize()] * self.num_directions}


#: the recurrent layers, in the order the mutators choose among them
RECURRENT: tuple[type[Recurrent], ...] = (Lstm, Gru, Rnn)


# ---- import rules (`Op.from_aten`; ir.core.importing) -----------------------------------------
def _recurrent_aten(cls: type[Recurrent], node: SourceNode) -> Imported | None:
    """lstm.input(x, (h0, c0), params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first), gru.input / rnn_tanh.input / rnn_relu.input(x, h0, ...): weights constant
    (torch's per-gate blocks reordered into ONNX's W, R, B); batch_first transposes. A stack
    of layers is one instruction per layer, Y chained into the next X, each layer's initial
    states sliced from h0 (c0) and its final ones concatenated in order (torch's layout:
    layer-major, directions within)."""
    import numpy as np

    from ir.ops.shape import Concat, Slice, Transpose

    has_biases, layers, train, bidir, batch_first = (node.arg(i) for i in (3, 4, 6, 7, 8))
    if not isinstance(layers, int) or layers < 1 or train:
        return None
    nd = 2 if bidir else 1
    refs = node.tensors(2)
    params = [node.const_of(r) for r in refs]
    per = 4 if has_biases else 2
    if len(params) != per * nd * layers or any(p is None for p in params):
        return None
    hidden = int(params[1].shape[1])  # type: ignore[union-attr]
    inverse = [cls.torch_order.index(k) for k in range(cls.gates)]

    def onnx_blocks(t: np.ndarray) -> np.ndarray:  # torch's gate blocks in ONNX's order
        blocks = t.reshape(cls.gates, hidden, *t.shape[1:])
        return blocks[inverse].reshape(t.shape)

    attrs: dict = {"hidden": hidden, "direction": "bidirectional" if bidir else "forward"}
    if cls is Rnn:
        attrs["nonlinearity"] = "relu" if "relu" in node.target else "tanh"
    op = cls(**attrs)
    states = node.tensors(1) if cls is Lstm else [node.tensor(1)]
    steps: list[Step] = []
    if batch_first:
        steps.append(Step(Transpose(perm=(1, 0, 2)), (node.tensor(0),)))
    x: Operand = Prev(0) if batch_first else node.tensor(0)
    layer_steps = []
    for layer in range(layers):
        first = layer * per * nd
        ws = [params[first + d * per:first + (d + 1) * per] for d in range(nd)]
        w = np.stack([onnx_blocks(p[0]) for p in ws])  # type: ignore[arg-type]
        r = np.stack([onnx_blocks(p[1]) for p in ws])  # type: ignore[arg-type]
        rows = cls.gates * hidden
        b = np.stack([np.concatenate([onnx_blocks(p[2]), onnx_blocks(p[3])])  # type: ignore[arg-type]
                      if has_biases else np.zeros(2 * rows, dtype=w.dtype) for p in ws])
        own: list[Operand] = list(states)
        if layers > 1:  # this layer's rows of h0 (and c0)
            own = []
            for s in states:
                steps.append(Step(Slice(axis=0, start=layer * nd, end=(layer + 1) * nd,
                                        step=1), (s,)))
                own.append(Prev(len(steps) - 1))
        steps.append(Step(op, (x, node.constant(w), node.constant(r), node.constant(b),
                               *own)))
        layer_steps.append(len(steps) - 1)
        x = Prev(len(steps) - 1)
    y = layer_steps[-1]
    if batch_first:
        steps.append(Step(Transpose(perm=(1, 0, 2)), (Prev(y),)))
        y = len(steps) - 1
    finals: list[Prev] = []
    for k in range(1, cls.num_results):  # Y_h (and Y_c): every layer's, in order
        parts = [Prev(i, k) for i in layer_steps]
        while len(parts) > 1:
            steps.append(Step(Concat(axis=0), tuple(parts[:3])))
            parts = [Prev(len(steps) - 1), *parts[3:]]
        finals.append(parts[0])
    if not batch_first and layers == 1:
        return Imported(tuple(steps))
    return Imported(tuple(steps), outputs=(Prev(y), *finals))


for _rcls, _aten in ((Lstm, ("aten.lstm.input",)), (Gru, ("aten.gru.input",)),
                     (Rnn, ("aten.rnn_tanh.input", "aten.rnn_relu.input"))):
    _rcls.aten_imports = _aten
    _rcls.from_aten = classmethod(_recurrent_aten)  # type: ignore[method-assign,assignment]
