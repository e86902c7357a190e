"""ir.materialize.torch_source prints in-place writes that are statements (`setitem`: `x[i] = y`, which returns
nothing), refuses any other effect-only call rather than dropping it, and checks the code it
prints against the interpreter (outputs and written inputs) before a reproducer uses it."""
from __future__ import annotations

import numpy as np
import pytest

import ir
from ir.materialize import torch_source as source_module
from ir.materialize.torch_source import CodegenError, check_source, example_values, torch_source
from ir.ops.inplace import SetItem

#: the reduced graph of bucket aot_eager-mismatch-f2326addbe (a cpu_train campaign): its repro
#: printed `v4 = x0` for the setitem, a program without the write
REDUCED = """graph main(%x0: f32[1], %x4: f32[], %x17: f32[]) {
  %v15 = fill_[value=2.0](%x4) : f32[]
  %v4 = setitem[starts=[0], ends=[1], steps=[0]](%x0, %x17) : f32[1]
  %v5 = cos(%x0) : f32[1]
  return %v5, %x0, %v15, %x4
}"""

#: slices and an integer index on two axes, a broadcast source
SLICED = """graph main(%x0: f32[4,3], %y1: f32[], %z2: f32[2,3]) {
  %v3 = setitem[starts=[1, 2], ends=[3, 3], steps=[1, 0]](%x0, %y1) : f32[4,3]
  %v4 = setitem[starts=[0], ends=[4], steps=[2]](%x0, %z2) : f32[4,3]
  %v5 = mul(%x0, %x0) : f32[4,3]
  return %x0, %v5
}"""


def _values(g) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {v.name: rng.uniform(-2, 2, tuple(int(d) for d in v.type.shape))
            .astype(v.type.dtype.numpy) for v in g.inputs}


@pytest.mark.parametrize("dialect", ["python", "hop"])
def test_setitem_is_printed_as_an_indexed_assignment(dialect):
    g = ir.verify(ir.parse(REDUCED))
    src = torch_source(g, dialect)
    assert "x0[0,] = x17" in src and "_t1 = x4.fill_(2.0)" in src, src
    assert check_source(src, g, _values(g)) is None, src
    g = ir.verify(ir.parse(SLICED))
    src = torch_source(g, dialect)
    assert "x0[1:3:1, 2] = y1" in src and "x0[0:4:2,] = z2" in src, src
    assert check_source(src, g, _values(g)) is None, src


def test_check_source_catches_a_dropped_write():
    g = ir.verify(ir.parse(REDUCED))
    src = torch_source(g, "hop")
    dropped = src.replace("        x0[0,] = x17\n", "")
    assert dropped != src
    assert check_source(dropped, g, _values(g)) == "output 0: values differ"
    # on its own example values too: torch_source runs this check before it returns
    assert check_source(dropped, g, example_values(g)) is not None


def test_check_source_compares_the_inputs_a_module_writes():
    g = ir.verify(ir.parse(REDUCED))
    src = torch_source(g, "python")
    # the same outputs, computed without writing the caller's x4
    forked = src.replace("_t1 = x4.fill_(2.0)", "x4 = x4.clone(); _t1 = x4.fill_(2.0)")
    assert check_source(forked, g, _values(g)) == "input %x4 (after the run): values differ"


def test_torch_source_refuses_code_that_computes_something_else(monkeypatch):
    g = ir.verify(ir.parse(REDUCED))
    real = source_module._source
    monkeypatch.setattr(source_module, "_source", lambda *a: real(*a).replace("x0[0,] = x17", "pass"))
    with pytest.raises(CodegenError, match="output 0: values differ"):
        torch_source(g, "python")
    assert "pass" in torch_source(g, "python", verify=False)


def _write(x, y):
    """A torch-function-aware call that writes `x` and returns nothing (as `__setitem__`)."""
    from torch.overrides import handle_torch_function, has_torch_function

    if has_torch_function((x, y)):
        return handle_torch_function(_write, (x, y), x, y)
    x.copy_(y)
    return None


def test_an_effect_only_call_is_refused_not_dropped(monkeypatch):
    def setitem_by_call(self, x, y):
        _write(x[0], y)
        return x

    monkeypatch.setattr(SetItem, "torch", setitem_by_call)
    g = ir.verify(ir.parse(REDUCED))
    with pytest.raises(CodegenError, match="returns nothing"):
        torch_source(g, "python")
