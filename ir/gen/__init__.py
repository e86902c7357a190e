"""Growing graphs with z3: the builder and its config, control flow, in-place writes and
dynamic shapes, and `generate`, which composes them.

Layers, lowest first: core, ops, analysis, materialize, numerics, shrink, gen; a module imports
only its own layer and those below (tests/ir/test_layers.py).
"""
