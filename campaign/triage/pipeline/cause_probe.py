"""The cause probe: a new bucket is a note's bug when taking the construct the note's bug needs
(its `cause:`, `campaign.triage.pages.note_cause`) out of the bucket's test makes it pass.

For a new bucket whose failure a note's cause covers (its compiler and verdict), `probe` runs
three experiments on the bucket's representative test (the reduced one, else the finding's):

1. the control: the test as it is, on the failing compiler and configuration: it must fail the
   same way (`same_failure`);
2. the probe: the test with the note's construct taken out (`ir.shrink.take_out`: each
   instruction of the op that ran as the named inlining on every input set, replaced by it;
   the same outputs on those inputs, every input, leaf and output kept): it must pass;
3. the note's own triggers, re-run next to it on this build (`note_runs.run_trigger_case`):
   one must still fail as it says (a bug fixed on this build explains nothing).

All three hold: the failure needs that construct, and the note's bug, which needs it too, is
live here; the bucket is named by the note. A probe that cannot run (no such construct in the
test, a rewrite that would change the outputs, a run that fails otherwise) names nothing: the
bucket stays new. The probe works on unreduced tests too, where no core (`grouping.core`) can
be compared: F38's zero-trip loop hides in a 19-instruction gradient test the reducer could not
shrink in its budget, and its bodies' ops are not the triggers'.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from campaign.triage.pipeline.note_known import NoteProbe
from campaign.triage.pipeline.reduction import BackendRunner, same_failure


@dataclass(frozen=True)
class CauseMatch:
    """A bucket named by a note's cause: the note and why (one line for the log and table)."""

    finding: str
    why: str


@dataclass(frozen=True)
class Specs:
    """What makes the representative's test more than a graph and inputs: its gradient,
    transform, dynamic-shape and cache specs (None: not such a test)."""

    grad: Any = None
    transform: Any = None
    dynshape: Any = None
    cache: Any = None

    @classmethod
    def of(cls, red: Any) -> Specs:
        """Its last run's test case's, or (a reduction an earlier triage cached, no run here)
        its bug folder's, else its finding's."""
        holder = (red.tc if red.tc is not None else
                  red.folder_case if getattr(red, "folder_case", None) is not None else red.case)
        return cls(*(getattr(holder, n, None)
                     for n in ("grad", "transform", "dynshape", "cache")))


def _params(red: Any) -> dict:
    return {p.name: red.values[p.name] for p in red.graph.params if p.name in red.values}


def input_sets(red: Any, specs: Specs) -> list[tuple[Any, dict]]:
    """The representative's input sets as (program in that set's shapes, full values): set 0
    is the reduction's values on its graph; a later set holds graph inputs, params shared."""
    graph, values, params, dyn = red.graph, dict(red.values), _params(red), specs.dynshape
    sets: list[tuple[Any, dict]] = [(graph, values)]
    for k, extra in enumerate(red.extra_sets, 1):
        gk = graph
        if dyn is not None:
            from ir.materialize.dynshape import instantiate

            gk = instantiate(graph, dyn, dyn.assignment_of_set(k))
        sets.append((gk, {**params, **extra}))
    return sets


def _run(runner: BackendRunner, red: Any, specs: Specs, test_id: str, graph: Any, values: dict,
         extra: list[dict]) -> dict[str, Any]:
    """One run of `graph` as the representative's test: its leaves all kept (a leaf the
    rewrite left no output depending on is still differentiated: gradient zero), else the
    row says `invalid` (an experiment that checks less than the control is no experiment)."""
    grad = specs.grad
    row, _, ran = runner.run(test_id, red.case.seed, graph, values, extra,
                             config=red.backend_config, grad=grad, transform=specs.transform,
                             drawn_for=red.graph, dynshape=specs.dynshape, keep_leaves=True,
                             cache=specs.cache)
    kept = getattr(getattr(ran, "grad", None), "leaves", None)
    if grad is not None and row.get("verdict") != "invalid" and tuple(kept or ()) != tuple(grad.leaves):
        return {"verdict": "invalid", "error_sig": f"leaves {list(kept or ())} of "
                                                   f"{list(grad.leaves)} kept"}
    return row


def stages(spec: str) -> list[str]:
    """Where a probe runs: the failing backend spec, then the stage before its code generator
    (`Backend.stage_spec("aot_eager")`: Dynamo and AOT autograd alone) when it has one. A
    rewritten test the code generator rejects otherwise says nothing there; a cause in the
    front end shows at its stage too."""
    from campaign.backends import make_backend

    stage = make_backend(spec).stage_spec("aot_eager")
    return [spec] + ([stage] if stage is not None and stage != spec else [])


def probe(red: Any, spec: str, verdict: str, notes: list[NoteProbe],
          runner_for: Callable[[str], BackendRunner],
          live: Callable[[NoteProbe], str | None]) -> CauseMatch | None:
    """The note whose cause explains the representative `red` of a new bucket of backend
    `spec` with `verdict` (module doc), or None. Each experiment runs at the first of
    `stages(spec)` where the control fails the same way and the probe does not fail otherwise.
    `runner_for(spec)` gives the triage's runner of a spec; `live(note)` the trigger of the
    note that still fails as it says (None: none)."""
    covering = [n for n in notes if n.cause.covers(spec, verdict)]
    if not covering or red.graph is None:
        return None
    specs = Specs.of(red)
    found, control = _probe(red, specs, spec, covering, runner_for, live)
    k = (red.row or {}).get("mismatch_input_set", control.get("mismatch_input_set"))
    if found is None and red.extra_sets and specs.dynshape is None \
            and isinstance(k, int) and 0 < k <= len(red.extra_sets):
        # the input sets ran the construct differently (a loop of zero trips in the set that
        # fails, one in the others): the failing set alone, as the reducer tries it
        grad = specs.grad
        if grad is not None and len(grad.cotangents) > k:
            specs = replace(specs, grad=replace(grad, cotangents=(grad.cotangents[k],)))
        alone = replace(red, values={**_params(red), **red.extra_sets[k - 1]}, extra_sets=[])
        found, _ = _probe(alone, specs, spec, covering, runner_for, live)
    return found


def _probe(red: Any, specs: Specs, spec: str, covering: list[NoteProbe],
           runner_for: Callable[[str], BackendRunner], live: Callable[[NoteProbe], str | None]
           ) -> tuple[CauseMatch | None, dict[str, Any]]:
    """`probe` on the representative's input sets as they are: the match, and the control's
    row on the failing backend ({} when none ran)."""
    from ir.shrink.take_out import take_out

    sets = input_sets(red, specs)
    expect = {**red.case.info, **{k: (red.row or {}).get(k) or red.case.info.get(k)
                                  for k in ("verdict", "stage", "error_sig")}}
    controls: dict[str, dict[str, Any]] = {}
    for note in covering:
        taken = take_out(red.graph, sets, note.cause.op, note.cause.inlining)
        if taken is None or (taken.added and specs.dynshape is not None):
            continue
        for at in stages(spec):
            runner = runner_for(at)
            if at not in controls:
                controls[at] = _run(runner, red, specs, f"{red.case.test_id}-probe-control",
                                    red.graph, dict(red.values), list(red.extra_sets))
            if not same_failure(expect, controls[at]):
                continue
            row = _run(runner, red, specs, f"{red.case.test_id}-probe-{note.finding[:3]}",
                       taken.graph, {**red.values, **taken.added},
                       [{**e, **taken.added} for e in red.extra_sets])
            if same_failure(expect, row):
                break  # the failure does not need the construct: not this note's cause
            if row.get("verdict") != "pass":
                continue  # the rewrite fails otherwise here: ask the stage before
            trigger = live(note)
            if trigger is None:
                break
            where = "" if at == spec else f" on {at}, the stage before the code generator,"
            return CauseMatch(note.finding, (
                f"cause probe: it passes{where} with its {note.cause.op} at "
                f"{', '.join(taken.sites)} replaced by '{note.cause.inlining}' (how its inputs "
                f"ran them) and fails as it was; {note.finding}'s trigger {trigger} still "
                f"fails here")), controls.get(spec, {})
    return None, controls.get(spec, {})


def trigger_live(note: NoteProbe, runner_for: Callable[[str], BackendRunner]) -> str | None:
    """The first of the note's triggers that still fails as it says on this build (its graph
    file name), or None."""
    from campaign.triage.pipeline.note_runs import TriggerRunError, run_trigger_case

    for t in note.triggers:
        if t.verdict != note.cause.verdict:
            continue
        try:
            run = run_trigger_case(t, note.notes_dir, runner_for(t.backend),
                                   f"note-{Path(t.graph).stem}")
        except (TriggerRunError, OSError, ValueError):
            continue
        if run.row.get("verdict") == t.verdict:
            return Path(t.graph).name
    return None
