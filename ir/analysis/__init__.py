"""Facts about a graph, above the core and the op library: aliasing and in-place writes
(storage classes, rejections, functionalization, the torch plan) and output tolerances.

Layers, lowest first: core, ops, analysis, materialize, numerics, shrink, gen; a module imports
only its own layer and those below (tests/ir/test_layers.py).
"""
