"""The form of a test's torch program: how the same GraphIR is written as torch code, beside
its control-flow dialect (`hop` | `python`, `ir.ops.control`). Each form computes the same
values; each reaches other compiler code (Dynamo's handling of Python numbers and SymInts,
of `nn.Parameter`s, of mutation and its functionalization).

`TorchForm` fields (the first value of each is the default, the program as it was before
forms existed):
  - `scalars`: `tensor` (every value is a tensor; the loop counter a 0-d int64 tensor) or
    `number`: the loop counter is a Python int (`python` dialect: `for i in range(...)`; `hop`:
    an int carried by `torch.while_loop`, a SymInt when traced), 0-d params are Python numbers
    (module attributes, not tensors), and such a number reaches an op as a Python scalar where
    the op's torch function takes one (`Op.number_operand`: the second operand of most binary
    ops), else as a 0-d tensor of its GraphIR dtype (`torch.scalar_tensor`). A value
    computed by an op is always a tensor;
  - `params`: `buffer` (`register_buffer`) or `parameter` (`nn.Parameter`, requires_grad=False);
  - `inplace`: `written` (in-place ops and views as the graph writes them, `TorchPlan`) or
    `functional`: the graph's writes rewritten to pure ops first
    (`ir.analysis.inplace.pure_form`, what the ONNX model is built from); a graph without
    writes is the same program either way.

Invariants: the default form is the torch program of before; `label` and `parse_label` are
inverse (`hop`, `hop+params=parameter`, `python+inplace=functional+scalars=number`: the
row's `dialect` column); every form of a valid graph computes the reference's outputs in
torch eager (checked by tests/ir/materialize/test_form.py and bench/dialects.py).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

#: each field's values, default first
FORM_VALUES: dict[str, tuple[str, ...]] = {
    "scalars": ("tensor", "number"),
    "params": ("buffer", "parameter"),
    "inplace": ("written", "functional"),
}


@dataclass(frozen=True)
class TorchForm:
    """How a graph is written as a torch program (module doc); every field holds one of
    `FORM_VALUES`' values (checked at construction)."""

    scalars: str = "tensor"
    params: str = "buffer"
    inplace: str = "written"

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if v not in FORM_VALUES[f.name]:
                raise ValueError(f"torch form: {f.name} must be one of "
                                 f"{', '.join(FORM_VALUES[f.name])}, got {v!r}")

    @property
    def numbers(self) -> bool:
        """Scalars as Python numbers / SymInts."""
        return self.scalars == "number"

    def changes(self) -> dict[str, str]:
        """The fields that differ from the default, by name (sorted)."""
        return {f.name: getattr(self, f.name) for f in sorted(fields(self), key=lambda f: f.name)
                if getattr(self, f.name) != FORM_VALUES[f.name][0]}

    def label(self, dialect: str) -> str:
        """The row's `dialect`: the control-flow dialect, then each changed field
        (`hop+params=parameter+scalars=number`); the dialect alone for the default form."""
        return "+".join([dialect, *(f"{k}={v}" for k, v in self.changes().items())])


DEFAULT_FORM = TorchForm()


def parse_label(label: str) -> tuple[str, TorchForm]:
    """The dialect and the form of a `TorchForm.label`. Raises ValueError for a label that is
    not one."""
    dialect, *parts = label.split("+")
    given: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in FORM_VALUES or key in given:
            raise ValueError(f"torch form label {label!r}: bad part {part!r}")
        given[key] = value
    return dialect, TorchForm(**given)
