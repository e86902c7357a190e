"""The generator: a verified, concrete graph per seed (`generate`), grown op by op by the
builder (`ir.gen.builder`), with control flow (`ir.gen.control`) and in-place writes
(`ir.gen.inplace`) placed along the way.
"""
from __future__ import annotations

import random

from ir.core.dtypes import DType
from ir.core.graph import Graph, Value
from ir.core.verify import verify
from ir.gen.builder import GenConfig, GenerationError, SymbolicGraphBuilder
from ir.gen.control import try_control
from ir.gen.custom import add_custom
from ir.gen.inplace import add_inplace
from ir.gen.region import add_regions


def _first_input_dtype(rng: random.Random, dtypes: list[DType]) -> DType:
    if DType.float32 in dtypes and rng.random() < 0.6:
        return DType.float32
    return rng.choice(dtypes)


def generate(seed: int, cfg: GenConfig | None = None) -> Graph:
    """A verified, concrete graph with up to `cfg.nodes` instructions, determined by `seed`."""
    cfg = cfg or GenConfig()
    rng = random.Random(seed)
    g = generate_once(rng, cfg, seed)
    if cfg.p_inplace:
        g = add_inplace(g, rng, cfg)
    if cfg.p_custom and rng.random() < cfg.p_custom:
        g = add_custom(g, rng, cfg.p_custom_mutates)
    if cfg.p_region and rng.random() < cfg.p_region:
        g = add_regions(g, rng)
    return g


def generate_once(rng: random.Random, cfg: GenConfig, seed: int,
                  builder: SymbolicGraphBuilder | None = None) -> Graph:
    """The graph of one draw of `rng`, before in-place writes (`generate` adds them)."""
    ops = cfg.enabled_ops()
    dtypes = cfg.enabled_dtypes()
    if not ops or not dtypes:
        raise GenerationError("generator: no ops or no dtypes enabled")
    # `builder`: a subclass with more state (ir.gen.symbolic_shapes keeps symbolic dims beside it)
    b = builder if builder is not None else SymbolicGraphBuilder(rng, cfg)
    first_rank = rng.randint(1, cfg.max_rank)
    b.add_input(b.concrete_type(first_rank, _first_input_dtype(rng, dtypes)))
    values: list[Value] = list(b.inputs)
    used: set[str] = set()
    attempts = 0
    while len(b.insts) < cfg.nodes and attempts < 20 * cfg.nodes + 40:
        attempts += 1
        roll = rng.random() if cfg.p_if or cfg.p_loop or cfg.p_scan else 1.0
        if roll < cfg.p_if + cfg.p_loop + cfg.p_scan:
            placed = try_control(b, values, ops, roll)
            if placed and b.admit(placed.insts):
                for inst in placed.insts:
                    b.insts.append(inst)
                    used.update(inst.args)
                    values.extend(r for r in inst.results if r.name not in placed.quiet)
                used.update(placed.quiet)  # pass-through results: not outputs
                known = {v.name for v in values}
                values.extend(v for v in (*b.inputs, *b.params) if v.name not in known)
            continue
        op_cls = rng.choice(ops)
        arity = op_cls.sample_arity(b.ctx)
        have = {v.type.dtype for v in values}
        combos = sorted({ins for ins, _ in op_cls.signatures(arity)
                         if ins[0] in have and all(d in dtypes for d in ins)},
                        key=lambda c: [d.value for d in c])
        if not combos:
            continue
        in_dtypes = rng.choice(combos)
        firsts = [v for v in values if v.type.dtype == in_dtypes[0] and v.type.rank in op_cls.first_ranks()
                  and v.type.rank <= cfg.max_rank]
        if not firsts:
            continue
        # Prefer values nobody reads yet: it grows deeper graphs with fewer dead ends.
        fresh = [v for v in firsts if v.name not in used]
        first = rng.choice(fresh if fresh and rng.random() < 0.7 else firsts)
        made = b.try_op(op_cls, first, values, in_dtypes, arity)
        if made is None or any(r.type.rank > cfg.max_rank for r in made.results):
            continue
        b.insts.append(made)
        used.update(made.args)
        values.extend(made.results)
        known = {v.name for v in values}
        values.extend(v for v in (*b.inputs, *b.params) if v.name not in known)
    if not b.insts:
        raise GenerationError(f"generator: no op could be placed (seed {seed})")
    outputs = [r.name for inst in b.insts for r in inst.results if r.name not in used]
    return verify(b.graph("main", b.insts, outputs))
