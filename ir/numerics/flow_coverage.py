"""Control-flow coverage of a test's input sets, and the search for input sets that raise it.

A *site* is one control-flow instruction anywhere in a graph, named by its path: "3" is
top-level instruction 3, "3/1/0" instruction 0 of body 1 (an if's else) of instruction 3. Running
an input set through `ir.numerics.domain.evaluate_checked` with a trace tells, per site, which bodies ran:
an `if` took branch 0 (then) or 1 (else); a `loop`/`scan` ran its body n times (its trip count).

`cover` adds input sets (graph inputs only; params are the model's weights, shared by every set)
until every `if` has taken both branches and every loop has run a second trip count, or the
budget (`CoverConfig`) is spent. Each candidate set must be valid by the same check as set 0
and is kept only if it adds coverage; the sites a kept set reaches become steerable in turn (an
`if` in a branch set 0 did not take, in a loop body set 0 ran zero times). Targets, least tried
first, each up to `CoverConfig.tries` times:
  1. a branch an `if` has not taken, the `if` having run. Its predicate is a comparison `a > b`
     (>=, <, <=) with one side a graph input passed unchanged into the site (the generator makes
     every predicate threshold such an input). First try: in the first set where the site ran,
     that input is moved past every value the other side took there by a clear gap (no
     near-tie), so every run takes the other branch. Later tries: fresh random inputs. A set
     that is invalid (the other branch, or what its results feed, is out of its domain) or
     misses the branch is repaired by the input search, params (and a moved threshold) frozen,
     with the goal that the site runs and takes the branch at least once, measured on the
     predicate's values in the traced run at any depth (`_Hold`);
  1'. a loop whose trip count is such an input: run only zero times while its body holds
     sites, one trip (set 0's explore mode made the first trip valid), then more; seen with one
     count only, zero, one, then another;
  2. fresh random inputs repaired by the search, while a missing branch has no threshold seen.
When more sets are needed than are left, a target's first try packs into its set every other
untried target of the same base set, one by one while the set stays valid.
Passing unchanged is seen by tensor identity in the traced run: bodies get their operands (and a
loop's pass-through carried values) as the very tensors of the enclosing scope.

Every candidate is recorded (`Attempt`), and `explain` tells why a branch was never taken
(`bench/coverage.py` reports the figures and the reasons).
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import numpy as np
import torch

from ir.core.graph import Graph, Inst
from ir.core.op import Op, lookup_op
from ir.core.paths import Site, control_sites
from ir.numerics.domain import ControlTrace, Violation, evaluate_checked
from ir.numerics.input_search import SearchConfig, search_inputs
from ir.numerics.values import ValueRanges, as_tensors, sample_value
from ir.ops.control import MAX_TRIPS, ControlFlow, is_control


def sites(g: Graph) -> dict[str, Inst]:
    """Every control-flow instruction of `g`, nested ones included, by the text form of its
    site (`ir.core.paths.Site`: "3", "3/0/1", ...): coverage's keys."""
    return {str(site): inst for site, inst in control_sites(g)}


def _control(op: Op) -> ControlFlow:
    """The op of a site (`sites`): a control-flow op."""
    return cast(ControlFlow, op)


def _control_cls(name: str) -> type[ControlFlow]:
    """The op class of a site's op name (`Coverage.ops`): a control-flow op."""
    return cast("type[ControlFlow]", lookup_op(name))


def enclosing(site: str) -> tuple[str, int] | None:
    """The site holding `site` and the index of the body it is in ("3/1/0" -> ("3", 1)); None
    at the top level."""
    outer = Site.parse(site).enclosing()
    return None if outer is None else (str(outer[0]), outer[1])


# ---- what the sets exercised -------------------------------------------------------------------

#: outcomes of one candidate set (`Attempt.outcome`)
KEPT = "kept"  #: valid and adding coverage
NO_GAIN = "no gain"  #: valid, nothing new (for a targeted if: it did not take the branch)
INVALID = "invalid"  #: not valid, even after the repair
NO_CANDIDATE = "no candidate"  #: no set to try (e.g. the fresh draw's repair failed)


@dataclass
class Attempt:
    """One candidate set `cover` tried: what it aimed at and what became of it."""

    #: "if" (a branch), "trips" (a loop's trip count) or "fresh" (random inputs)
    kind: str
    #: the targeted site (None: fresh)
    site: str | None
    #: the wanted branch of an if, the wanted trip count of a loop (None: fresh)
    want: int | None
    outcome: str
    #: the violation of an invalid candidate (after the repair), and where it is
    problem: str | None = None
    problem_path: tuple[int, ...] = ()


@dataclass
class Coverage:
    """What a test's input sets exercised, per control-flow site."""

    #: site -> op name, for every control-flow instruction of the graph
    ops: dict[str, str]
    #: if site -> branches taken (0 then, 1 else)
    branches: dict[str, set[int]] = field(default_factory=dict)
    #: loop/scan site -> trip counts seen
    trips: dict[str, set[int]] = field(default_factory=dict)
    n_sets: int = 0
    #: the candidate sets `cover` tried, in order (see `explain`)
    attempts: list[Attempt] = field(default_factory=list)
    #: sites whose predicate (an if) or trip count (a loop) is a steerable graph input
    steerable: set[str] = field(default_factory=set)

    @staticmethod
    def of(g: Graph) -> Coverage:
        return Coverage({s: inst.op.name for s, inst in sites(g).items()})

    def record(self, site: str, ran: list[int]) -> None:
        if self.chooses(site):
            self.branches.setdefault(site, set()).update(ran)
        else:
            self.trips.setdefault(site, set()).add(len(ran))

    def chooses(self, site: str) -> bool:
        """Whether the op at `site` chooses one body per run (branches), not a trip count."""
        return site in self.ops and _control_cls(self.ops[site]).chooses_body

    def steers_trips(self, site: str) -> bool:
        """Whether the op at `site` takes its trip count from data, which `cover` may vary."""
        return _control_cls(self.ops[site]).trip_operand is not None

    def gain(self, other: Coverage) -> bool:
        """Whether `other` saw a branch or trip count this coverage has not."""
        return (any(b - self.branches.get(s, set()) for s, b in other.branches.items())
                or any(t - self.trips.get(s, set()) for s, t in other.trips.items()))

    def merge(self, other: Coverage) -> None:
        for s, b in other.branches.items():
            self.branches.setdefault(s, set()).update(b)
        for s, t in other.trips.items():
            self.trips.setdefault(s, set()).update(t)
        self.n_sets += other.n_sets

    def reached(self, site: str) -> bool:
        """Whether the site ran in some set (a loop running zero trips counts as run)."""
        return site in self.branches or site in self.trips

    def body_ran(self, site: str, block: int) -> bool:
        """Whether body `block` of `site` ran in some set."""
        if self.chooses(site):
            return block in self.branches.get(site, set())
        return any(t > 0 for t in self.trips.get(site, ()))

    @property
    def if_sites(self) -> list[str]:
        return [s for s in self.ops if self.chooses(s)]

    @property
    def loop_sites(self) -> list[str]:
        """Loops and scans (both record trip counts; only a loop's can vary)."""
        return [s for s in self.ops if not self.chooses(s)]

    def missing_branches(self) -> list[tuple[str, int]]:
        return [(s, k) for s in self.if_sites for k in (0, 1) if k not in self.branches.get(s, set())]

    def summary(self) -> dict[str, Any]:
        """Plain figures for a results row."""
        ifs = self.if_sites
        seen = sum(len(self.branches.get(s, ())) for s in ifs)
        return {
            "n_sets": self.n_sets,
            "n_ifs": len(ifs),
            "ifs_both_branches": sum(1 for s in ifs if len(self.branches.get(s, ())) == 2),
            "branch_coverage": seen / (2 * len(ifs)) if ifs else None,
            "trip_counts": sorted({t for s in self.loop_sites for t in self.trips.get(s, ())}),
        }


# ---- why a branch was never taken --------------------------------------------------------------

UNREACHED_BRANCH = "unreached: enclosing if never took its branch"
UNREACHED_LOOP = "unreached: enclosing loop never iterated"
UNREACHED_OUTER = "unreached: enclosing site unreached"
NO_THRESHOLD = "no steerable threshold"
NOT_TRIED = "not tried (budget)"
TRIES_INVALID_IN_BRANCH = "tried: invalid in the wanted branch"
TRIES_INVALID_ELSEWHERE = "tried: invalid elsewhere (what the branch feeds, later trips)"
TRIES_NOT_TAKEN = "tried: valid, the branch not taken"
#: every reason `explain` gives, in report order
REASONS = (UNREACHED_BRANCH, UNREACHED_LOOP, UNREACHED_OUTER, NO_THRESHOLD, NOT_TRIED,
           TRIES_INVALID_IN_BRANCH, TRIES_INVALID_ELSEWHERE, TRIES_NOT_TAKEN)


def explain(cov: Coverage) -> dict[tuple[str, int], str]:
    """Why each missing branch (site, branch) of `cov` was never taken, from the sites that ran
    and the attempts `cover` recorded: one of `REASONS`."""
    out: dict[tuple[str, int], str] = {}
    for site, k in cov.missing_branches():
        if not cov.reached(site):
            out[site, k] = _unreached(cov, site)
            continue
        tried = [a for a in cov.attempts if a.kind == "if" and a.site == site and a.want == k]
        if site not in cov.steerable:
            out[site, k] = NO_THRESHOLD
        elif not tried:
            out[site, k] = NOT_TRIED
        elif any(a.outcome == INVALID for a in tried):
            last = [a for a in tried if a.outcome == INVALID][-1]
            inside = Site(last.problem_path).within(Site.parse(site), k) if last.problem_path else False
            out[site, k] = TRIES_INVALID_IN_BRANCH if inside else TRIES_INVALID_ELSEWHERE
        else:
            out[site, k] = TRIES_NOT_TAKEN
    return out


def _unreached(cov: Coverage, site: str) -> str:
    """Why a site never ran: its enclosing site's body did not run, or that site itself never
    ran (also said of a top-level site, which only an invalid set 0 leaves unrun)."""
    outer = enclosing(site)
    if outer is None or not cov.reached(outer[0]):
        return UNREACHED_OUTER
    return UNREACHED_BRANCH if cov.chooses(outer[0]) else UNREACHED_LOOP


# ---- traced runs -------------------------------------------------------------------------------


@dataclass
class Observation:
    """How the input sets met one steerable site: a comparison predicate of an `if` whose one
    side is a graph input passed unchanged into the site (the threshold), or a loop whose trip
    count is such an input. `other` holds the other side's values seen, per input set."""

    input: str  #: the graph input that is the threshold or the trip count
    #: for an if: +1 when the predicate is `input > other` (or >=), -1 when `input < other`
    sign: int = 0
    #: input set index -> the other side's values there (an if), or [] (a loop): the sets
    #: where the site ran
    other: dict[int, list[float]] = field(default_factory=dict)
    #: for an if: the names, in the site's scope, of the threshold and of the other side
    threshold_name: str | None = None
    other_name: str | None = None
    #: for an if: the site in whose scope those names are (the if itself, or an enclosing site
    #: whose bodies get the predicate unchanged: `PredicateSource`); None: the if itself
    anchor: str | None = None


def _comparison(scope_graph: Graph, name: str) -> tuple[str, str, int] | None:
    """(a, b, s) when value `name` is `a <cmp> b` computed in `scope_graph`: an order comparison
    and its `Op.comparison_sign`."""
    for other in scope_graph.insts:
        sign = other.op.comparison_sign
        if name in other.result_names and sign is not None:
            a, b = other.args
            return a, b, sign
    return None


def _scopes(g: Graph) -> dict[str, Graph]:
    """Site -> the graph or body the site's instruction is in."""
    return {str(site): site.scope.at(g) for site, _ in control_sites(g)}


def _passed_in(g: Graph, site: str, scope: Graph, name: str) -> tuple[str, str] | None:
    """When value `name` of the body holding `site` is an input of that body passed unchanged
    (an if's operand; a loop's or scan's carried value its body returns as is): the enclosing
    site and the name of the value it passes, in the enclosing site's own scope."""
    outer = enclosing(site)
    names = [v.name for v in scope.inputs]
    if outer is None or name not in names:
        return None
    holder = sites(g)[outer[0]]
    i = names.index(name)
    op = _control(holder.op)
    pos = op.passed_operand(outer[1], i)
    carried = op.carried_output(i)
    if pos is None or (carried is not None and scope.outputs[carried] != name):
        return None  # made by the op, or changed by the body before the next step
    return outer[0], holder.args[pos]


@dataclass(frozen=True)
class PredicateSource:
    """Where an if's predicate is computed: the comparison `a <cmp> b` ((a - b) * sign > 0) in
    the scope of site `anchor`, the if itself or an enclosing site whose bodies receive the
    predicate unchanged (an if's operand, a loop's or scan's pass-through carried value)."""

    anchor: str
    a: str
    b: str
    sign: int


def predicate_sources(g: Graph) -> dict[str, PredicateSource]:
    """Every if of `g` whose predicate is a comparison, in its own scope or passed unchanged
    from an enclosing one, by site."""
    scopes, out = _scopes(g), {}
    for site, inst in sites(g).items():
        if not _control(inst.op).chooses_body:
            continue
        here, name = site, inst.args[0]
        while True:
            parts = _comparison(scopes[here], name)
            if parts is not None:
                out[site] = PredicateSource(here, *parts)
                break
            up = _passed_in(g, here, scopes[here], name)
            if up is None:
                break
            here, name = up
    return out


def _input_name(g: Graph, site: str, name: str) -> str | None:
    """The graph input (never a param) that value `name` of the scope of `site` is, passed
    unchanged into that scope; None when it is none."""
    scopes = _scopes(g)
    while True:
        scope = scopes[site]
        if scope is g:
            return name if any(v.name == name for v in g.inputs) else None
        up = _passed_in(g, site, scope, name)
        if up is None:
            return None
        site, name = up


def _from_input(g: Graph, site: str, name: str) -> bool:
    """Whether value `name` of the scope of `site` is a graph input passed unchanged into it."""
    return _input_name(g, site, name) is not None


def _only_compared(scope: Graph, name: str) -> bool:
    """Whether value `name` of `scope` is read only by comparisons, directly or passed
    unchanged into bodies (an if's operand; a loop's or scan's carried value its body returns
    as is): a threshold that moves nothing else when `cover` moves it."""
    for inst in scope.insts:
        for pos in (i for i, a in enumerate(inst.args) if a == name):
            if inst.op.comparison_sign is not None:
                continue
            # read as data, a trip count, a predicate, a sequence: moving it moves more
            op = inst.op
            if not is_control(op):
                return False
            into = op.operand_inputs(pos)
            if not into:
                return False
            for k, j in into:
                body = inst.blocks[k]
                inner = body.inputs[j].name
                carried = op.carried_output(j)
                if carried is not None and body.outputs[carried] != inner:
                    return False
                if not _only_compared(body, inner):
                    return False
    return True


def unsteerable_ifs(g: Graph) -> list[str]:
    """The ifs `cover` cannot steer freely, by the graph alone: their predicate is no
    comparison (in their scope or passed unchanged from an enclosing one) with a scalar side
    that is a graph input passed unchanged (what the generator makes and `cover` flips), read
    by nothing but comparisons (moving it must not move other values: a trip count, an
    operand of `floor`)."""
    srcs = predicate_sources(g)
    scopes = _scopes(g)
    out = []
    for site, inst in sites(g).items():
        if not _control(inst.op).chooses_body:
            continue
        src = srcs.get(site)
        types = scopes[src.anchor].types() if src else {}
        if src is None or not any(types[x].rank == 0 and _from_input(g, src.anchor, x)
                                  and _only_compared(g, cast(str, _input_name(g, src.anchor, x)))
                                  for x in (src.a, src.b)):
            out.append(site)
    return out


class _Tracer:
    """Records coverage and observations of one traced run of input set `index`."""

    def __init__(self, g: Graph, env: dict[str, torch.Tensor], index: int,
                 observations: dict[str, Observation]):
        self.cov = Coverage.of(g)
        self.cov.n_sets = 1
        self.index = index
        self.obs = observations
        self.sites = sites(g)
        self.inputs = {id(t): name for name, t in env.items() if name in {v.name for v in g.inputs}}
        self.sources = predicate_sources(g)
        #: anchor site -> the ifs whose predicate is computed in its scope
        self.by_anchor: dict[str, list[str]] = {}
        for s, src in self.sources.items():
            self.by_anchor.setdefault(src.anchor, []).append(s)
        #: ifs run since their anchor's last trace (their predicate's sides are read there)
        self.pending: set[str] = set()

    def __call__(self, site: str, ran: list[int], values: dict[str, torch.Tensor]) -> None:
        self.cov.record(site, ran)
        inst = self.sites.get(site)
        if inst is None:
            return
        trip = _control(inst.op).trip_operand
        if trip is not None:
            name = self.inputs.get(id(values.get(inst.args[trip])))
            if name is not None:
                self.obs.setdefault(site, Observation(name)).other.setdefault(self.index, [])
        src = self.sources.get(site)
        if src is not None and src.anchor != site:
            self.pending.add(site)
        for s in self.by_anchor.get(site, ()):
            if s == site or s in self.pending:
                self.pending.discard(s)
                self._observe(s, self.sources[s], values)

    def _observe(self, site: str, src: PredicateSource, values: dict[str, torch.Tensor]) -> None:
        """The if at `site` ran: its predicate's sides, read in its anchor's scope `values`."""
        a, b, s = src.a, src.b, src.sign
        for side, other, sign in ((b, a, -s), (a, b, s)):
            name = self.inputs.get(id(values.get(side)))
            x = values.get(other)
            if name is not None and x is not None and x.numel() == 1:
                ob = self.obs.setdefault(site, Observation(name, sign, {}, side, other,
                                                           src.anchor))
                ob.other.setdefault(self.index, []).append(float(x.detach().reshape(())))
                return


def trace_run(g: Graph, values: dict[str, np.ndarray], index: int = 0,
              observations: dict[str, Observation] | None = None
              ) -> tuple[Coverage, dict | None, Violation | None]:
    """Coverage of input set `index`, its evaluated values (None when the set is invalid) and
    its violation; steerable sites are added to `observations` when given."""
    env = as_tensors(values)
    tracer = _Tracer(g, env, index, observations if observations is not None else {})
    with torch.no_grad():
        out, violation = evaluate_checked(g, env, trace=tracer)
    return tracer.cov, (None if violation is not None else out), violation


# ---- the search ----------------------------------------------------------------------------------

#: the input search's effort per candidate set (set 0's search has the default, larger one),
#: near a valid set (a flip, a trip count) and from fresh inputs
REPAIR = SearchConfig(max_iters=12)
RESTART = SearchConfig(max_iters=24)


@dataclass(frozen=True)
class CoverConfig:
    #: input sets per test at most, set 0 included
    max_sets: int = 8
    #: candidate sets tried at most
    attempts: int = 24
    #: candidate sets tried at most per target (a branch of an if, a loop's trip counts)
    tries: int = 5


def _gap(x: float, is_float: bool) -> float:
    """A distance past a comparison's other side that no rounding can close."""
    return 0.25 + 0.25 * abs(x) if is_float else max(1, int(abs(x)) // 4 + 1)


class _Hold:
    """A search goal: `site` runs and takes branch `want` at least once, with a clear gap
    between the predicate's sides (`goal`, from the values the trace `new_trace` made for the
    same evaluation saw)."""

    def __init__(self, site: str, ob: Observation, want: int):
        self.site = site
        self.ob = ob
        #: +1: the threshold must exceed the other side, -1: stay below it
        self.side = ob.sign if want == 0 else -ob.sign
        #: where the predicate's sides are read (the site, or an enclosing one)
        self.anchor = ob.anchor or site
        self.runs: list[torch.Tensor] = []
        self.pending = False

    def new_trace(self) -> ControlTrace:
        """The trace of one evaluation (what `goal` then judges)."""
        self.runs = []
        self.pending = False
        return self._trace

    def _trace(self, site: str, ran: list[int], values: dict[str, torch.Tensor]) -> None:
        if site == self.site and self.anchor != site:
            self.pending = True  # its sides are read when the anchor's trace comes
            return
        if site != self.anchor or (self.anchor != self.site and not self.pending):
            return
        self.pending = False
        # an if's observation: both names are set
        t, x = values[cast(str, self.ob.threshold_name)], values[cast(str, self.ob.other_name)]
        d = (t.to(torch.float64) - x.to(torch.float64)).reshape(()) * self.side
        margin = _gap(float(x.detach().reshape(())), x.dtype.is_floating_point) / 2
        self.runs.append(torch.relu(margin - d))

    def goal(self, values: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        if not self.runs:  # the site did not run: no gradient, the search redraws
            return [torch.ones((), dtype=torch.float64)]
        return [torch.stack(self.runs).min()]


@dataclass(frozen=True)
class _Target:
    """What a candidate set aims at: `kind` "if" (branch `want` of `site`), "trips" (trip
    count `want` of loop `site`) or "fresh" (random inputs); `key` counts its tries."""

    kind: str
    site: str | None
    want: int | None
    key: tuple

    @property
    def at(self) -> str:
        """The site of an "if" or "trips" target (a "fresh" one has none)."""
        assert self.site is not None, "a fresh target has no site"
        return self.site

    @property
    def wanted(self) -> int:
        """The branch or trip count an "if" or "trips" target wants."""
        assert self.want is not None, "a fresh target wants nothing"
        return self.want


class _Cover:
    """The state of one `cover` call: the kept sets, their coverage and observations."""

    def __init__(self, g: Graph, values: dict[str, np.ndarray], seed: int, cfg: CoverConfig,
                 total: Coverage, observations: dict[str, Observation]):
        self.g = g
        self.seed = seed
        self.cfg = cfg
        self.sets = [values]
        self.total = total
        self.obs = observations
        self.rng = random.Random(f"cover/{seed}")
        self.params = frozenset(p.name for p in g.params)
        self.tries: Counter = Counter()
        #: (site, body) pairs holding other sites
        self.holders = {h for s in total.ops if (h := enclosing(s)) is not None}
        #: per set, the graph outputs its traced run computed (`Covered.outputs`)
        self.outputs: list[list[np.ndarray]] = []

    def run(self) -> None:
        for attempt in range(self.cfg.attempts):
            if len(self.sets) >= self.cfg.max_sets:
                return
            target = self._target()
            if target is None:
                return
            self.tries[target.key] += 1
            search_seed = self.seed * 1000 + attempt
            if self._try_packed(target):
                continue
            if target.kind == "if":
                self._try_if(target, search_seed)
            elif target.kind == "trips":
                self._try_trips(target, search_seed)
            else:
                self._try_fresh(search_seed)

    # ---- what to aim at next
    def _target(self) -> _Target | None:
        """The next target, least tried first within the first class that has one (see the
        module doc), or None when nothing is left to try."""
        open_ = self._steered_targets()
        if open_:
            return min(open_, key=lambda t: self.tries[t.key])
        fresh = _Target("fresh", None, None, ("fresh",))
        if self._unsteered() and self.tries[fresh.key] < self.cfg.tries:
            return fresh
        return None

    def _steered_targets(self) -> list[_Target]:
        """The open targets of classes 1 and 1' (see the module doc), each tried fewer than
        `CoverConfig.tries` times."""
        cov = self.total
        loops = [s for s in cov.loop_sites if cov.steers_trips(s) and s in self.obs]
        first = [_Target("if", s, k, ("if", s, k)) for s, k in cov.missing_branches()
                 if s in self.obs and self.obs[s].other]
        for s in loops:
            seen = cov.trips.get(s, set())
            if not cov.body_ran(s, 0) and (s, 0) in self.holders:
                # one trip: the body's first trip is what set 0's explore mode made valid
                want = 1 + self.tries["enable", s]
                first.append(_Target("trips", s, want, ("enable", s)))
            elif len(seen) < 2:
                want = next(t for t in (0, 1, self._unseen(s)) if t not in seen)
                first.append(_Target("trips", s, want, ("second", s)))
        return [t for t in first if self.tries[t.key] < self.cfg.tries]

    def _needed(self) -> int:
        """About how many more sets the missing coverage needs, one each: every missing branch
        (an if not reached yet counts two), every loop with one trip count."""
        cov = self.total
        return len(cov.missing_branches()) + sum(
            1 for s in cov.loop_sites if cov.steers_trips(s) and len(cov.trips.get(s, ())) < 2)

    def _unsteered(self) -> bool:
        """Whether some branch is missing that no steered target reaches (worth fresh random
        inputs)."""
        return any(not (s in self.obs and self.obs[s].other)
                   for s, _ in self.total.missing_branches())

    def _unseen(self, site: str) -> int:
        seen = self.total.trips.get(site, set())
        return self.rng.choice([t for t in range(MAX_TRIPS + 1) if t not in seen])

    # ---- candidates
    def _try_packed(self, target: _Target) -> bool:
        """On a target's first try, when more sets are needed than are left: steer it, then
        each other untried target steered in the same set (its base) by its own input, one by
        one, keeping each that leaves the set valid. Kept (True) when that packed more than the
        target and adds coverage; otherwise nothing is recorded and the target is tried alone."""
        if target.kind == "fresh" or self.tries[target.key] != 1:
            return False
        if self._needed() <= self.cfg.max_sets - len(self.sets):
            return False
        base = min(self.obs[target.at].other)
        untried = [t for t in self._steered_targets()
                   if t != target and not self.tries[t.key] and min(self.obs[t.at].other) == base]
        if not untried:
            return False
        cand = self._steer(self.sets[base], target, base)
        seen: dict[str, Observation] = {}
        cov, env, _ = trace_run(self.g, cand, len(self.sets), seen)
        if env is None:
            return False
        pack, inputs = [target], {self.obs[target.at].input}
        for t in untried:
            ob = self.obs[t.at]
            if ob.input in inputs or any(Site.parse(t.at).within(Site.parse(p.at))
                                                      or Site.parse(p.at).within(Site.parse(t.at))
                                         for p in pack):
                continue
            more = self._steer(cand, t, base)
            more_seen: dict[str, Observation] = {}
            more_cov, more_env, _ = trace_run(self.g, more, len(self.sets), more_seen)
            if more_env is not None:
                cand, cov, seen, env = more, more_cov, more_seen, more_env
                pack.append(t)
                inputs.add(ob.input)
        if len(pack) < 2 or not self.total.gain(cov):
            return False
        self._keep(cand, cov, seen, env)
        for t in pack[1:]:
            self.tries[t.key] += 1
        for t in pack:
            got = (t.want in cov.branches.get(t.at, ()) if t.kind == "if"
                   else t.want in cov.trips.get(t.at, ()))
            self.total.attempts.append(Attempt(t.kind, t.site, t.want, KEPT if got else NO_GAIN))
        return True

    def _steer(self, values: dict[str, np.ndarray], target: _Target,
               base: int) -> dict[str, np.ndarray]:
        """`values` with the target's input set: an if's threshold past the other side's values
        in set `base`, a loop's trip count."""
        ob = self.obs[target.at]
        if target.kind == "if":
            return _flip(values, ob.input, ob.other[base], ob.sign, target.wanted)
        cand = dict(values)
        cand[ob.input] = np.asarray(target.want, dtype=np.asarray(cand[ob.input]).dtype)
        return cand

    def _try_if(self, target: _Target, search_seed: int) -> None:
        """First try: flip the site's threshold in the first set where it ran. Later tries:
        fresh inputs, threshold included. Either way, repair the set if it is invalid or
        misses the branch, holding the site on the wanted branch."""
        ob = self.obs[target.at]
        hold = _Hold(target.at, ob, target.wanted)
        if self.tries[target.key] == 1:
            base = min(ob.other)
            cand = self._steer(self.sets[base], target, base)
            self._repair_and_consider(target, cand, search_seed, frozenset([ob.input]), hold)
        else:  # the search moves the threshold too
            self._repair_and_consider(target, self._fresh_inputs(search_seed), search_seed,
                                      frozenset(), hold, RESTART)

    def _try_trips(self, target: _Target, search_seed: int) -> None:
        """Set the trip count in a set where the loop ran; repair the rest if invalid."""
        ob = self.obs[target.at]
        base = min(ob.other)
        cand = self._steer(self.sets[base], target, base)
        self._repair_and_consider(target, cand, search_seed, frozenset([ob.input]))

    def _try_fresh(self, search_seed: int) -> None:
        target = _Target("fresh", None, None, ("fresh",))
        res = search_inputs(self.g, search_seed, start=self._fresh_inputs(search_seed),
                            frozen=self.params, explore=True, cfg=REPAIR)
        if not res.ok:
            self.total.attempts.append(Attempt("fresh", None, None, NO_CANDIDATE, res.violation,
                                               res.path))
            return
        self._repair_and_consider(target, res.values, search_seed, frozenset())

    def _fresh_inputs(self, search_seed: int) -> dict[str, np.ndarray]:
        """Set 0 with every graph input drawn anew (params kept)."""
        fresh = dict(self.sets[0])
        nprng = np.random.default_rng(search_seed)
        r = ValueRanges()
        for v in self.g.inputs:
            fresh[v.name] = sample_value(v, nprng, r.input_scale, r.int_range)
        return fresh

    def _repair_and_consider(self, target: _Target, cand: dict[str, np.ndarray],
                             search_seed: int, steered: frozenset[str],
                             hold: _Hold | None = None, effort: SearchConfig = REPAIR) -> None:
        """Run `cand`; if it is invalid, or misses `hold`'s branch, search the other inputs
        (params and the `steered` ones frozen) towards a valid set meeting `hold`; keep the
        result if it is valid and adds coverage. The attempt is recorded."""
        seen: dict[str, Observation] = {}
        cov, env, violation = trace_run(self.g, cand, len(self.sets), seen)
        if env is None or (hold is not None and target.want not in cov.branches.get(target.at, ())):
            res = search_inputs(self.g, search_seed, start=cand, cfg=effort,
                                goal=hold.goal if hold else None,
                                trace=hold.new_trace if hold else None,
                                frozen=self.params | steered)
            if res.ok:
                cand = res.values
                seen = {}
                cov, env, violation = trace_run(self.g, cand, len(self.sets), seen)
        if env is None:
            outcome = INVALID
        elif not self.total.gain(cov):
            outcome = NO_GAIN
        else:
            outcome = KEPT
            self._keep(cand, cov, seen, env)
        self.total.attempts.append(Attempt(
            target.kind, target.site, target.want, outcome,
            violation.message if violation else None, violation.path if violation else ()))


    def _keep(self, cand: dict[str, np.ndarray], cov: Coverage,
              seen: dict[str, Observation], env: dict[str, torch.Tensor]) -> None:
        """Add a valid set that adds coverage, with what its traced run observed and computed."""
        self.total.merge(cov)
        self.outputs.append(_outputs(self.g, env))
        for s, ob in seen.items():
            mine = self.obs.setdefault(s, Observation(ob.input, ob.sign, {}, ob.threshold_name,
                                                      ob.other_name, ob.anchor))
            mine.other.update(ob.other)
        self.sets.append(cand)


class Covered(NamedTuple):
    """What `cover` found for a test."""

    #: input sets 1.., graph inputs only (params are set 0's)
    extra: list[dict[str, np.ndarray]]
    #: the coverage of all sets together
    coverage: Coverage
    #: the graph outputs of every set (set 0 first, each set's in graph order, one flat list:
    #: `campaign.reference.run_reference`'s layout) as the traced runs computed them: torch
    #: eager through `evaluate_checked`, every value checked, which is the reference's own
    #: evaluation, so the reference takes them instead of running the sets again. None when
    #: set 0 turned out invalid.
    outputs: list[np.ndarray] | None


def _outputs(g: Graph, env: dict[str, torch.Tensor]) -> list[np.ndarray]:
    return [env[o].numpy() for o in g.outputs]


def cover(g: Graph, values: dict[str, np.ndarray], seed: int,
          cfg: CoverConfig = CoverConfig()) -> Covered:
    """Extra input sets for `g` (graph inputs only) beyond `values` (set 0, valid), the
    coverage of all sets together and their outputs. See the module doc for how candidates
    are made."""
    observations: dict[str, Observation] = {}
    total, env, _ = trace_run(g, values, 0, observations)
    if env is None:
        return Covered([], total, None)
    if not total.ops:
        return Covered([], total, _outputs(g, env))
    state = _Cover(g, values, seed, cfg, total, observations)
    state.outputs.append(_outputs(g, env))
    state.run()
    total.steerable = set(observations)
    inputs = [v.name for v in g.inputs]
    return Covered([{k: s[k] for k in inputs} for s in state.sets[1:]], total,
                   [t for out in state.outputs for t in out])


def _flip(base: dict[str, np.ndarray], threshold: str, xs: list[float], sign: int,
          want: int) -> dict[str, np.ndarray]:
    """`base` with the threshold input moved past every value `xs` the other side took there,
    so that every run of the site takes branch `want` (0: then)."""
    cand = dict(base)
    dtype = np.asarray(cand[threshold]).dtype
    up = (sign > 0) == (want == 0)  # the threshold must exceed every x (else stay below all)
    x = max(xs) if up else min(xs)
    t = x + _gap(x, dtype.kind == "f") * (1 if up else -1)
    cand[threshold] = np.asarray(t, dtype=dtype)
    return cand
