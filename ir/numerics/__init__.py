"""Concrete values: random inputs and params, the one validity check, the gradient-guided
input search and its repairs, and control-flow coverage (input sets that take other paths).

Layers, lowest first: core, ops, analysis, materialize, numerics, shrink, gen; a module imports
only its own layer and those below (tests/ir/test_layers.py).
"""
