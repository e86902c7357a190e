"""The operator library: importing this package registers every op (one module per family)."""
from ir.ops import (  # noqa: F401
    binary, cast, conv, elementwise, index, linear, norm, pad, pool, reduce, resize, rnn, shape,
    softmax,
)
from ir.op import OP_REGISTRY

__all__ = ["OP_REGISTRY"]
