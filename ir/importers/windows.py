"""Windows: connected sub-graphs of a model's GraphIR, cut to be seeds (issue 32).

An imported model (`ir.importers.torch_export`, `ir.importers.onnx_model`) is hundreds of
instructions; a seed is tens. `subgraph(graph, insts)` makes a graph of some of its top-level
instructions: the values entering them become inputs (with their types), the params they read
stay params, and the values they make that the rest of the model reads (or returns) become
outputs. `cut_windows` picks connected runs of k in [k_min, k_max] top-level instructions,
deterministic by seed, overlapping little, each verified and, when asked, checked to have
valid inputs (`ir.numerics.input_search.make_valid`, as a seed is checked: no repair). A
control-flow instruction is one instruction here: its bodies are never cut. Each window knows
its model and its place in it (`Window.lineage`: `resnet18 insts 40-62`), which the `.gir`
file carries as a leading comment (`window_text`, `read_lineage`).
"""
from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ir.core.graph import Graph, Inst, Value
from ir.core.text import print_graph
from ir.core.verify import verify


def subgraph(graph: Graph, insts: Iterable[int], name: str | None = None) -> Graph:
    """The graph of `graph`'s top-level instructions at indices `insts` (taken in the graph's
    order, duplicates ignored). Values they read that none of them defines become inputs, in
    order of first use, with their types; those that are params of `graph` stay params.
    Outputs: the results the rest of `graph` reads or returns, in definition order; when none
    is, the results of the last instruction; then every input an instruction writes in place
    (`written_inputs`: a mutated input is returned, the in-place analysis' rule). Bodies come
    whole. The result is not verified (`ir.core.verify.verify` says whether it is well
    formed)."""
    idx = sorted(set(insts))
    if not idx:
        raise ValueError("subgraph: no instructions")
    if idx[0] < 0 or idx[-1] >= len(graph.insts):
        raise IndexError(f"subgraph: instruction {idx[0] if idx[0] < 0 else idx[-1]} is not in "
                         f"graph {graph.name} ({len(graph.insts)} instructions)")
    types = graph.types()
    param_names = {p.name for p in graph.params}
    chosen = [graph.insts[i] for i in idx]
    defined: set[str] = set()
    inputs: list[Value] = []
    params: list[Value] = []
    entering: set[str] = set()
    for inst in chosen:
        for a in inst.args:
            if a in defined or a in entering:
                continue
            entering.add(a)
            (params if a in param_names else inputs).append(Value(a, types[a]))
        defined.update(inst.result_names)
    inside = set(idx)
    read_outside: set[str] = set(graph.outputs)
    for i, inst in enumerate(graph.insts):
        if i not in inside:
            read_outside.update(inst.args)
    outputs = [r for inst in chosen for r in inst.result_names if r in read_outside]
    if not outputs:
        outputs = list(chosen[-1].result_names)
    g = Graph(name or graph.name, tuple(inputs), tuple(chosen), tuple(outputs), tuple(params))
    written = written_inputs(g)
    if written:  # an in-place write to what is now an input: the input is returned too
        g = dataclasses.replace(g, outputs=(*g.outputs, *(w for w in written
                                                         if w not in g.outputs)))
    return g


def written_inputs(g: Graph) -> list[str]:
    """The inputs of `g` an instruction writes in place (directly or through a view), in
    order; none when the in-place analysis rejects `g` for another reason (the verifier
    says which)."""
    from ir.analysis.inplace import InplaceError, analyze, has_writes

    if not has_writes(g):
        return []
    try:
        top = analyze(g, require_returned=False).top
    except (InplaceError, ValueError):
        return []
    return [v.name for v in g.inputs if top.nodes[v.name].storage.writes]


#: the comment line a window's `.gir` file starts with (`read_lineage` reads it back)
_LINEAGE = re.compile(r"^#\s*model:\s*(?P<model>\S+)(\s+part\s+\d+)?\s+insts\s+(?P<first>\d+)-"
                      r"(?P<last>\d+)\s*$")


@dataclass(frozen=True)
class Window:
    """A window of a model: its graph (top-level instructions `insts` of the model, in order),
    the model's name and the window's place (`first`..`last`, the model's instruction
    indices; of part `part` of the model when the importer gave the model in parts, the
    connected sub-graphs of what it mapped: `ImportResult.windows`)."""

    graph: Graph
    model: str
    insts: tuple[int, ...]
    part: int | None = None

    @property
    def first(self) -> int:
        return self.insts[0]

    @property
    def last(self) -> int:
        return self.insts[-1]

    @property
    def lineage(self) -> str:
        """`<model> [part <p>] insts <first>-<last>`: where the window comes from."""
        part = f" part {self.part}" if self.part is not None else ""
        return f"{self.model}{part} insts {self.first}-{self.last}"

    def text(self) -> str:
        """The window's `.gir` text: a leading `# model: <lineage>` comment, then the graph."""
        return f"# model: {self.lineage}\n{print_graph(self.graph)}"

    def weights(self, params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The values of the window's params among the model's `params` (by name; a param
        missing there, or of another shape, is left out: it is drawn afresh)."""
        out = {}
        for p in self.graph.params:
            a = params.get(p.name)
            if a is not None and tuple(a.shape) == tuple(p.type.shape):
                out[p.name] = np.asarray(a, dtype=p.type.dtype.numpy)
        return out


def read_lineage(text: str) -> tuple[str, int, int] | None:
    """(model, first, last) of a window's `.gir` text (its `# model: ...` comment among the
    leading comment lines), None when it has none."""
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if not s.startswith("#"):
            return None
        m = _LINEAGE.match(s)
        if m:
            return m.group("model"), int(m.group("first")), int(m.group("last"))
    return None


def _neighbours(graph: Graph) -> list[list[int]]:
    """Per top-level instruction: the instructions it shares a value with (reads a result of,
    or whose results read one of its results), in index order. Inputs and params connect
    nothing: a window is connected through the values its instructions compute."""
    producer: dict[str, int] = {}
    near: list[set[int]] = [set() for _ in graph.insts]
    for i, inst in enumerate(graph.insts):
        for a in inst.args:
            j = producer.get(a)
            if j is not None and j != i:
                near[i].add(j)
                near[j].add(i)
        for r in inst.result_names:
            producer[r] = i
    return [sorted(n) for n in near]


def is_valid_material(g: Graph, seed: int = 0,
                      params: Mapping[str, np.ndarray] | None = None) -> bool:
    """Whether the input search finds values for which every value of `g` is valid, without
    dropping an instruction (how a seed must be: `tests/mutators/test_seed_corpus.py`);
    `params`: values of params it starts from (a model's weights)."""
    from ir.numerics.input_search import make_valid

    try:
        valid = make_valid(g, seed, max_drops=0, params=params or None)
    except Exception:  # an op the interpreter cannot run on these values: not a seed
        return False
    return valid is not None and not valid.dropped and valid.search.ok


def cut_windows(graph: Graph, model: str, count: int = 8, k_min: int = 5, k_max: int = 30,
                seed: int = 0, max_overlap: float = 0.5, check_valid: bool = True,
                tries: int | None = None, max_elems: int | None = None,
                max_param_elems: int | None = None, part: int | None = None,
                params: Mapping[str, np.ndarray] | None = None) -> list[Window]:
    """Up to `count` windows of `graph`: connected sets of top-level instructions (connected
    through the values they compute, `_neighbours`) of k in [`k_min`, `k_max`] instructions,
    nested ones counted (`Graph.num_insts`; a control-flow instruction comes whole, bodies
    are never cut, and one bigger than `k_max` is in no window). Deterministic given the
    arguments: each try draws a start and a target size from `seed` and grows the set by
    random neighbours. A window shares at most `max_overlap` of its instructions with an
    earlier one, verifies (`ir.core.verify`), has an input, has no value but params of more
    than `max_elems` elements and params of at most `max_param_elems` elements in all (when
    given), and with `check_valid` has valid inputs (`is_valid_material`: from drawn
    values, and from the model's weights `params` when given, as `mutation.model_weights`
    may start from either). `part`: the windows' `Window.part`. Fewer than `count` when the
    tries (default 20 per window) run out; sorted by place in the model."""
    if not 1 <= k_min <= k_max:
        raise ValueError(f"cut_windows: need 1 <= k_min <= k_max, got {k_min}, {k_max}")
    n = len(graph.insts)
    if n == 0 or count <= 0:
        return []
    rng = random.Random(f"{model}/{seed}")
    sizes = [sum(1 for _ in inst_walk(inst)) for inst in graph.insts]
    near = _neighbours(graph)
    out: list[Window] = []
    seen: set[tuple[int, ...]] = set()
    for _ in range(tries if tries is not None else 20 * count):
        if len(out) >= count:
            break
        starts = [i for i in range(n) if sizes[i] <= k_max]
        if not starts:
            break
        start = rng.choice(starts)
        target = rng.randint(k_min, k_max)
        chosen = {start}
        size = sizes[start]
        frontier = {j for j in near[start] if sizes[j] <= k_max}
        while size < target:
            fits = sorted(j for j in frontier - chosen if size + sizes[j] <= k_max)
            if not fits:
                break
            j = rng.choice(fits)
            chosen.add(j)
            size += sizes[j]
            frontier.update(near[j])
        key = tuple(sorted(chosen))
        if size < k_min or key in seen:
            continue
        seen.add(key)
        if any(len(chosen & set(w.insts)) > max_overlap * len(chosen) for w in out):
            continue
        g = subgraph(graph, key, name="main")
        weights = {p.name for p in g.params}
        if not g.inputs or (max_elems is not None and any(
                _elems(v.type.shape) > max_elems for v in g.all_values() if v.name not in weights)):
            continue
        if max_param_elems is not None and sum(
                _elems(p.type.shape) for p in g.params) > max_param_elems:
            continue
        try:
            verify(g)
        except ValueError:
            continue
        if check_valid and not is_valid_material(g, seed):
            continue
        window = Window(g, model, key, part)
        if check_valid and params and window.weights(params) and not is_valid_material(
                g, seed, window.weights(params)):
            continue
        out.append(window)
    return sorted(out, key=lambda w: w.insts)


def _elems(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def inst_walk(inst: Inst) -> Iterable[Inst]:
    """`inst` and every instruction in its bodies."""
    yield inst
    for body in inst.blocks:
        for nested, _ in body.walk():
            yield nested
