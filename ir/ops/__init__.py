"""The operator library: importing this package registers every op (one module per family)."""
from ir.ops import cast, conv, elementwise, linear, reduce, shape, softmax  # noqa: F401
from ir.op import OP_REGISTRY

__all__ = ["OP_REGISTRY"]
