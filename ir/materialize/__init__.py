"""GraphIR -> a torch module or an ONNX model, and the dynamic-shape forms of both (one ONNX
model with dim_params, one torch module for every shape).

Layers, lowest first: core, ops, analysis, materialize, numerics, shrink, gen; a module imports
only its own layer and those below (tests/ir/test_layers.py).
"""
