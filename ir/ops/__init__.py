"""The operator library: importing this package registers every op (one module per family)."""
from ir.ops import (  # noqa: F401
    binary, cast, conv, elementwise, index, linear, norm, pad, pool, reduce, resize, rnn, shape,
    softmax,
)
from ir.ops import inplace, views  # noqa: F401,E402  (in-place writes and views: docs/inplace.md)
from ir.core.op import OP_REGISTRY

__all__ = ["OP_REGISTRY"]
