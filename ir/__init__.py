"""GraphIR: the graph representation, its verifier, text form, generator and materializers."""
import ir.analysis.inplace  # noqa: F401  (registers the verifier's check of views and in-place writes)
import ir.ops  # noqa: F401  (registers the op library)
import ir.ops.control  # noqa: F401  (registers control flow)
from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.text import ParseError, canonical_text, graph_hash, parse, print_graph
from ir.core.types import TensorType
from ir.core.verify import VerifyError, verify
from ir.gen.builder import GenConfig
from ir.gen.generate import generate

__all__ = [
    "DType", "GenConfig", "Graph", "Inst", "ParseError", "TensorType", "Value", "VerifyError",
    "canonical_text", "generate", "graph_hash", "parse", "print_graph", "verify",
]
