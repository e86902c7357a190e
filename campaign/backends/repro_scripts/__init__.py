"""The parts of a standalone `repro.py` (docs/triage.md): plain Python modules that ruff and
mypy check, copied verbatim into each script by `campaign.triage.pipeline.repro.repro_source`.

A script is the parts of its backend kind in order: `prelude` (loading the folder's data,
stages, the timeout watchdog, judging the outputs), then for torch backends `training` (a
gradient test's step) or `ir.materialize.torch_func` (a transform test's program) and the
graph as torch code (`class Model`, printed by `ir.materialize.torch_source`), then the backend's
body: `ort_session` + `ort`; `relax` + `tvm_onnx` (a gradient test: `relax` +
`relax_training` + `tvm_onnx`, TVM's own reverse mode); `relax` + `tvm_torch`;
`torch_compile` + `inductor` (or `inductor_transform`; a dynamic-shape test: `shape_guards` +
`torch_compile` + `inductor_shapes`); `ort_session` + `onnx_export`. Each
backend names its kind and options (`Backend.repro_spec`). Three parts are dynsmith's own
code as well: `prelude.root_error` (the backends' rows), `ort_session` (the ORT backends'
sessions) and `relax_training` (how the `tvm` backend trains a gradient test).

Rules for a part, so that the copy runs without dynsmith:
- it imports only the standard library, numpy and the backend's own library; names it takes
  from an earlier part are imported from that part's module
  (`from campaign.backends.repro_scripts.prelude import stage`: the copy drops imports
  of dynsmith's own packages, and the module docstring);
- the per-test values it reads are declared between the lines `# ---- per-test values` and
  `# ---- end of per-test values`, one plain assignment each: the copy replaces each with the
  test's value (`NAME = <repr>`), and every declared name must be given one;
- `model.Model` stands for the generated class: a part imports it, and the copy drops the
  import (`model` itself is never copied).
"""
