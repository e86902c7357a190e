"""The core: the IR itself. Types and dims (dtypes, types, shapes), the graph (graph, op), the
one verifier, the text form, rewrites, paths into nested bodies, fresh names, the interpreter
loop, and what every op's lowering takes (sampling context, ONNX builder). Imports nothing
else of ir/.

Layers, lowest first: core, ops, analysis, materialize, numerics, shrink, gen; a module imports
only its own layer and those below (tests/ir/test_layers.py).
"""
