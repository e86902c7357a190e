"""The parts of a standalone `repro.py` (docs/triage.md): plain Python modules that ruff and
mypy check, copied verbatim into each script by `campaign.triage.pipeline.repro.repro_source`.

A script is its parts in order: the parts every script shares, here (`prelude`: loading the
folder's data, stages, the timeout watchdog, judging the outputs; `localize`: the
localization plan), then for torch backends `training` (a gradient test's step) or
`ir.materialize.torch_func` (a transform test's program) and the graph as torch code
(`class Model`, printed by `ir.materialize.torch_source`), then the backend's own parts, which
live in its folder beside it and are named by its `ReproBodies` (`Backend.repro_spec`):
`ort/session` + `ort/repro`; `tvm/relax` + `tvm/repro` (a gradient test: `tvm/relax` +
`tvm/relax_training` + `tvm/repro`, TVM's own reverse mode); `tvm/relax` + `tvm_torch/repro`;
`inductor/torch_compile` + `inductor/repro` (or `inductor/repro_transform`; a dynamic-shape
test: `inductor/shape_guards` + `inductor/torch_compile` + `inductor/repro_shapes`; a cache
test: `inductor/torch_compile` + `inductor/caches` + `inductor/repro_cache`, after its two
programs as source text); `ort/session` + `onnx_export/repro`. Four parts are dynsmith's own
code as well: `prelude.root_error` (the backends' rows), `ort/session` (the ORT backends'
sessions), `tvm/relax_training` (how the `tvm` backend trains a gradient test) and
`inductor/caches` (how the Inductor backend turns the compile caches on for a cache test).

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
