"""The parts of a standalone repro.py are real modules (campaign/backends/repro_scripts): each
compiles, and the script a backend's `ReproSpec` assembles from them is valid Python that
imports nothing of dynsmith and gives every per-test value its part declares."""
from __future__ import annotations

import ast
import importlib.util
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import campaign.backends.repro_scripts as scripts
from campaign.backends import make_backend
from campaign.backends.base import ReproSpec, root_error
from campaign.backends.repro_scripts import prelude
from campaign.backends.tvm import TVM_BODIES
from campaign.triage.pipeline.repro_source import (
    SCRIPTS,
    part_source,
    program_dialect,
    repro_source,
    repro_spec_of,
)
from ir import parse
from ir.materialize.grad import GradSpec

G = parse("""graph main(%x0: f32[3,4], %w1: param f32[4,2]) {
  %v2 = matmul(%x0, %w1) : f32[3,2]
  %v3 = tanh(%v2) : f32[3,2]
  return %v3
}""")

EXPECT = {"verdict": "mismatch", "stage": "compare", "error_class": "Mismatch",
          "error_sig": None}


def _undefined(src: str) -> set[str]:
    """The global names the script reads that it never defines (nor are builtins)."""
    import builtins
    import symtable

    top = symtable.symtable(src, "repro.py", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    used: set[str] = set()
    todo = [top]
    while todo:
        t = todo.pop()
        todo += t.get_children()
        used |= {s.get_name() for s in t.get_symbols()
                 if s.is_referenced() and (s.is_global() or t is top)}
    return used - defined - set(dir(builtins)) - {"__file__", "__name__"}


def _imports(src: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            out.add("." if node.level else (node.module or "").split(".")[0])
    return out


SPECS = ["ort", "ort?disabled_optimizers=ConstantFolding&execution_mode=parallel&threads=2",
         "tvm", "tvm?mcpu=haswell&opt_level=0", "tvm_torch", "inductor",
         "inductor?simdlen=0&mode=max-autotune-no-cudagraphs&cpp_wrapper=true",
         "inductor?dialect=mixed", "aot_eager?donated_buffer=false", "onnx_export",
         "onnx_export?dynamo=false&opset=21"]


def _parts() -> list[str]:
    """Every script part: the shared ones (campaign/backends/repro_scripts) and those each
    backend's folder holds, named by its `ReproBodies`."""
    parts = {f"{SCRIPTS}.{m.name}" for m in pkgutil.iter_modules(scripts.__path__)}
    for spec in SPECS:
        how = repro_spec_of(spec)
        assert how is not None and how.bodies is not None
        b = how.bodies
        for named in (b.infer, b.dynshape, b.training, b.transform, b.cache):
            parts |= set(named or ())
    return sorted(parts)


PARTS = _parts()


@pytest.mark.parametrize("name", PARTS)
def test_every_part_is_a_python_module_that_compiles(name):
    found = importlib.util.find_spec(name)
    assert found is not None and found.origin is not None
    path = Path(found.origin)
    compile(path.read_text(), str(path), "exec")
    if not name.endswith(".model"):  # the stub of the generated class is never copied
        copied = part_source(name, _Any())
        assert not _imports(copied) & {"campaign", "ir", "mutators", ".", "__future__"}, name


def test_each_backends_own_parts_are_in_its_folder():
    """A backend is one folder: the parts its script copies are its own modules, or the
    shared ones (an ORT session is the ORT folder's, which the exporter's script uses too)."""
    backend_parts = [p for p in PARTS if not p.startswith(f"{SCRIPTS}.")]
    assert "campaign.backends.ort.session" in backend_parts
    assert all(p.split(".")[2] in ("ort", "tvm", "tvm_torch", "inductor", "onnx_export")
               and len(p.split(".")) == 4 for p in backend_parts), backend_parts



class _Any(dict):
    """Values for any declared name (0)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> int:
        return 0


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("trains", [False, True], ids=["forward", "gradient"])
def test_each_backends_repro_is_valid_standalone_python(spec, trains):
    how = repro_spec_of(spec)
    assert how is not None and how.bodies is not None and how.bodies.infer
    grad = GradSpec(("x0", "w1"), ({"v3": np.ones((3, 2), np.float32)},)) if trains else None
    src = repro_source(how, G, EXPECT, [(1e-3, 1e-4)] * 3, "header", grad=grad)
    compile(src, "repro.py", "exec")
    assert not _imports(src) & {"campaign", "ir", "mutators", "."}
    # every name a part takes from another is in the script (train_step, train_relax: called
    # only when GRADIENTS, a gradient test's)
    assert _undefined(src) <= ({"train_step", "train_relax"} if how.trains and not trains
                               else set())
    body = src.split('"""', 2)[2]
    assert "campaign" not in body and "{{" not in body
    assert "def main()" in body and body.rstrip().endswith("main()")
    for name, value in how.options.items():  # the options are the body's constants
        if name == "fullgraph" and how.dialect == "mixed":  # python (by the seed) breaks graphs
            value = False
        assert f"\n{name.upper()} = {value!r}\n" in body, name
    trained_by_tvm = trains and how.trains and how.kind == "tvm"
    assert ("def train_step(" in body) == (trains and how.trains and not trained_by_tvm)
    # TVM trains as its backend does: relax.transform.Gradient (tvm/relax_training)
    assert ("def train_relax(" in body) == trained_by_tvm
    if trains and how.trains:
        assert "\nLEAVES = ['x0', 'w1']\n" in body and "\nGRADIENTS = True\n" in body
    assert ("\nclass Model(" in body) == (how.dialect is not None)


@pytest.mark.parametrize("spec", ["aot_eager?dialect=python", "inductor?dialect=python&simdlen=0"])
def test_a_transform_tests_repro_is_valid_standalone_python(spec):
    """A transform test's script: the transformed program (ir/materialize/torch_func.py, copied)
    compiled by the backend (inductor/repro_transform), no training step."""
    from ir.materialize.transforms import TransformSpec

    how = repro_spec_of(spec)
    assert how is not None
    transform = TransformSpec("vjp", ("x0", "w1"), ("python",), outputs=(0,),
                              cotangents=({"v3": np.ones((3, 2), np.float32)},))
    grad = GradSpec(("x0",), ({"v3": np.ones((3, 2), np.float32)},))  # a transform wins
    src = repro_source(how, G, EXPECT, [(1e-3, 1e-4)] * 3, "header", grad=grad,
                       transform=transform)
    compile(src, "repro.py", "exec")
    assert not _imports(src) & {"campaign", "ir", "mutators", "."} and not _undefined(src)
    body = src.split('"""', 2)[2]
    assert "campaign" not in body and "def train_step(" not in body
    assert "transform_program(model, sets, INPUTS, OUTPUTS, HERE)" in body
    assert "\nOUTPUTS = ['v3']\n" in body and "\nGRADIENTS = False\n" in body
    # TVM runs no transform: its script is the forward's
    tvm_src = repro_source(repro_spec_of("tvm"), G, EXPECT, [(1e-3, 1e-4)], "header",
                           transform=transform)
    assert "\nGRADIENTS = False\n" in tvm_src and "transform_program(" not in tvm_src
    # a compiler configured for the hop dialect compiles it in the python one, graph breaks
    # allowed, as the fuzzer ran it (`Backend.ADAPTS_DIALECT`); torch eager does not adapt
    hop = repro_source(repro_spec_of("aot_eager"), G, EXPECT, [(0, 0)], "h", transform=transform)
    assert "\nFULLGRAPH = False\n" in hop and "torch.cond(" not in hop
    with pytest.raises(ValueError, match="only in the python dialect, not hop"):
        repro_source(repro_spec_of("eager?dialect=hop"), G, EXPECT, [(0, 0)], "h",
                     transform=transform)


def test_a_value_no_part_declares_or_a_declared_value_not_given_is_an_error():
    how = repro_spec_of("ort")
    assert how is not None
    with pytest.raises(ValueError, match="no part declares BOGUS"):
        repro_source(ReproSpec("ort", {**how.options, "bogus": 1}, bodies=how.bodies), G,
                     EXPECT, [(0, 0)], "h")
    with pytest.raises(ValueError, match="no value for THREADS"):
        repro_source(ReproSpec("ort", {k: v for k, v in how.options.items() if k != "threads"},
                               bodies=how.bodies), G, EXPECT, [(0, 0)], "h")
    with pytest.raises(ValueError, match="^no standalone reproducer for backend kind 'ort'$"):
        repro_source(ReproSpec("ort", how.options), G, EXPECT, [(0, 0)], "h")


def test_a_backend_says_how_it_is_reproduced():
    assert make_backend("eager").repro_spec() is None  # the reference itself
    assert repro_spec_of("eager") is None and repro_spec_of("no_such_backend") is None
    eager = repro_spec_of("eager?dialect=hop")  # a module in a dialect, run without compile
    assert eager is not None and eager.kind == "inductor" and eager.trains
    assert eager.options["compiler"] == "none" and eager.dialect == "hop"
    how = repro_spec_of("onnx_export?params=parameter")
    assert how is not None and how.kind == "onnx_export"
    assert how.dialect == "hop" and how.form.params == "parameter"
    assert program_dialect(how, 0) == "hop" and program_dialect(repro_spec_of("ort"), 0) == "python"
    assert make_backend("tvm").repro_spec() == ReproSpec(
        "tvm", {"target": "llvm", "mcpu": None, "opt_level": 3, "pipeline": "fused",
                "disabled_pass": []}, trains=True, bodies=TVM_BODIES)
    assert TVM_BODIES.training == ("campaign.backends.tvm.relax",  # its own reverse mode
                                   "campaign.backends.tvm.relax_training",
                                   "campaign.backends.tvm.repro")
    assert not make_backend("tvm_torch").repro_spec().trains  # its backend runs forward
    assert make_backend("inductor").repro_spec().trains


def test_dynsmith_and_the_scripts_unwrap_errors_with_one_function():
    assert root_error is prelude.root_error

    class BackendCompilerFailed(Exception):
        pass

    inner = ValueError("the real error")
    try:
        raise BackendCompilerFailed("backend='inductor' raised:") from inner
    except BackendCompilerFailed as e:
        assert root_error(e) is inner


def test_the_higher_order_ops_of_a_program_are_asked_of_its_ops_bodies_included():
    from campaign.triage.pipeline.repro_source import higher_order_ops
    from ir.core.text import parse

    g = parse("""graph main(%n: i64[], %p: b8[], %x: f32[2]) {
  %y = loop(%n, %p, %x) : f32[2] {
    graph body(%i: i64[], %q: b8[], %b: f32[2]) {
      %z = if(%q, %b) : f32[2] {
        graph then(%a: f32[2]) {
          %s = sin(%a) : f32[2]
          return %s
        }
        graph else(%c: f32[2]) {
          return %c
        }
      }
      return %q, %z
    }
  }
  %w = tanh(%y) : f32[2]
  return %w
}""")
    assert higher_order_ops(g) == ["torch.while_loop", "torch.cond"]
    assert higher_order_ops(parse("graph main(%x: f32[2]) {\n  %y = tanh(%x) : f32[2]\n"
                                  "  return %y\n}")) == []
