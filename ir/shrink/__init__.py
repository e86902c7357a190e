"""The test-case reducer: named passes to a fixed point under a total size order.

Layers, lowest first: core, ops, analysis, materialize, numerics, shrink, gen; a module imports
only its own layer and those below (tests/ir/test_layers.py).
"""
