"""Compiler configurations as a fuzzing dimension: each backend declares a configuration space
(`Backend.CONFIG_SPACE`, a tuple of `Option`s: constructor options of the backend, each with
the values worth trying and why), and a test draws a configuration from it by its seed.

A **configuration** is a dict of backend options that differ from the backend's own (the spec's
options, e.g. `inductor?dialect=mixed`, and the constructor's defaults). Its text form
(`config_text`) is `key=value` pairs joined by `&`, sorted by key, values written as backend
specs write them (`true`, `none`, `256`): so `with_config(spec, text)` is a backend spec again
(`inductor?dialect=mixed&cpp_wrapper=true&simdlen=0`), which is how the triage, the reducer and
repro.py rebuild the very compiler a row ran. The empty text is the backend's own configuration.

Drawing (`draw`), deterministic in the test seed and the backend's spec:
  - with probability 1 - `sample` the test gets the backend's own configuration;
  - else each option not fixed by the spec is changed with probability 1/3 (at least one is),
    to a value other than its default, uniformly.
Options the spec writes are never drawn: `inductor?cpp_wrapper=true` keeps its wrapper (a
registered name's own defaults are drawn: `ort` tries every optimization level).

Invariants: a drawn configuration never holds a default value or an option of the spec; its
text parses back to it (`parse_config`); the same (spec, seed, sample) draws the same one.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ir.core.graph import Graph

#: probability that a drawn configuration changes each option (at least one is changed)
P_OPTION = 1 / 3


@dataclass(frozen=True)
class Option:
    """One option of a backend's configuration space: a constructor option `name` of the
    backend, the `values` worth trying (its default among them, first), and `why`: the
    compiler code it reaches (docs/configs.md lists them)."""

    name: str
    values: tuple[Any, ...]
    why: str
    #: whether this machine can run the option's non-default values (e.g. an llvm -mcpu the
    #: CPU has); None: always. Checked when drawing.
    available: Callable[[], bool] | None = None
    #: whether the option's non-default values can take this test's graph (e.g. the TorchScript
    #: exporter: no control flow); None: every graph. Checked when drawing with a graph.
    applies: Callable[[Graph], bool] | None = None

    @property
    def default(self) -> Any:
        return self.values[0]

    def others(self) -> tuple[Any, ...]:
        return self.values[1:]


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """`"tvm?opt_level=0&pipeline=default"` -> `("tvm", {"opt_level": 0, "pipeline": "default"})`
    (values: int, float, true/false, none, else the string)."""
    base, _, query = spec.partition("?")
    options: dict[str, Any] = {}
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        if not eq or not key.isidentifier():
            raise ValueError(f"backend {spec!r}: bad option {part!r} (expected key=value)")
        options[key] = _parse_value(value)
    if not base:
        raise ValueError(f"backend {spec!r}: empty name")
    return base, options


def value_text(v: Any) -> str:
    """A value as a backend spec writes it (`parse_spec` reads it back)."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def config_text(config: Mapping[str, Any]) -> str:
    """The canonical text of a configuration: `key=value&...`, sorted by key; '' when empty."""
    return "&".join(f"{k}={value_text(config[k])}" for k in sorted(config))


def parse_config(text: str) -> dict[str, Any]:
    """The configuration of a `config_text` (the spec's option syntax)."""
    return parse_spec(f"config?{text}")[1] if text else {}


def with_config(spec: str, text: str | None) -> str:
    """The backend spec of `spec` run with configuration `text` (its options override the
    spec's of the same name)."""
    if not text:
        return spec
    base, options = parse_spec(spec)
    options.update(parse_config(text))
    return f"{base}?{config_text(options)}" if options else base


def draw(space: Sequence[Option], fixed: Collection[str], spec: str, seed: int,
         sample: float, graph: Graph | None = None) -> dict[str, Any]:
    """The configuration a test of `seed` gets (module doc). `fixed`: the options the spec
    sets (never drawn); `graph`: the test's, when known (options that do not apply to it are
    not drawn; without it, all are)."""
    if sample <= 0 or not space:
        return {}
    rng = random.Random(f"config/{spec}/{seed}")
    if rng.random() >= sample:
        return {}
    free = [o for o in space if o.name not in fixed and o.others()
            and (o.available is None or o.available())
            and (graph is None or o.applies is None or o.applies(graph))]
    if not free:
        return {}
    picked = [o for o in free if rng.random() < P_OPTION] or [rng.choice(free)]
    return {o.name: rng.choice(o.others()) for o in picked}


def check_space(space: Sequence[Option], params: Sequence[str], backend: str) -> None:
    """Raise ValueError unless every option of `space` is a constructor option (`params`) of
    the backend, named once, with distinct values."""
    names = [o.name for o in space]
    for o in space:
        if o.name not in params:
            raise ValueError(f"{backend}: config option {o.name!r} is not a constructor option")
        if len(set(map(value_text, o.values))) != len(o.values):
            raise ValueError(f"{backend}: config option {o.name!r} repeats a value")
        if names.count(o.name) > 1:
            raise ValueError(f"{backend}: config option {o.name!r} declared twice")
