"""Running a finding note's trigger graphs on their compilers, to write or check the
triggers' failure fields (`python -m campaign.triage findings-triggers`):

    python -m campaign.triage findings-triggers [F21 ...] [--check] [--notes docs/findings]
    python -m campaign.triage findings-triggers F21 --add graphs/F21-x.gir --backend tvm [--config ...]

Each graph runs as the triage re-runs a finding (`BackendRunner`: `FuzzWorker.run_case` with
the one backend, in its sandbox, reference and oracle included), on the trigger's inputs
(`inputs`, an .npz under the notes dir: one set, or `s<k>/<name>` for several) or on inputs
searched from seed 0 (`ir.numerics.input_search.search_inputs`). The row gives the verdict, stage, target and the
normalized signature (`bucket_signature`). A trigger with `grad` runs as a gradient test
(`trigger_grad`): the backend trains, and a leaf the run lets go is an error, not a trigger.
A trigger with `dynshape` runs as a dynamic-shape test: one model, an input set per shape.
Without `--check` the note's `triggers:` block is rewritten with what the runs gave (every
other line of the note kept as written); with it, nothing is written and the exit status is 1
when a trigger's fields differ from its run. A run that gives a trigger's fields up to what
varies between releases (`as_noted`: the check's exception class, `campaign.signature.
release_neutral`) matches, and the trigger is kept as written: a note does not flip between the
forms of torch 2.13 and 2.14.1 with whichever ran it last, and the triage knows both
(`note_known.NoteForms.by_key`). A graph that no longer fails (it passes: fixed?)
is never written as a trigger: the note keeps what it had, and the exit status is 1.
Notes without triggers are left alone; ids are prefixes (`F21` names F21-...).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from campaign.triage.pages.note_triggers import VERDICTS, NoteTrigger
from campaign.triage.pipeline.buckets import bucket_signature

#: seconds per run (an exporter or Inductor compile under load takes tens of seconds)
TIMEOUT_S = 120.0


def trigger_sets(t: NoteTrigger, notes_dir: Path, graph: Any,
                 dyn: Any = None) -> list[dict[str, np.ndarray]]:
    """The trigger's input sets: its .npz (arrays by input name for one set; `s<k>/<name>` for
    several, as a test that runs set k on one compiled model: the campaign's stage `run` is a
    later set's), else one set searched from seed 0 (valid on the reference); a dynamic-shape
    trigger's (`dyn`) are searched per input set's shapes (`shape_sets`)."""
    if t.inputs is not None:
        with np.load(t.resolve(notes_dir, "inputs"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        if not any("/" in k for k in arrays):
            return [arrays]
        sets: dict[int, dict[str, np.ndarray]] = {}
        for k, a in arrays.items():
            head, _, name = k.partition("/")
            sets.setdefault(int(head.removeprefix("s")), {})[name] = a
        return [sets[k] for k in sorted(sets)]
    if dyn is not None:
        return shape_sets(graph, dyn)
    from ir.numerics.input_search import search_inputs

    return [search_inputs(graph, 0).values]


def shape_sets(graph: Any, dyn: Any, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Inputs for each input set of a dynamic-shape test (`dyn.set_assignment`), searched from
    `seed` on the graph of its shapes (`instantiate`), the params of set 0 shared by all;
    set 0 holds inputs and params, later sets graph inputs. ValueError when a set's search
    finds no valid inputs."""
    from campaign.dynamic_shapes import shape_inputs
    from ir.materialize.dynshape import instantiate

    sets: list[dict[str, np.ndarray]] = []
    params: dict[str, np.ndarray] = {}
    for k in range(len(dyn.set_assignment)):
        gk = instantiate(graph, dyn, dyn.assignment_of_set(k))
        found = shape_inputs(gk, params, seed, k)
        if found is None:
            raise ValueError(f"no valid inputs for input set {k} ({dyn.shape_labels()[k]})")
        if k == 0:
            params = {p.name: found[p.name] for p in gk.params}
            sets.append(dict(found))
        else:
            sets.append({v.name: found[v.name] for v in gk.inputs})
    return sets


def trigger_grad(t: NoteTrigger) -> Any:
    """The gradient test's spec of trigger `t` (None for an inference test): its leaves, and
    no cotangents, so the runner draws them from seed 0 (`refit_grad`)."""
    if not t.leaves:
        return None
    from ir.materialize.grad import GradSpec

    return GradSpec(t.leaves, ())


class TriggerRunError(Exception):
    """A trigger's graph cannot run as the trigger says (a leaf the gradient test let go)."""


@dataclass(frozen=True)
class TriggerRun:
    """One run of a trigger's graph: the graph, its input sets, and what `BackendRunner.run`
    gave (the row, the finding or None, the test case)."""

    graph: Any
    sets: list[dict[str, np.ndarray]]
    row: dict[str, Any]
    finding: Any
    case: Any


def run_trigger_case(t: NoteTrigger, notes_dir: Path, runner: Any, test_id: str) -> TriggerRun:
    """Trigger `t`'s graph run on `runner` (a `BackendRunner` of its backend) on its input
    sets, as a gradient test when it has leaves; `TriggerRunError` when the run lets one go."""
    from ir.core.text import load

    g = load(t.resolve(notes_dir, "graph"))
    dyn = t.shapes(notes_dir)
    sets = trigger_sets(t, notes_dir, g, dyn)
    transform = t.transform_spec(notes_dir)
    row, finding, tc = runner.run(test_id, 0, g, sets[0], sets[1:], config=t.config,
                                  grad=trigger_grad(t), dynshape=dyn, transform=transform)
    kept = tc.grad.leaves if tc.grad is not None else ()
    if t.leaves and tuple(kept) != t.leaves:
        raise TriggerRunError(f"{t.graph}: the gradient test keeps leaves {list(kept)}, not "
                              f"{list(t.leaves)} (autograd's rules let the others go)")
    return TriggerRun(g, sets, row, finding, tc)


def run_trigger(t: NoteTrigger, notes_dir: Path, runners: dict[str, Any] | None = None,
                timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The result row of trigger `t`'s graph on its backend and configuration. `runners`: a
    cache of `BackendRunner`s by backend spec (the caller closes them)."""
    from campaign.triage.pipeline.reduction import BackendRunner

    runners = {} if runners is None else runners
    if t.backend not in runners:
        runners[t.backend] = BackendRunner(t.backend, timeout_s=timeout_s)
    return run_trigger_case(t, notes_dir, runners[t.backend],
                            f"note-{Path(t.graph).stem}").row


def trigger_folder(trigger: NoteTrigger, notes_dir: Path, dest: Path) -> tuple[Path | None, str]:
    """The bug folder the triage writes for a finding of trigger `trigger` (its graph run on
    its backend, as `run_trigger` runs it; `write_bug_folder`: repro.py and its data) at
    `dest`, or (None, why): the run did not fail as the trigger says, or the backend has no
    repro."""
    from campaign.backends.configs import with_config
    from campaign.triage.pipeline.reduction import BackendRunner, FindingCase, Reduction
    from campaign.triage.pipeline.repro import write_bug_folder

    runner = BackendRunner(trigger.backend, timeout_s=180)
    try:
        run = run_trigger_case(trigger, notes_dir, runner, f"note-{dest.name}")
    finally:
        runner.close()
    row, tc, values = run.row, run.case, run.sets[0]
    if row.get("verdict") != trigger.verdict:
        return None, f"it gave {row.get('verdict')} ({row.get('error_sig')}), not {trigger.verdict}"
    info = {"backend": trigger.backend, "verdict": trigger.verdict,
            "backend_config": trigger.config, **{k: row.get(k) for k in (
                "stage", "error_class", "error_sig")}}
    case = FindingCase(dest, info, run.graph, values, list(tc.extra_inputs), grad=tc.grad,
                       dynshape=tc.dynshape)
    files = dict(getattr(run.finding, "files", {}) or {})
    red = Reduction(case, "confirmed", run.graph, values, list(tc.extra_inputs), row, files, tc)
    key = {"verdict": trigger.verdict, "stage": row.get("stage"),
           "error_sig": row.get("error_sig")}
    written = write_bug_folder(dest, with_config(trigger.backend, trigger.config),
                               f"{dest.name}-{trigger.verdict}", key, red, 0)
    if not written.get("repro"):
        return None, f"no repro.py: {written.get('codegen_error') or 'this backend has none'}"
    return dest, ""


def observed(t: NoteTrigger, row: dict[str, Any]) -> NoteTrigger:
    """Trigger `t` with its failure fields as the run `row` gave them."""
    verdict = str(row.get("verdict"))
    crash = verdict != "mismatch"
    return replace(t, verdict=verdict, target=row.get("target") or t.target,
                   stage=row.get("stage") if crash else None,
                   error_sig=bucket_signature(verdict, row.get("error_sig")) if crash else None)


def as_noted(t: NoteTrigger, got: NoteTrigger) -> bool:
    """Whether `got` (`observed` of a run of trigger `t`) is `t` up to what varies between
    releases: every field equal, the signatures equal as `release_neutral` writes them."""
    from campaign.signature import release_neutral

    if got == t:
        return True
    return (got.crash_like and t.crash_like
            and release_neutral(got.error_sig) == release_neutral(t.error_sig)
            and replace(got, error_sig=t.error_sig) == t)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m campaign.triage findings-triggers",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ids", nargs="*", help="notes (id or id prefix; default: every note with "
                                          "triggers)")
    p.add_argument("--notes", type=Path, default=None,
                   help="the notes dir (default: docs/findings of the repository)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when a trigger differs from its run")
    p.add_argument("--add", default=None,
                   help="a graph (relative to the notes dir) to add as a trigger of the one note")
    p.add_argument("--backend", default=None, help="with --add: the backend spec")
    p.add_argument("--config", default="", help="with --add: the configuration ('' none)")
    p.add_argument("--inputs", default=None, help="with --add: an .npz of its inputs")
    p.add_argument("--grad", default=None,
                   help="with --add: a gradient test's leaves, space-separated ('x0 w1')")
    p.add_argument("--dynshape", default=None,
                   help="with --add: a dynamic-shape test's DynShape JSON (relative to the "
                        "notes dir)")
    p.add_argument("--transform", default=None,
                   help="with --add: a transform test's spec JSON, its .npz beside it "
                        "(relative to the notes dir)")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S,
                   help="seconds per run (default %(default)s)")
    return p


def main(argv: list[str]) -> int:
    """The command (module doc); 0 done (or all match), 1 a check failed, 2 an error."""
    from campaign.backends.configs import with_config
    from campaign.triage.pages.notes import NotesError, load_notes, replace_triggers
    from campaign.triage.pipeline.note_known import ROOT

    a = _parser().parse_args(argv)
    notes_dir = a.notes or ROOT / "docs" / "findings"
    try:
        notes = load_notes(notes_dir)
    except NotesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    chosen = [n for n in notes.values()
              if (not a.ids or any(n.bug == i or n.bug.startswith(f"{i}-") for i in a.ids))
              and (n.triggers or a.add)]
    if a.add is not None and (len(chosen) != 1 or not a.backend):
        print("error: --add needs one note and --backend", file=sys.stderr)
        return 2
    runners: dict[str, Any] = {}
    failed = broken = 0  # triggers whose run differs; graphs that no longer fail
    try:
        for note in chosen:
            triggers = list(note.triggers)
            if a.add is not None:
                triggers.append(NoteTrigger(a.add, a.backend, "crash", config=a.config,
                                            inputs=a.inputs, grad=a.grad,
                                            dynshape=a.dynshape, transform=a.transform))
            new = []
            for i, t in enumerate(triggers):
                try:
                    row = run_trigger(t, notes_dir, runners, a.timeout)
                except TriggerRunError as e:
                    print(f"{note.bug}: error: {e}", file=sys.stderr, flush=True)
                    broken += 1
                    if i < len(note.triggers):
                        new.append(t)
                    continue
                got = observed(t, row)
                added = i >= len(note.triggers)
                same = added or as_noted(t, got)
                print(f"{note.bug}: {t.graph} on {with_config(t.backend, t.config)}: "
                      f"{got.verdict} "
                      f"{got.stage or ''} {(got.error_sig or '')[:100]}"
                      f"{'  (added)' if added else '' if same else '  (differs from the note)'}",
                      flush=True)
                if got.verdict not in VERDICTS:  # it no longer fails: the note keeps its own
                    print(f"{note.bug}: {t.graph}: {got.verdict}, not a failure: kept as it "
                          f"was" + (" (not added)" if added else ""), flush=True)
                    broken += 1
                    if not added:
                        new.append(t)
                    continue
                failed += not same
                new.append(got if added or not same else t)  # the note's form kept
            if not a.check and tuple(new) != note.triggers:
                text = note.path.read_text(encoding="utf-8")
                note.path.write_text(replace_triggers(text, tuple(new)), encoding="utf-8")
    finally:
        for r in runners.values():
            r.close()
    return 1 if broken or (a.check and failed) else 0
