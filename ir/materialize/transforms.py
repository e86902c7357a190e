"""Transforms as oracles: a test runs its graph under a `torch.func` transform, and the
compiler under test must agree with eager on the transformed program.

A *transform test* draws one transform T of `TRANSFORMS` and what T needs (`TransformSpec`,
`draw_transform`). The program is `transformed(spec, f, k)`: T applied to a plain function
`f(*leaf_tensors) -> tuple of outputs`, the graph's module with every input that is not a leaf
bound (`leaf_function`). The same callable serves both sides: the compiler under test runs
`torch.compile(transformed(spec, f, k))`, the reference calls it as it is, except for `vmap`,
whose reference is not vmap at all but the per-sample results stacked (`stacked_reference`).

Results (a flat list of tensors per input set; `TransformSpec.labels` names them):
  - vmap:   every output of f, batched along a new axis 0 (out_dims=0; an output no batched
            leaf reaches is expanded to B copies), for the batched leaves (`batch_inputs`);
  - grad:   dL/dx for every leaf x, L = sum over the differentiated outputs o_i of <o_i, c_i>,
            the loss of a gradient test (`ir.materialize.grad.loss_of`);
  - vjp:    every output of f, then the pullback of the cotangents (c_i) to every leaf (the
            same numbers as grad, computed by `torch.func.vjp` without a scalar loss);
  - jvp:    every output of f, then the tangent of every differentiated output for the leaves'
            tangents;
  - jacrev, jacfwd: one Jacobian per (differentiated output o_i, leaf x_j) pair, output-major
            (o_0 x_0, o_0 x_1, ..., o_1 x_0, ...), each of shape o_i.shape + x_j.shape.
The differentiated outputs (`TransformSpec.outputs`) are float outputs of f.

What torch 2.13 eager runs (measured on CPU, on hand-written graphs and on generated ones:
tests/ir/materialize/test_transforms.py; `EAGER_SUPPORT` holds the same as data, and
`draw_transform` draws only what it allows: a transform test eager refuses is our bug, never a
finding):

    transform  dialect  if (torch.cond)             loop (torch.while_loop)  scan
    vmap       python   pred not batched [1]        trip not batched [2]     ok
    vmap       hop      pred not batched and some   never, batched or not    an unbatched carry
                        operand batched [3]; or a   [4]                      stays unbatched [5]
                        batched pred and 1 result
    grad/vjp/  python   ok                          ok                       ok
    jvp/jacrev/
    jacfwd
    grad/vjp/  hop      never [6]                   never [6]                never [6]
    jvp/jacrev/
    jacfwd

[1] `if bool(pred)` on a batched pred: "vmap: It looks like you're attempting to use a Tensor
    in some data-dependent control flow."  [2] the same from `int(trip)`.
[3] cond's vmap rule with nothing batched: "vmap: Expected at least one Tensor to vmap over";
    with a batched pred it selects with `torch.where(p, t[0], f[0])`, the first result only:
    with two results "treespec.unflatten(leaves): `leaves` has length 1 but the spec refers to
    a pytree that holds 2 items".
[4] while_loop has no vmap rule: "Cannot access storage of BatchedTensorImpl" (batched
    operands) or "got KeyError(<TransformType.Vmap: 1>)" (none batched).
[5] scan's vmap rule keeps each carry's batching: an unbatched init whose body output is
    batched fails ("The size of tensor a (2) must match the size of tensor b (3)"); a batched
    init whose output is not is fine.
[6] called eagerly, the higher-order ops compile themselves with Dynamo
    (`_hop_compile_and_call`), which cannot fake a functorch-wrapped tensor: "Expected
    FakeTensor, got <class 'torch.Tensor'>" or "False != True" (grad, vjp, jacrev),
    "attempted to apply meta conversion to view functorch tensor" (jvp, jacfwd); even when no
    leaf reaches the op.
Ops (`EAGER_OP_REFUSALS`), once an operand is batched (vmap) or has a tangent (jvp, jacfwd):
lstm, gru and rnn have no batching rule ("Batching rule not implemented for aten::lstm.input.
We could not generate a fallback."); float32 lstm runs mkldnn's kernel, which has no forward
derivative ("Trying to use forward AD with mkldnn_rnn_layer that does not support it").
No other op of the library failed under any transform drawn for generated graphs (seeds
0-199 with control flow nested two deep, 0-149 without), and every result matched its independent
computation (tests/ir/materialize/test_transforms.py: the stacked per-sample runs, the
training step, torch.autograd.functional.jacobian).

Compiled (torch.compile, backend aot_eager, torch 2.13), hop dialect: vmap of torch.cond and
scan compiles and agrees; every derivative transform (grad, vjp, jvp, jacrev, jacfwd) of a
torch.cond, torch.while_loop or scan fails while Dynamo speculates the op's body ("Expected
FakeTensor, got <class 'torch.Tensor'>", in `check_aliasing_and_input_mutation`), also with
fullgraph=True (tests mark it as an expected failure, strict). In the python dialect the
`if` graph-breaks inside the transform, and Dynamo runs the transform eagerly (grad, jacrev
and jacfwd of that graph compiled no frame at all): such a test mostly compares eager with
eager.

Graphs that write in place are not drawn (`torch.func` refuses writes of transformed values
into bound tensors and to leaves): a transform test of such a graph runs its functional form
(`ir.analysis.inplace.pure_form`).
"""
from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ir.analysis.autograd import grad_values
from ir.analysis.inplace import has_writes
from ir.core.dtypes import DType
from ir.core.graph import Graph
from ir.core.npz import npz_bytes
from ir.materialize.grad import GradSpec, kept_or_fresh
from ir.materialize.torch_func import LeafFunction, bind_leaves, func_program
from ir.materialize.transform_kinds import (
    DIALECTS,
    KINDS,
    MAX_JACOBIAN_ELEMS,
    Transform,
)
from ir.ops import OP_REGISTRY
from ir.ops.control import ControlFlow, If, Loop, Scan, is_control

#: the transforms a test may draw (torch.func's names; `ir.materialize.transform_kinds.KINDS`)
TRANSFORMS: tuple[str, ...] = tuple(KINDS)
#: the derivative transforms (leaves among the float inputs and params)
DERIVATIVES: frozenset[str] = frozenset(n for n, t in KINDS.items() if t.derivative)

#: What torch 2.13 eager runs: (transform, dialect) -> control-flow op -> its condition, one of
#:   "ok": always; "never": raises whatever the data and the batching;
#:   "pred_unbatched" / "trip_unbatched": the if's predicate / the loop's trip count is not
#:     batched (python `bool()` / `int()` on a batched tensor raises);
#:   "cond_batching": the predicate is not batched and some operand is, or the predicate is
#:     batched and the if has one result (torch.cond's vmap rule);
#:   "carries_keep_batching": no carry whose init is unbatched becomes batched in the body
#:     (the scan's vmap rule).
#: Measured on CPU (module doc, footnotes there); each transform holds its own
#: (`Transform.eager_support`), this is their table; `eager_problem` applies it, nested bodies
#: included, and `draw_transform` draws only what it allows.
EAGER_SUPPORT: dict[tuple[str, str], dict[str, str]] = {
    (t.name, d): dict(rules) for t in KINDS.values() for d, rules in t.eager_support.items()}

#: Ops torch 2.13 eager cannot run under a transform once an operand carries its data (vmap:
#: is batched; jvp, jacfwd: has a tangent), with eager's message (measured on CPU; each op
#: says so itself, `Op.eager_transform_refusals`): the RNN kernels have no batching rule, and
#: float32 LSTM runs mkldnn's kernel, which has no forward-mode derivative. This is their
#: table, by transform.
EAGER_OP_REFUSALS: dict[str, dict[str, str]] = {
    t: {name: op.eager_transform_refusals[t] for name, op in sorted(OP_REGISTRY.items())
        if t in op.eager_transform_refusals}
    for t in KINDS if any(t in op.eager_transform_refusals for op in OP_REGISTRY.values())}

#: leaf dtypes of the derivative transforms (as `ir.numerics.grad.LEAF_DTYPES`: float16
#: derivatives differ between correct implementations by more than a test can tell a bug by)
LEAF_DTYPES = frozenset({DType.float32, DType.float64})
#: the chance each candidate leaf (vmap: each float input) is drawn (at least one always is)
P_LEAF = 0.6
#: batch sizes of vmap
BATCH_SIZES = (2, 3, 4)


def _numel(shape: Iterable[Any]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


@dataclass(frozen=True)
class TransformSpec:
    """What a transform test runs: the transform and what it needs.

    Invariants:
      - `name` is one of `TRANSFORMS`; `dialects` the non-empty subset of `DIALECTS`, in that
        order, that torch eager runs the test in (`EAGER_SUPPORT`);
      - `leaves` are names in graph order: vmap's are float graph inputs (the batched ones),
        a derivative transform's are float32/float64 inputs and params, inputs first;
      - vmap: `in_dims[j]` in [0, rank of leaf j] is the axis leaf j is batched along;
        `samples` (2 to 4 of them: the batch size B) are the input sets the batch elements come
        from: element b is set `samples[b]`, whose inputs that are not leaves all equal those of
        set `samples[0]` (`batch_inputs` stacks them); `outputs`, `cotangents` and `tangents`
        are empty;
      - a derivative transform: `outputs` are the indices of the differentiated graph outputs
        (float ones, ascending, at least one); `cotangents[k]` (grad, vjp) holds, for input set
        k, one array per differentiated output (by output name) of its shape and dtype in that
        set; `tangents[k]` (jvp) one per leaf (by name) of the leaf's shape and dtype; each is
        empty for the other transforms, as are `in_dims` and `samples`.
    Plain data: `files()` writes it as json and npz (never pickle), `from_files` reads it back.
    """

    name: str
    leaves: tuple[str, ...]
    dialects: tuple[str, ...] = DIALECTS
    in_dims: tuple[int, ...] = ()
    samples: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    cotangents: tuple[Mapping[str, np.ndarray], ...] = field(default=())
    tangents: tuple[Mapping[str, np.ndarray], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.name not in TRANSFORMS:
            raise ValueError(f"transform spec: unknown transform {self.name!r}")
        if not self.dialects or any(d not in DIALECTS for d in self.dialects):
            raise ValueError(f"transform spec: dialects {self.dialects} not a subset of {DIALECTS}")
        if self.kind.batched and (len(self.in_dims) != len(self.leaves)
                                    or not BATCH_SIZES[0] <= len(self.samples) <= BATCH_SIZES[-1]):
            raise ValueError("transform spec: vmap needs one in_dim per leaf and 2 to 4 samples")

    @property
    def kind(self) -> Transform:
        """The transform (`ir.materialize.transform_kinds.KINDS`)."""
        return KINDS[self.name]

    @property
    def batch_size(self) -> int:
        return len(self.samples)

    def grad_spec(self) -> GradSpec:
        """The gradient test of the same leaves and cotangents (grad, vjp): its training step
        (`ir.materialize.grad.training_step`) computes what they do, with plain autograd."""
        return GradSpec(self.leaves, self.cotangents)

    def input_leaves(self, g: Graph) -> list[bool]:
        """Per graph input: whether it is a leaf."""
        return [v.name in self.leaves for v in g.inputs]

    def param_leaves(self, g: Graph) -> frozenset[str]:
        """The leaf params: the module must hold them as tensors (`GraphModule(...,
        trainable=...)`), which `leaf_function` replaces."""
        return frozenset(p.name for p in g.params if p.name in self.leaves)

    def n_results(self, g: Graph) -> int:
        return len(self.labels(g))

    def labels(self, g: Graph) -> list[str]:
        """What each result of one input set is (the module doc's order)."""
        return self.kind.labels(self, g)

    # ---- as files (a finding's folder: transform.json + transform.npz; never pickle) -------
    def files(self) -> dict[str, bytes]:
        arrays = {f"c{k}/{name}": c for k, cts in enumerate(self.cotangents)
                  for name, c in cts.items()}
        arrays |= {f"t{k}/{name}": t for k, ts in enumerate(self.tangents)
                   for name, t in ts.items()}
        meta = {"name": self.name, "leaves": list(self.leaves), "dialects": list(self.dialects),
                "in_dims": list(self.in_dims), "samples": list(self.samples),
                "outputs": list(self.outputs), "cotangent_sets": len(self.cotangents),
                "tangent_sets": len(self.tangents)}
        return {"transform.json": json.dumps(meta).encode(), "transform.npz": npz_bytes(arrays)}

    @staticmethod
    def from_files(transform_json: bytes, transform_npz: bytes) -> TransformSpec:
        meta = json.loads(transform_json)
        cts: list[dict[str, np.ndarray]] = [{} for _ in range(int(meta["cotangent_sets"]))]
        tgs: list[dict[str, np.ndarray]] = [{} for _ in range(int(meta["tangent_sets"]))]
        with np.load(io.BytesIO(transform_npz), allow_pickle=False) as z:
            for key in z.files:
                k, _, name = key.partition("/")
                (cts if k[0] == "c" else tgs)[int(k[1:])][name] = z[key]
        return TransformSpec(meta["name"], tuple(meta["leaves"]), tuple(meta["dialects"]),
                             tuple(int(d) for d in meta["in_dims"]),
                             tuple(int(s) for s in meta["samples"]),
                             tuple(int(o) for o in meta["outputs"]), tuple(cts), tuple(tgs))


# ---- the transformed program ------------------------------------------------------------------

def leaf_function(module: torch.nn.Module, g: Graph, inputs: Sequence[torch.Tensor],
                  leaves: Sequence[str]) -> Callable[..., tuple[torch.Tensor, ...]]:
    """`module` (an `ir.materialize.to_torch.GraphModule` of `g`) as a function of `leaves`
    only (`ir.materialize.torch_func.bind_leaves`): the other graph inputs are bound to
    `inputs` (one per graph input; the leaves' entries unused), a leaf param replaces the
    module's `p_<name>` (build the module with `trainable=spec.param_leaves(g)` so that it
    holds them as tensors)."""
    return bind_leaves(module, inputs, [v.name for v in g.inputs], leaves)


def leaf_values(module: torch.nn.Module, g: Graph, inputs: Sequence[torch.Tensor],
                leaves: Sequence[str]) -> list[torch.Tensor]:
    """The leaves' values (detached): from `inputs` (one per graph input) or the module's
    params."""
    position = {v.name: i for i, v in enumerate(g.inputs)}
    return [(inputs[position[x]] if x in position else getattr(module, f"p_{x}")).detach()
            for x in leaves]


def _arrays(ms: Mapping[str, np.ndarray], names: Sequence[str]) -> list[torch.Tensor]:
    return [torch.from_numpy(np.array(ms[n], order="C")) for n in names]


def transformed(spec: TransformSpec, f: LeafFunction, k: int = 0,
                output_names: Sequence[str] | None = None) -> Callable[..., list[torch.Tensor]]:
    """`spec`'s transform of `f` (`leaf_function`) for input set `k`: a callable of the leaves'
    values (vmap: of the batched leaves, `batch_inputs`) returning the results of the module
    doc as a flat list (`ir.materialize.torch_func.func_program`, the program repro.py runs
    too). Pure: the same callable runs eagerly (the reference; not for vmap,
    `stacked_reference`) and under `torch.compile` (the compiler under test).
    `output_names` (the graph's outputs, `g.outputs`) name the cotangents (grad, vjp); needed
    for those two."""
    cts: list[torch.Tensor] = []
    takes = spec.kind.takes
    if takes == "cotangents":
        if output_names is None:
            raise ValueError(f"transformed: {spec.name} needs the output names (its cotangents')")
        cts = _arrays(spec.cotangents[k], [output_names[i] for i in spec.outputs])
    tgs = _arrays(spec.tangents[k], spec.leaves) if takes == "tangents" else []
    return func_program(spec.name, f, len(spec.leaves), spec.in_dims, spec.outputs, cts, tgs)


def stacked_reference(f: LeafFunction, batched: Sequence[torch.Tensor],
                      in_dims: Sequence[int]) -> list[torch.Tensor]:
    """vmap's reference: f run per sample (each leaf's slice along its in_dim, contiguous:
    the input set itself) and every output stacked along a new axis 0."""
    size = {int(x.shape[d]) for x, d in zip(batched, in_dims, strict=True)}
    if len(size) != 1:
        raise ValueError(f"stacked_reference: batched leaves of sizes {sorted(size)}")
    per = [list(f(*(x.select(d, b).contiguous() for x, d in zip(batched, in_dims, strict=True))))
           for b in range(size.pop())]
    return [torch.stack([p[i] for p in per]) for i in range(len(per[0]))]


def batch_inputs(spec: TransformSpec, values: Sequence[Mapping[str, np.ndarray]]
                 ) -> list[np.ndarray]:
    """vmap's batched leaves: leaf j stacks, along axis `in_dims[j]`, its value in every input
    set of `samples` (`values`: the test's input sets, each by input name)."""
    return [np.array(np.stack([np.asarray(values[s][x]) for s in spec.samples], axis=d), order="C")
            for x, d in zip(spec.leaves, spec.in_dims, strict=True)]


def unbatched_inputs(g: Graph, spec: TransformSpec, values: Sequence[Mapping[str, np.ndarray]]
                     ) -> dict[str, np.ndarray]:
    """vmap's bound inputs: the graph inputs that are not leaves, as in set `samples[0]` (and
    every other sample)."""
    return {v.name: values[spec.samples[0]][v.name] for v in g.inputs if v.name not in spec.leaves}


# ---- what eager supports ----------------------------------------------------------------------

def _kind(op: ControlFlow) -> str:
    if isinstance(op, If):
        return "if"
    if isinstance(op, Loop):
        return "loop"
    if isinstance(op, Scan):
        return "scan"
    raise ValueError(f"transforms: no eager support measured for control flow {op.name!r}")


class _Refused(Exception):
    pass


def _flow(g: Graph, marked_in: Sequence[bool], transform: str, rules: Mapping[str, str],
          where: str) -> list[bool]:
    """Which outputs of level `g` carry the transform's data (vmap: are batched; a derivative:
    depend on a leaf), given which inputs do; raises `_Refused` at an instruction eager
    refuses (`EAGER_SUPPORT`'s `rules`, `EAGER_OP_REFUSALS`). Conservative: every result of an
    op with a marked operand is marked, whatever its dtype."""
    marked = {v.name for v, b in zip(g.inputs, marked_in, strict=True) if b}
    for i, inst in enumerate(g.insts):
        args = [a in marked for a in inst.args]
        at = f"{where}inst {i} ({inst.op.name})"
        if any(args) and transform in inst.op.eager_transform_refusals:
            raise _Refused(f"{at}: eager cannot run it under {transform} "
                           f"({inst.op.eager_transform_refusals[transform]})")
        if is_control(inst.op):
            outs = _flow_control(inst.op, inst.blocks, args, transform, rules, at)
        else:
            outs = [any(args)] * len(inst.results)
        marked |= {r.name for r, b in zip(inst.results, outs, strict=True) if b}
    return [o in marked for o in g.outputs]


def _flow_control(op: ControlFlow, blocks: Sequence[Graph], args: list[bool], transform: str,
                  rules: Mapping[str, str], at: str) -> list[bool]:
    kind = _kind(op)
    rule = rules[kind]
    inner = f"{at} > "
    if rule == "never":
        raise _Refused(f"{at}: eager cannot run this dialect's {kind} under {transform}")
    if kind == "if":
        pred, operands = args[0], args[1:]
        n_results = len(blocks[0].outputs)
        if rule == "pred_unbatched" and pred:
            raise _Refused(f"{at}: its predicate is batched (data-dependent python if)")
        if rule == "cond_batching":
            if pred and n_results != 1:
                raise _Refused(f"{at}: a batched predicate and {n_results} results (torch.cond's vmap rule)")
            if not pred and not any(operands):
                raise _Refused(f"{at}: nothing batched (torch.cond's vmap rule)")
        then_outs, else_outs = (_flow(b, operands, transform, rules, inner) for b in blocks)
        if rule == "cond_batching":
            return [True] * n_results  # the rule batches every result
        return [a or b for a, b in zip(then_outs, else_outs, strict=True)]
    (body,) = blocks
    if kind == "loop":
        if rule == "trip_unbatched" and args[0]:
            raise _Refused(f"{at}: its trip count is batched (data-dependent python loop)")
        carried = list(args[1:])
        while True:  # python: a carried value may become marked at any trip
            outs = _flow(body, [False, *carried], transform, rules, inner)
            more = [c or o for c, o in zip(carried, outs, strict=True)]
            if more == carried:
                return carried
            carried = more
    assert isinstance(op, Scan)
    nc = op.num_carries
    carries, xs = list(args[:nc]), list(args[nc:])
    while True:
        outs = _flow(body, [*carries, *xs], transform, rules, inner)
        if rule == "carries_keep_batching":
            for j in range(nc):
                if outs[j] and not carries[j]:
                    raise _Refused(f"{at}: carry {j} is not batched but the body batches it "
                                   f"(torch's scan vmap rule)")
            return [c or o for c, o in zip(carries, outs[:nc], strict=True)] + outs[nc:]
        more = [c or o for c, o in zip(carries, outs[:nc], strict=True)]
        if more == carries:
            return carries + outs[nc:]
        carries = more


def eager_problem(g: Graph, transform: str, leaves: Iterable[str], dialect: str) -> str | None:
    """Why torch eager (2.13: `EAGER_SUPPORT`, `EAGER_OP_REFUSALS`) would refuse `transform`
    of `g`'s module in `dialect` with these leaves (vmap: the batched inputs), or None. One
    line naming the instruction."""
    rules = KINDS[transform].eager_support[dialect]
    chosen = set(leaves)
    top = Graph(g.name, (*g.inputs, *g.params), g.insts, g.outputs)
    try:
        _flow(top, [v.name in chosen for v in top.inputs], transform, rules, "")
    except _Refused as e:
        return str(e)
    return None


# ---- drawing ----------------------------------------------------------------------------------

def _shape_key(values: Mapping[str, np.ndarray], g: Graph) -> tuple:
    return tuple((np.asarray(values[v.name]).shape, np.asarray(values[v.name]).dtype.str) for v in g.inputs)


def _draw_vmap(g: Graph, rng: random.Random, values: Sequence[Mapping[str, np.ndarray]],
               dialects: Sequence[str]) -> TransformSpec | None:
    floats = [v.name for v in g.inputs if v.type.dtype.is_float]
    if not floats or not values:
        return None
    size = rng.choice(BATCH_SIZES)
    base = rng.randrange(len(values))
    key = _shape_key(values[base], g)
    others = [v.name for v in g.inputs if not v.type.dtype.is_float]

    def fits(k: int) -> bool:  # same shapes, the same inputs that cannot be batched
        return _shape_key(values[k], g) == key and all(
            np.array_equal(values[k][x], values[base][x]) for x in others)

    pool = [k for k in range(len(values)) if k != base and fits(k)]
    rng.shuffle(pool)
    rest = pool[:size - 1]
    while len(rest) < size - 1:  # fewer sets than the batch: repeat some
        rest.append(rng.choice([base, *rest]))
    rng.shuffle(rest)
    wanted = [x for x in floats if rng.random() < P_LEAF]
    order = wanted + [x for x in floats if x not in wanted]

    def runs(leaves: Sequence[str]) -> tuple[str, ...]:
        return tuple(d for d in dialects if eager_problem(g, "vmap", leaves, d) is None)

    for samples in ([base, *rest], [base] * size):  # distinct samples, else the same one B times
        differ = [x for x in floats
                  if any(not np.array_equal(values[s][x], values[base][x]) for s in samples)]
        if differ and not runs(differ):
            continue  # the inputs that differ must be batched, and eager cannot
        # the leaves wanted if eager runs them, else as many of them as it does (greedy)
        leaves = differ + [x for x in wanted if x not in differ]
        if not leaves or not runs(leaves):
            leaves = list(differ)
            for x in order:
                if x not in leaves and runs([*leaves, x]) and (x in wanted or not leaves):
                    leaves.append(x)
        ok = runs(leaves)
        if not leaves or not ok:
            continue
        leaves = [x for x in floats if x in leaves]
        types = g.types()
        in_dims = tuple(0 if rng.random() < 0.6 else rng.randint(0, types[x].rank) for x in leaves)
        return TransformSpec("vmap", tuple(leaves), ok, in_dims, tuple(samples))
    return None


def _candidate_leaves(g: Graph) -> list[str]:
    float_outputs = {o for o, t in zip(g.outputs, g.output_types(), strict=True) if t.dtype.is_float}
    return [v.name for v in (*g.inputs, *g.params)
            if v.type.dtype in LEAF_DTYPES and grad_values(g, [v.name]) & float_outputs]


def _draw_derivative(g: Graph, rng: random.Random, transform: str,
                     runs: Callable[[Sequence[str]], tuple[str, ...]]
                     ) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    candidates = _candidate_leaves(g)
    if not candidates:
        return None
    rng.shuffle(candidates)
    types = g.types()
    chosen = [x for x in candidates if rng.random() < P_LEAF] or candidates[:1]
    if not runs(chosen):  # as many of them as eager runs (greedy), else others
        kept: list[str] = []
        for x in chosen + [c for c in candidates if c not in chosen]:
            if (x in chosen or not kept) and runs([*kept, x]):
                kept.append(x)
        if not kept:
            return None
        chosen = kept
    outs = [i for i, t in enumerate(g.output_types()) if t.dtype.is_float]
    reached = grad_values(g, chosen)
    outs = [i for i in outs if g.outputs[i] in reached] or outs
    kind = KINDS[transform]
    if kind.bounded:
        size = {x: _numel(types[x].shape) for x in chosen}
        out_size = {i: _numel(g.output_types()[i].shape) for i in outs}
        # jacfwd: a forward per leaf element; jacrev: a backward per output element
        leaves: list[str] = []
        for x in sorted(chosen, key=lambda x: size[x]):
            if kind.within_basis(sum(size[y] for y in leaves) + size[x], 0):
                leaves.append(x)
        rng.shuffle(outs)
        picked: list[int] = []
        for i in outs:
            within = kind.within_basis(0, sum(out_size[j] for j in picked) + out_size[i])
            total = (sum(out_size[j] for j in picked) + out_size[i]) * sum(size[y] for y in leaves)
            if within and total <= MAX_JACOBIAN_ELEMS:
                picked.append(i)
        if not leaves or not picked:
            return None
        chosen, outs = leaves, picked
    order = [v.name for v in (*g.inputs, *g.params)]
    return tuple(sorted(chosen, key=order.index)), tuple(sorted(outs))


def draw_transform(g: Graph, seed: int, values: Sequence[Mapping[str, np.ndarray]],
                   transform: str, dialect: str | None = None,
                   sets: Sequence[Graph] | None = None) -> TransformSpec | None:
    """A transform test of `g` under `transform`, deterministic in `seed` (its own RNG
    stream); None when the transform makes no sense for the graph (vmap: no float input; a
    derivative: no float32/float64 input or param a float output depends on; jacrev/jacfwd:
    no Jacobian small enough), when the graph writes in place, or when torch eager runs it in
    neither dialect (`dialect`: in that one; None: in any, the spec's `dialects` say which).

    `values`: the test's input sets (valid ones: each batch element of vmap is one of them),
    each a value for every graph input by name; `sets`: the concrete graph of each set (the
    shapes of the cotangents and tangents; default `g` for all, a static graph)."""
    if transform not in KINDS:
        raise ValueError(f"draw_transform: unknown transform {transform!r}")
    kind = KINDS[transform]
    if has_writes(g):
        return None
    rng = random.Random(f"transform/{transform}/{seed}")
    dialects = DIALECTS if dialect is None else (dialect,)
    concrete = list(sets) if sets is not None else [g] * len(values)
    if kind.batched:
        return _draw_vmap(g, rng, values, dialects)
    def runs(leaves: Sequence[str]) -> tuple[str, ...]:
        return tuple(d for d in dialects if eager_problem(g, transform, leaves, d) is None)

    derived = _draw_derivative(g, rng, transform, runs)
    if derived is None:
        return None
    leaves, outs = derived
    ok = runs(leaves)
    if not ok:
        return None
    nprng = np.random.default_rng(rng.randrange(2**32))
    cotangents: list[dict[str, np.ndarray]] = []
    tangents: list[dict[str, np.ndarray]] = []
    for gk in concrete:
        types = gk.types()
        if kind.takes == "cotangents":
            cotangents.append({gk.outputs[i]: nprng.uniform(-1.0, 1.0, _dims(types[gk.outputs[i]].shape))
                               .astype(types[gk.outputs[i]].dtype.numpy) for i in outs})
        if kind.takes == "tangents":
            tangents.append({x: nprng.uniform(-1.0, 1.0, _dims(types[x].shape)).astype(types[x].dtype.numpy)
                             for x in leaves})
    return TransformSpec(transform, leaves, ok, outputs=outs, cotangents=tuple(cotangents),
                         tangents=tuple(tangents))


def _dims(shape: Iterable[Any]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


# ---- refitting (the reducer's candidates) ----------------------------------------------------

def refit_transform(spec: TransformSpec, old: Graph, g: Graph,
                    values: Sequence[Mapping[str, np.ndarray]], seed: int,
                    sets: Sequence[Graph] | None = None) -> TransformSpec | None:
    """`spec`, drawn for graph `old`, for a changed graph `g` (the reducer's candidate;
    `values`: its input sets, every input by name; `sets`: each set's concrete graph, default
    `g`). The transform stays; what it needs follows the graph:
      - vmap: the leaves `g` still has as float inputs (each in_dim at most the leaf's new
        rank), plus any float input that now differs between the samples; the samples that
        still exist, else set 0 B times; the batch size is kept;
      - a derivative transform: the leaves that are still candidates (`_candidate_leaves`),
        the differentiated outputs that `g` still has by name (else every float output the
        leaves reach), each kept cotangent or tangent whose shape and dtype are unchanged and
        fresh ones (from `seed` and the name) for the rest; a Jacobian past the size limits is
        refused.
    None when `g` writes in place, keeps no leaf, or eager runs it in none of `spec`'s
    dialects: the candidate is no transform test of this kind."""
    if has_writes(g) or not values:
        return None
    kind = spec.kind
    if kind.batched:
        return _refit_vmap(spec, g, values)
    def runs(leaves: Sequence[str]) -> tuple[str, ...]:
        return tuple(d for d in spec.dialects if eager_problem(g, spec.name, leaves, d) is None)

    candidates = set(_candidate_leaves(g))
    leaves: list[str] = []
    for x in spec.leaves:
        if x in candidates and runs([*leaves, x]):
            leaves.append(x)
    if not leaves:
        return None
    wanted = {old.outputs[i] for i in spec.outputs if i < len(old.outputs)}
    floats = [i for i, t in enumerate(g.output_types()) if t.dtype.is_float]
    reached = grad_values(g, leaves)
    outs = [i for i in floats if g.outputs[i] in wanted] or [i for i in floats if g.outputs[i] in reached]
    if not outs:
        return None
    types = g.types()
    leaf_elems = sum(_numel(types[x].shape) for x in leaves)
    out_elems = sum(_numel(g.output_types()[i].shape) for i in outs)
    if not kind.fits(leaf_elems, out_elems):
        return None
    concrete = list(sets) if sets is not None else [g] * len(values)
    cotangents: list[dict[str, np.ndarray]] = []
    tangents: list[dict[str, np.ndarray]] = []
    for k, gk in enumerate(concrete):
        tk = gk.types()
        if kind.takes == "cotangents":
            before = spec.cotangents[k] if k < len(spec.cotangents) else {}
            cotangents.append({gk.outputs[i]: kept_or_fresh(before, gk.outputs[i], _dims(tk[gk.outputs[i]].shape),
                                                            tk[gk.outputs[i]].dtype.numpy,
                                                            f"refit/{seed}/c{k}/{gk.outputs[i]}")
                               for i in outs})
        if kind.takes == "tangents":
            before = spec.tangents[k] if k < len(spec.tangents) else {}
            tangents.append({x: kept_or_fresh(before, x, _dims(tk[x].shape), tk[x].dtype.numpy,
                                           f"refit/{seed}/t{k}/{x}")
                             for x in leaves})
    order = [v.name for v in (*g.inputs, *g.params)]
    return TransformSpec(spec.name, tuple(sorted(leaves, key=order.index)), runs(leaves),
                         outputs=tuple(outs), cotangents=tuple(cotangents),
                         tangents=tuple(tangents))


def _refit_vmap(spec: TransformSpec, g: Graph, values: Sequence[Mapping[str, np.ndarray]]
                ) -> TransformSpec | None:
    types = g.types()
    floats = [v.name for v in g.inputs if v.type.dtype.is_float]
    dims = {x: min(d, types[x].rank) for x, d in zip(spec.leaves, spec.in_dims, strict=True)
            if x in floats}
    samples = list(spec.samples) if all(s < len(values) for s in spec.samples) else [0] * spec.batch_size

    def differ(ss: Sequence[int]) -> set[str]:
        return {v.name for v in g.inputs
                if any(not np.array_equal(values[s][v.name], values[ss[0]][v.name]) for s in ss)}

    changed = differ(samples)
    if changed - set(floats):  # a non-float input differs: it cannot be batched
        samples = [samples[0]] * spec.batch_size
        changed = set()
    for x in changed:
        dims.setdefault(x, 0)
    leaves = [x for x in floats if x in dims]
    if not leaves:
        return None
    ok = tuple(d for d in spec.dialects if eager_problem(g, "vmap", leaves, d) is None)
    if not ok:
        return None
    return TransformSpec("vmap", tuple(leaves), ok, tuple(dims[x] for x in leaves), tuple(samples))


# ---- a transform test's run -----------------------------------------------------------------

def transform_program(module: torch.nn.Module, g: Graph, spec: TransformSpec,
                      sets: Sequence[Mapping[str, np.ndarray]]
                      ) -> tuple[LeafFunction, list[torch.Tensor]]:
    """`module` (built with `trainable=spec.param_leaves(g)`) as a function of the leaves
    (`leaf_function`) and the arguments the transformed program takes: vmap's batched leaves
    (`batch_inputs`, the other inputs bound to set `samples[0]`'s), else the leaves' values in
    input set 0 (`sets`: the test's input sets, every input and param by name)."""
    base = sets[spec.samples[0]] if spec.kind.batched else sets[0]
    inputs = [torch.from_numpy(np.array(base[v.name], order="C")) for v in g.inputs]
    f = leaf_function(module, g, inputs, spec.leaves)
    if spec.kind.batched:
        return f, [torch.from_numpy(a) for a in batch_inputs(spec, sets)]
    return f, leaf_values(module, g, inputs, spec.leaves)


def transform_reference(module: torch.nn.Module, g: Graph, spec: TransformSpec,
                        sets: Sequence[Mapping[str, np.ndarray]]) -> list[torch.Tensor]:
    """What a transform test's results must be, in eager: vmap's per-sample results stacked
    (`stacked_reference`), a derivative transform as it is (`transformed`, on input set 0)."""
    f, args = transform_program(module, g, spec, sets)
    if spec.kind.batched:
        return stacked_reference(f, args, spec.in_dims)
    return [t.detach() for t in transformed(spec, f, 0, g.outputs)(*args)]
