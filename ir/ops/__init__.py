"""The operator library: importing this package registers every op (one module per family)."""
from ir.core.op import OP_REGISTRY
from ir.ops import (  # noqa: F401  # noqa: F401,E402  (in-place writes and views: docs/inplace.md)
    binary,
    cast,
    conv,
    custom,
    elementwise,
    embedding,
    index,
    inplace,
    linear,
    norm,
    pad,
    pooling,
    reduce,
    region,
    resize,
    rnn,
    shape,
    softmax,
    views,
)

__all__ = ["OP_REGISTRY"]
