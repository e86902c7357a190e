"""A finding note's machine-readable triggers: the `triggers:` field of its front matter
(`campaign.triage.pages.notes`).

Each entry names the note's repro graph in GraphIR and how it fails, so a campaign on a fresh
clone knows the bug (`campaign.triage.pipeline.note_known`):

    triggers:
    - graph: graphs/F21-if_batchnorm_relu.gir   # relative to the notes dir (docs/findings)
      backend: tvm                              # the backend spec, as in the bugs table
      config: ''                                # the options the failure needs ('' none)
      verdict: crash                            # crash, signal, timeout or mismatch
      stage: import                             # crash-like only
      error_sig: "TypeError: ... @ ..."         # crash-like only: the normalized signature
      inputs: graphs/F43-....npz                # optional: the inputs (else searched, seed 0)
      grad: x0 w1                               # optional: a gradient test's leaves
      dynshape: graphs/F17-....json             # optional: a dynamic-shape test's dims
      transform: graphs/F54-....json            # optional: a transform test's spec (+ .npz)
      target: cpu                               # optional (default cpu)

A trigger with `grad` is a gradient test (docs/training.md): it differentiates w.r.t. those
leaves (graph inputs or params, space-separated), with cotangents drawn from seed 0 as the
triage's reducer draws a changed graph's (`ir.numerics.grad.refit_grad`), so a training bug
(a wrong gradient, a backward that crashes) has a trigger like any other.

A trigger with `transform` is a torch.func transform test: the JSON of its
`ir.materialize.transforms.TransformSpec` (which transform, its leaves and outputs; the
finding's `transform.json`) with its arrays beside it (the same name, `.npz`). F54's compiled
jacfwd fails only as one, and only with a norm's weight as the leaf.

A trigger with `dynshape` is a dynamic-shape test (docs/dynshape.md): the JSON of its
`ir.materialize.dynshape.DynShape` (which dims of the graph, input set 0's, are symbolic, and
the shape assignments of its sets); its `inputs` hold a set per assignment, or are searched per
assignment from seed 0, params shared. Only such a trigger can be a `recompile` (a later shape
compiled again: its signature names the torch code whose guard failed).

A crash-like trigger (crash, signal, timeout, recompile) keys on (backend, target, verdict, stage,
error_sig, config), exactly as the campaign buckets a finding; a mismatch trigger on the op
pattern of its graph (no stage or signature: the graph is the pattern). The fields are written
and checked by running the graph (`python -m campaign.triage findings-triggers [--check]`).

Invariants (checked here; a wrong field is a `NotesError`, one line naming the file and the
field, `triggers[<i>].<field>`): every entry is a mapping of known fields; `graph` (and
`inputs`, `dynshape`) name files that exist under the notes dir; `grad` names inputs or
params of the graph, each once; `dynshape` reads as a `DynShape` of the graph's inputs;
`verdict` is one of `VERDICTS`, a `recompile` only with `dynshape`; a
crash-like entry has a non-empty `stage` and `error_sig`, a mismatch entry neither; `config` is
canonical configuration text (`key=value&...`, sorted by key).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

#: verdicts a trigger can name (compiler bugs with a graph; `recompile` needs `dynshape`)
VERDICTS = ("crash", "signal", "timeout", "mismatch", "recompile")
#: the default target (the campaign's CPU backends)
TARGET = "cpu"


@dataclass(frozen=True)
class NoteTrigger:
    """One `triggers:` entry of a note (module doc). Paths are as written (relative to the
    notes dir); `NoteTrigger.resolve` gives the files."""

    graph: str
    backend: str
    verdict: str
    stage: str | None = None
    error_sig: str | None = None
    config: str = ""
    target: str = TARGET
    inputs: str | None = None
    grad: str | None = None
    dynshape: str | None = None
    transform: str | None = None

    @property
    def leaves(self) -> tuple[str, ...]:
        """A gradient test's leaves (`grad`), () for an inference test."""
        return tuple((self.grad or "").split())

    @property
    def crash_like(self) -> bool:
        return self.verdict != "mismatch"

    def resolve(self, notes_dir: Path, name: str) -> Path:
        """The file of field `name` (`graph`, `inputs` or `dynshape`) under `notes_dir`."""
        return Path(notes_dir) / str(getattr(self, name))

    def as_dict(self) -> dict[str, Any]:
        """The entry as the front matter writes it: defaults (`target` cpu, no `inputs`) left
        out, `stage` and `error_sig` only when crash-like."""
        out: dict[str, Any] = {"graph": self.graph, "backend": self.backend,
                               "config": self.config, "verdict": self.verdict}
        if self.crash_like:
            out["stage"] = self.stage
            out["error_sig"] = self.error_sig
        if self.target != TARGET:
            out["target"] = self.target
        if self.inputs is not None:
            out["inputs"] = self.inputs
        if self.grad is not None:
            out["grad"] = self.grad
        if self.dynshape is not None:
            out["dynshape"] = self.dynshape
        if self.transform is not None:
            out["transform"] = self.transform
        return out

    def transform_spec(self, notes_dir: Path) -> Any:
        """A transform trigger's `TransformSpec` (None: no transform test)."""
        if self.transform is None:
            return None
        from ir.materialize.transforms import TransformSpec

        spec = self.resolve(notes_dir, "transform")
        return TransformSpec.from_files(spec.read_bytes(), spec.with_suffix(".npz").read_bytes())

    def shapes(self, notes_dir: Path) -> Any:
        """A dynamic-shape trigger's `DynShape` (None: a static test)."""
        if self.dynshape is None:
            return None
        import json

        from ir.materialize.dynshape import DynShape

        return DynShape.from_json(json.loads(self.resolve(notes_dir, "dynshape").read_text()))


_FIELDS = [f.name for f in fields(NoteTrigger)]
_REQUIRED = ("graph", "backend", "verdict")


class TriggerError(Exception):
    """A wrong entry: `<field>: <what is wrong>` (the caller prefixes the file)."""


def canonical_config(text: str) -> str:
    """`key=value&...` sorted by key (the campaign's `config_text` order)."""
    parts = [p for p in text.split("&") if p]
    return "&".join(sorted(parts, key=lambda p: p.partition("=")[0]))


def parse_triggers(value: Any, notes_dir: Path) -> tuple[NoteTrigger, ...]:
    """The `triggers:` field's entries; TriggerError naming `triggers[<i>].<field>`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TriggerError(f"triggers: expected a list of entries, got {type(value).__name__}")
    return tuple(_entry(i, e, notes_dir) for i, e in enumerate(value))


def check_mapping(value: Any, at: str, known: Sequence[str], expected: str,
                  error: type[Exception]) -> dict:
    """`value`, a front-matter mapping at `at` holding only `known` fields; else `error`
    naming `at` (`expected`: what the message says a mapping holds)."""
    if not isinstance(value, dict):
        raise error(f"{at}: expected a mapping ({expected}), got {type(value).__name__}")
    unknown = sorted(set(value) - set(known), key=str)
    if unknown:
        raise error(f"{at}.{unknown[0]}: unknown field (known: {', '.join(known)})")
    return value


def _entry(i: int, e: Any, notes_dir: Path) -> NoteTrigger:
    at = f"triggers[{i}]"
    check_mapping(e, at, _FIELDS, "graph, backend, verdict, ...", TriggerError)
    for name in _REQUIRED:
        if e.get(name) in (None, ""):
            raise TriggerError(f"{at}.{name}: missing")
    for name, v in e.items():
        if v is not None and not isinstance(v, str):
            raise TriggerError(f"{at}.{name}: expected text, got {type(v).__name__} {v!r}")
    t = NoteTrigger(**{k: v for k, v in e.items() if v is not None})
    for name in ("graph", "inputs", "dynshape", "transform"):
        path = getattr(t, name)
        if path is not None and not (Path(notes_dir) / path).is_file():
            raise TriggerError(f"{at}.{name}: no such file {path!r} under {notes_dir}")
    if t.verdict not in VERDICTS:
        raise TriggerError(f"{at}.verdict: {t.verdict!r} is not one of {', '.join(VERDICTS)}")
    if t.verdict == "recompile" and t.dynshape is None:
        raise TriggerError(f"{at}.verdict: a recompile needs several shapes (`dynshape`)")
    if t.dynshape is not None:
        _check_shapes(at, t, notes_dir)
    if t.crash_like:
        for name in ("stage", "error_sig"):
            if not getattr(t, name):
                raise TriggerError(f"{at}.{name}: missing (a {t.verdict} keys on it)")
    else:
        for name in ("stage", "error_sig"):
            if getattr(t, name) is not None:
                raise TriggerError(f"{at}.{name}: given, but a mismatch keys on its graph's "
                                   f"op pattern")
    if t.grad is not None:
        _check_leaves(at, t, notes_dir)
    if t.transform is not None:
        arrays = Path(notes_dir) / Path(t.transform).with_suffix(".npz")
        if not arrays.is_file():
            raise TriggerError(f"{at}.transform: no arrays {arrays.name!r} beside it")
        if t.grad is not None:
            raise TriggerError(f"{at}.transform: given with grad (a transform test draws "
                               "its own leaves)")
    if t.config != canonical_config(t.config):
        raise TriggerError(f"{at}.config: {t.config!r} is not canonical (write "
                           f"{canonical_config(t.config)!r})")
    return t


def _check_leaves(at: str, t: NoteTrigger, notes_dir: Path) -> None:
    from ir.core.text import load

    if not t.leaves or len(set(t.leaves)) != len(t.leaves):
        raise TriggerError(f"{at}.grad: {t.grad!r} is not distinct leaf names, space-separated")
    try:
        g = load(t.resolve(notes_dir, "graph"))
    except (OSError, ValueError) as e:
        raise TriggerError(f"{at}.graph: {t.graph!r} does not parse: {e}") from None
    names = {v.name for v in (*g.inputs, *g.params)}
    for leaf in t.leaves:
        if leaf not in names:
            raise TriggerError(f"{at}.grad: {leaf!r} is not an input or param of {t.graph}")


def _check_shapes(at: str, t: NoteTrigger, notes_dir: Path) -> None:
    from ir.core.text import load

    try:
        dyn = t.shapes(notes_dir)
        dyn.sources(load(t.resolve(notes_dir, "graph")))
    except Exception as e:  # unreadable JSON, not a DynShape, a symbol of no input dim
        raise TriggerError(f"{at}.dynshape: {t.dynshape!r} is not the dynamic shapes of "
                           f"{t.graph}: {type(e).__name__}: {e}") from None
