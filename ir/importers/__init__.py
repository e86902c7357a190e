"""Importers: real models (torch modules, ONNX files) as GraphIR, and windows of them as seeds
(docs/mutation.md, "Seeds from models"). The layer above every other of ir/: an importer asks
the ops (their import rules), and a window is checked with the input search."""
